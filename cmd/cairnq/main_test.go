package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/conformance/pgserver"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/ncruces/go-sqlite3"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/internal/testkit/syncbuf"
	"github.com/cairnq/cairnq-go/protocol"
)

func TestMain(m *testing.M) { pgserver.Main(m) }

// result is what one run of the CLI left: its output, its error and the
// exit status main would have used.
type result struct {
	stdout, stderr string
	err            error
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d (%v)\nstdout:\n%s\nstderr:\n%s", r.code, r.err, r.stdout, r.stderr)
}

// cliEnv runs the CLI with the environment variables in vars (and no
// others), in-process, as main would.
func cliEnv(t *testing.T, vars map[string]string, args ...string) result {
	t.Helper()
	var out, errOut syncbuf.Buffer
	err := run(t.Context(), args, &env{out: &out, errOut: &errOut, getenv: func(k string) string { return vars[k] }})
	if err != nil {
		reportError(&errOut, err)
	}
	return result{out.String(), errOut.String(), err, exitCode(err)}
}

func cli(t *testing.T, args ...string) result { t.Helper(); return cliEnv(t, nil, args...) }

// want fails t unless r exited with code.
func want(t *testing.T, r result, code int, args ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("cairnq %s: exit %d, want %d\n%s", strings.Join(args, " "), r.code, code, r)
	}
}

// ok runs the CLI and fails t unless it exited 0.
func ok(t *testing.T, args ...string) result {
	t.Helper()
	r := cli(t, args...)
	want(t, r, exitOK, args...)
	return r
}

// decode parses r's stdout as exactly one JSON document into v.
func decode(t *testing.T, r result, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON document\n%s", r)
	}
}

// backend is a real database the CLI runs on.
type backend struct {
	name    string
	dialect protocol.Dialect
	db      string // --db
	exec    func(t *testing.T, script string)
	// text runs a query returning one text (or integer) value.
	text func(t *testing.T, query string) string
	// now is the database clock in epoch ms, as the statements read it.
	now func(t *testing.T) int64
}

func sqliteBackend(t *testing.T) backend {
	path := filepath.Join(t.TempDir(), "tasks.db")
	open := func(t *testing.T) *sqlite3.Conn {
		t.Helper()
		c, err := sqlite3.Open("file:" + path + "?mode=rw")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.BusyTimeout(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		return c
	}
	return backend{
		name: "sqlite", dialect: protocol.SQLite, db: path,
		exec: func(t *testing.T, script string) {
			t.Helper()
			c := open(t)
			defer c.Close()
			if err := c.Exec(script); err != nil {
				t.Fatal(err)
			}
		},
		text: func(t *testing.T, query string) string {
			t.Helper()
			c := open(t)
			defer c.Close()
			st, _, err := c.Prepare(query)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if !st.Step() {
				t.Fatalf("%s: no row: %v", query, st.Err())
			}
			return st.ColumnText(0)
		},
		now: func(*testing.T) int64 { return time.Now().UnixMilli() },
	}
}

func postgresBackend(t *testing.T) backend {
	dsn := pgserver.DSN(t)
	connect := func(t *testing.T) *pgx.Conn {
		t.Helper()
		c, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	text := func(t *testing.T, query string) string {
		t.Helper()
		c := connect(t)
		defer c.Close(context.Background())
		var v any
		if err := c.QueryRow(t.Context(), query).Scan(&v); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		if v == nil {
			return ""
		}
		return fmt.Sprint(v)
	}
	return backend{
		name: "postgres", dialect: protocol.Postgres, db: dsn,
		exec: func(t *testing.T, script string) {
			t.Helper()
			c := connect(t)
			defer c.Close(context.Background())
			if _, err := c.Exec(t.Context(), script, pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatal(err)
			}
		},
		text: text,
		now: func(t *testing.T) int64 {
			var n int64
			fmt.Sscan(text(t, "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)"), &n)
			return n
		},
	}
}

// eachBackend runs fn on a fresh SQLite file and a fresh Postgres database.
func eachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, sqliteBackend(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, postgresBackend(t)) })
}

// taskJSON is the protocol's task object, as the CLI prints it.
type taskJSON struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Queue       string          `json:"queue"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	Priority    int             `json:"priority"`
	RunAtMs     int64           `json:"run_at_ms"`
	CreatedAtMs int64           `json:"created_at_ms"`
	CompletedMs *int64          `json:"completed_at_ms"`
}

// schemaJSON is migrate --check --json.
type schemaJSON struct {
	State              string `json:"state"`
	Schema             string `json:"schema"`
	ProtocolVersion    int    `json:"protocol_version"`
	SchemaVersion      int    `json:"schema_version"`
	SDKProtocolVersion int    `json:"sdk_protocol_version"`
	SDKSchemaVersion   int    `json:"sdk_schema_version"`
	Migrations         []struct {
		Name        string `json:"name"`
		AppliedAtMs int64  `json:"applied_at_ms"`
	} `json:"migrations"`
	Missing []string `json:"missing"`
	Unknown []string `json:"unknown"`
}

func TestHelpExitsZero(t *testing.T) {
	cases := [][]string{{"-h"}, {"--help"}, {"-help"}, {"help"}, {"help", "help"}}
	for _, c := range commands() {
		cases = append(cases, []string{c.name, "-h"}, []string{c.name, "--help"}, []string{"help", c.name})
	}
	for _, args := range cases {
		r := cli(t, args...)
		want(t, r, exitOK, args...)
		if !strings.HasPrefix(r.stdout, "usage: cairnq") || r.stderr != "" {
			t.Errorf("cairnq %s: usage not on stdout alone\n%s", strings.Join(args, " "), r)
		}
	}
	// A command's help shows its flags and its JSON.
	r := ok(t, "stats", "-h")
	for _, s := range []string{"-db", "-schema", "-json", "-queue", `{"queues":`} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stats -h lacks %q:\n%s", s, r.stdout)
		}
	}
	if r := ok(t, "--help"); !strings.Contains(r.stdout, "exit status") || !strings.Contains(r.stdout, "doctor") {
		t.Errorf("usage lacks the exit statuses or a command:\n%s", r.stdout)
	}
}

func TestUsageErrors(t *testing.T) {
	db := filepath.Join(t.TempDir(), "x.db")
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"help", "frobnicate"},
		{"help", "list", "extra"},
		{"stats", "--bogus"},
		{"stats", "--db", db, "extra"},
		{"demo", "--n", "1"},
		{"demo", "--bogus"},
		{"demo", "--db", "postgres://u@h/db"},
		{"submit", "--db", db, "name", "{not json"},
		{"submit", "--db", db},
		{"get", "--db", db},
		{"get", "--db", db, "a", "b"},
		{"cancel", "--db", db},
		{"stats", "--db", db, "--schema", "jobs"},
		{"stats", "--db", "postgres://u@h/db", "--schema", "no such"},
		{"doctor", "--db", db, "--window", "0s"},
	} {
		r := cli(t, args...)
		if !errors.Is(r.err, errUsage) || r.code != exitUsage {
			t.Errorf("cairnq %s: want a usage error (exit 2)\n%s", strings.Join(args, " "), r)
		}
	}
	// A bad flag is one line on stderr, naming the flag and the help.
	if r := cli(t, "list", "--bogus"); strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "-bogus") ||
		!strings.Contains(r.stderr, "'cairnq list -h'") || r.stdout != "" {
		t.Errorf("list --bogus:\n%s", r)
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a usage error created %s", db)
	}
}

func TestDBResolution(t *testing.T) {
	for _, c := range []struct {
		flag string
		vars map[string]string
		dsn  string
		pg   bool
	}{
		{"", nil, defaultDB, false},
		{"x.db", map[string]string{"CAIRNQ_DB": "y.db"}, "x.db", false},
		{"", map[string]string{"CAIRNQ_DB": "y.db", "DATABASE_URL": "postgres://u@h/db"}, "y.db", false},
		{"", map[string]string{"DATABASE_URL": "postgres://u@h/db"}, "postgres://u@h/db", true},
		{"", map[string]string{"DATABASE_URL": "POSTGRESQL://u@h/db"}, "POSTGRESQL://u@h/db", true},
		{"", map[string]string{"DATABASE_URL": "mysql://u@h/db"}, defaultDB, false},
		{"", map[string]string{"DATABASE_URL": "host=h dbname=d"}, defaultDB, false}, // a URL only
		{"host=h dbname=d", nil, "host=h dbname=d", true},
		{" dbname=d", nil, " dbname=d", true},
		{"", map[string]string{"CAIRNQ_DB": "user=u host=h"}, "user=u host=h", true},
		{"weird=name.db", nil, "weird=name.db", false},
		{"file:x.db?mode=rwc", nil, "file:x.db?mode=rwc", false},
	} {
		e := &env{getenv: func(k string) string { return c.vars[k] }, cmd: lookup("stats")}
		tg, err := (&dbFlags{db: c.flag}).target(e)
		if err != nil || tg.dsn != c.dsn || tg.postgres != c.pg {
			t.Errorf("--db %q with %v: %+v, %v; want %q (postgres %v)", c.flag, c.vars, tg, err, c.dsn, c.pg)
		}
	}
	// The target names a Postgres database without its password.
	tg := target{postgres: true, dsn: "postgres://u:secret@h:5433/db", schema: "jobs"}
	if s := tg.String(); strings.Contains(s, "secret") || !strings.Contains(s, "h:5433/db") || !strings.Contains(s, "jobs") {
		t.Errorf("target.String() = %q", s)
	}

	// End to end: $CAIRNQ_DB and $DATABASE_URL pick the database.
	path := filepath.Join(t.TempDir(), "env.db")
	r := cliEnv(t, map[string]string{"CAIRNQ_DB": path}, "migrate")
	want(t, r, exitOK, "migrate")
	r = cliEnv(t, map[string]string{"CAIRNQ_DB": path}, "stats", "--json")
	want(t, r, exitOK, "stats")
	dsn := pgserver.DSN(t)
	vars := map[string]string{"DATABASE_URL": dsn}
	want(t, cliEnv(t, vars, "migrate"), exitOK, "migrate")
	r = cliEnv(t, vars, "submit", "--json", "hello")
	want(t, r, exitOK, "submit")
	var task taskJSON
	decode(t, r, &task)
	// A key=value DSN reaches the same database.
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	kv := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", cfg.Host, cfg.Port, cfg.User, cfg.Database)
	r = cli(t, "get", "--json", "--db", kv, task.ID)
	want(t, r, exitOK, "get")
	var got taskJSON
	decode(t, r, &got)
	if got.ID != task.ID || got.Name != "hello" {
		t.Errorf("get through a key=value DSN = %+v", got)
	}
}

// Every command on each backend, its --json read back.
func TestCommands(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		db := []string{"--db", b.db}
		run := func(args ...string) result {
			t.Helper()
			return ok(t, append(append([]string{args[0]}, db...), args[1:]...)...)
		}
		code := func(c int, args ...string) result {
			t.Helper()
			full := append(append([]string{args[0]}, db...), args[1:]...)
			r := cli(t, full...)
			want(t, r, c, full...)
			return r
		}

		r := run("migrate")
		if n := len(protocol.Migrations(b.dialect)); !strings.Contains(r.stdout, fmt.Sprintf("applied %d migrations", n)) {
			t.Errorf("migrate:\n%s", r)
		}
		var m struct {
			Applied []string   `json:"applied"`
			Status  schemaJSON `json:"status"`
		}
		decode(t, run("migrate", "--json"), &m)
		if m.Applied == nil || len(m.Applied) != 0 || m.Status.State != "current" {
			t.Errorf("migrate --json again = %+v", m)
		}

		var first taskJSON
		decode(t, run("submit", "--json", "--queue", "q1", "--key", "k1", "--priority", "7", "--max-attempts", "2", "render", `{"n": 1}`), &first)
		if first.Name != "render" || first.Queue != "q1" || first.Status != "queued" || first.Priority != 7 ||
			first.MaxAttempts != 2 || string(first.Payload) != `{"n":1}` || !strings.HasPrefix(first.ID, "task_") {
			t.Errorf("submit --json = %+v", first)
		}
		second := strings.TrimSpace(run("submit", "--delay", "1h", "embed").stdout)
		if !regexp.MustCompile(`^task_[0-9A-Z]{26}$`).MatchString(second) {
			t.Errorf("submit printed %q, want the task id", second)
		}

		var stats struct {
			Queues map[string]cairnq.StatusCounts `json:"queues"`
		}
		decode(t, run("stats", "--json"), &stats)
		if len(stats.Queues) != 2 || stats.Queues["q1"].Queued != 1 || stats.Queues["default"].Queued != 1 {
			t.Errorf("stats --json = %+v", stats)
		}
		var one struct {
			Queues map[string]cairnq.StatusCounts `json:"queues"`
		}
		decode(t, run("stats", "--json", "--queue", "empty"), &one)
		if _, present := one.Queues["empty"]; !present || len(one.Queues) != 1 {
			t.Errorf("stats --json --queue empty = %+v", one)
		}
		if r := run("stats"); !regexp.MustCompile(`q1\s+1\s+0\s+0\s+0\s+0`).MatchString(r.stdout) {
			t.Errorf("stats:\n%s", r)
		}

		var list struct {
			Tasks []taskJSON `json:"tasks"`
		}
		decode(t, run("list", "--json"), &list)
		if len(list.Tasks) != 2 || list.Tasks[0].ID != second || list.Tasks[1].ID != first.ID {
			t.Errorf("list --json = %+v", list)
		}
		decode(t, run("list", "--json", "--queue", "nowhere"), &list)
		if list.Tasks == nil || len(list.Tasks) != 0 {
			t.Errorf("list --json of nothing = %+v, want an empty array", list)
		}
		if r := run("list", "--name", "render"); !strings.Contains(r.stdout, first.ID) || strings.Contains(r.stdout, second) {
			t.Errorf("list --name render:\n%s", r)
		}
		code(exitUsage, "list", "--status", "bogus")

		var got taskJSON
		decode(t, run("get", "--json", first.ID), &got)
		if got.ID != first.ID || got.CreatedAtMs != first.CreatedAtMs || string(got.Payload) != `{"n":1}` {
			t.Errorf("get --json = %+v", got)
		}
		if r := run("get", first.ID); !strings.HasPrefix(r.stdout, "id ") || !strings.Contains(r.stdout, first.ID) ||
			!strings.Contains(r.stdout, " UTC (") || !strings.Contains(r.stdout, "payload:\n  {\n    \"n\": 1\n  }") {
			t.Errorf("get prints no field a line, UTC times or the indented payload:\n%s", r)
		}
		missing := cairnq.NewTaskID()
		if r := code(exitNotFound, "get", missing); !strings.Contains(r.stderr, "not found") {
			t.Errorf("get of a missing id:\n%s", r)
		}

		decode(t, run("cancel", "--json", first.ID), &got)
		if got.Status != "canceled" || got.ID != first.ID || got.CompletedMs == nil {
			t.Errorf("cancel --json = %+v", got)
		}
		if r := code(exitError, "cancel", first.ID); !strings.Contains(r.stderr, "is canceled") {
			t.Errorf("cancel of a canceled task:\n%s", r)
		}
		code(exitNotFound, "cancel", missing)
		if r := run("cancel", second); r.stdout != second+" canceled\n" {
			t.Errorf("cancel:\n%s", r)
		}

		decode(t, run("retry", "--json", "--reset-attempt", first.ID), &got)
		if got.Status != "queued" || got.Attempt != 0 {
			t.Errorf("retry --json = %+v", got)
		}
		if r := code(exitError, "retry", first.ID); !strings.Contains(r.stderr, "is queued") {
			t.Errorf("retry of a queued task:\n%s", r)
		}
		code(exitNotFound, "retry", missing)

		var purged struct {
			Purged int `json:"purged"`
		}
		decode(t, run("purge", "--json", "--older-than", "0s", "--queue", "q1"), &purged)
		if purged.Purged != 0 {
			t.Errorf("purge of a queue with no finished task = %+v", purged)
		}
		decode(t, run("purge", "--json", "--older-than", "0s"), &purged)
		if purged.Purged != 1 {
			t.Errorf("purge --json = %+v, want the canceled task", purged)
		}
		code(exitNotFound, "get", second)
		if r := run("purge", "--older-than", "0s"); r.stdout != "purged 0 tasks\n" {
			t.Errorf("purge:\n%s", r)
		}
	})
}

// watch prints one JSON document per line, at the start and on every
// change, until it is stopped.
func TestWatch(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ok(t, "migrate", "--db", b.db)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var out, errOut syncbuf.Buffer
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"watch", "--db", b.db, "--json", "--poll", "20ms"}, &env{out: &out, errOut: &errOut, getenv: func(string) string { return "" }})
		}()
		lines := func() []watchLine {
			var ls []watchLine
			for l := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
				if l == "" {
					continue
				}
				var w watchLine
				if err := json.Unmarshal([]byte(l), &w); err != nil {
					t.Fatalf("a watch line is not JSON: %v\n%q", err, l)
				}
				ls = append(ls, w)
			}
			return ls
		}
		waitFor(t, "the start line", func() bool { ls := lines(); return len(ls) > 0 && ls[0].Reason == "start" })
		ok(t, "submit", "--db", b.db, "--queue", "watched", "hello")
		waitFor(t, "a line counting the submitted task", func() bool {
			ls := lines()
			return ls[len(ls)-1].Queues["watched"].Queued == 1
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("watch: %v\n%s", err, errOut.String())
		}
		for _, l := range lines() {
			if l.AtMs <= 0 || l.Queues == nil || !slices.Contains([]string{"start", "poll", "changed", "queued", "done"}, l.Reason) {
				t.Errorf("watch line %+v", l)
			}
		}
		if r := ok(t, "watch", "--db", b.db, "--for", "50ms"); !strings.Contains(r.stdout, "start") || !strings.Contains(r.stdout, "watched: 1 queued") {
			t.Errorf("watch --for:\n%s", r)
		}
	})
}

// waitFor polls cond until it holds, failing after 15s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDemoRunsToCompletion(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	r := ok(t, "demo", "--db", db, "--n", "120", "--concurrency", "4")
	out := r.stdout
	// 118 sample tasks succeed (some after a retry), the flaky one fails,
	// the delayed one was canceled.
	for _, want := range []string{
		`default\s+0\s+0\s+78\s+1\s+1`,
		`gpu\s+0\s+0\s+40\s+0\s+0`,
		`the worker settled 119 tasks in [0-9.]+m?s, from its start to the last settlement: [0-9]+ tasks/s at concurrency 4`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\r") {
		t.Error("progress rewrote a line in place on a non-terminal")
	}
	// The inspection commands work on the file the demo left.
	r = ok(t, "list", "--db", db, "--status", "failed")
	if !strings.Contains(r.stdout, "flaky") {
		t.Fatalf("list:\n%s", r)
	}
	id := regexp.MustCompile(`task_[0-9A-Z]{26}`).FindString(r.stdout)
	if r := ok(t, "get", "--db", db, id); !strings.Contains(r.stdout, "error:\n  TaskError bad_input: ") {
		t.Errorf("get:\n%s", r)
	}
}

// The ui command serves the console on the database, read-only unless
// told otherwise, behind basic auth when asked, and returns when
// interrupted.
func TestUI(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ok(t, "migrate", "--db", b.db)
		r := ok(t, "submit", "--db", b.db, "--json", "shown", `{"page":1}`)
		var task struct{ ID string }
		decode(t, r, &task)

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var out, errOut syncbuf.Buffer
		done := make(chan error, 1)
		vars := map[string]string{"CAIRNQ_UI_AUTH": "ops:s3cret"}
		go func() {
			done <- run(ctx, []string{"ui", "--db", b.db, "--addr", "127.0.0.1:0", "--basic-auth", "CAIRNQ_UI_AUTH"},
				&env{out: &out, errOut: &errOut, getenv: func(k string) string { return vars[k] }})
		}()
		var base string
		waitFor(t, "the console's address", func() bool {
			_, rest, ok := strings.Cut(out.String(), "http://")
			if !ok {
				return false
			}
			base = "http://" + strings.Fields(rest)[0]
			return true
		})
		get := func(path string, auth bool) (int, string) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if auth {
				req.SetBasicAuth("ops", "s3cret")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		if code, _ := get("/", false); code != http.StatusUnauthorized {
			t.Errorf("without credentials: %d, want 401", code)
		}
		if code, body := get("/api/tasks/"+task.ID, true); code != http.StatusOK || !strings.Contains(body, `"shown"`) {
			t.Errorf("GET /api/tasks/%s: %d\n%s", task.ID, code, body)
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/api/tasks/"+task.ID+"/cancel", nil)
		req.SetBasicAuth("ops", "s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("a write without --allow-writes: %d, want 403", resp.StatusCode)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("ui: %v\n%s", err, errOut.String())
		}
		var got struct{ Status string }
		decode(t, ok(t, "get", "--db", b.db, "--json", task.ID), &got)
		if got.Status != "queued" {
			t.Errorf("the task is %s after a refused cancel", got.Status)
		}
	})
	if r := cliEnv(t, nil, "ui", "--db", "x.db", "--basic-auth", "UNSET"); r.code != exitUsage {
		t.Errorf("--basic-auth with an empty variable: %s", r)
	}
}

// TestUIRefusesOtherHosts: a page on another site that resolves its own
// name to the console's address (DNS rebinding) sends that name as Host,
// and an Origin and Sec-Fetch-Site that pass the cross-origin check. With
// --allow-writes and no basic auth, such a request canceled a task and
// reads returned payloads. The console now answers only for the hosts it
// is served as.
func TestUIRefusesOtherHosts(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	ok(t, "migrate", "--db", db)
	var task struct{ ID string }
	decode(t, ok(t, "submit", "--db", db, "--json", "secret", `{"token":"s3cret"}`), &task)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"ui", "--db", db, "--addr", "127.0.0.1:0", "--allow-writes", "--allow-host", "ops.example"},
			&env{out: &out, errOut: &errOut, getenv: func(string) string { return "" }})
	}()
	var addr string
	waitFor(t, "the console's address", func() bool {
		_, rest, ok := strings.Cut(out.String(), "http://")
		if ok {
			addr = strings.Fields(rest)[0]
		}
		return ok
	})
	_, port, _ := net.SplitHostPort(addr)
	do := func(method, path, host string) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), method, "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Origin", "http://"+host)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	rebound := "rebind.attacker.example:" + port
	if code, body := do(http.MethodPost, "/tasks/"+task.ID+"/cancel", rebound); code != http.StatusMisdirectedRequest {
		t.Errorf("a cancel through a rebound name: %d, want 421\n%s", code, body)
	}
	if code, body := do(http.MethodGet, "/api/tasks/"+task.ID, rebound); code != http.StatusMisdirectedRequest || strings.Contains(body, "s3cret") {
		t.Errorf("a read through a rebound name: %d, want 421 and no payload\n%s", code, body)
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port, "ops.example"} {
		if code, body := do(http.MethodGet, "/api/tasks/"+task.ID, host); code != http.StatusOK || !strings.Contains(body, "s3cret") {
			t.Errorf("a read as %s: %d\n%s", host, code, body)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ui: %v\n%s", err, errOut.String())
	}
	var got struct{ Status string }
	decode(t, ok(t, "get", "--db", db, "--json", task.ID), &got)
	if got.Status != "queued" {
		t.Errorf("the task is %s after the rebound cancel", got.Status)
	}
}

// TestControlCharactersPrintEscaped: a queue or name holding a newline
// forged a row of list and stats, and one holding an escape sequence
// cleared and recolored the terminal. Every table and line of text shows
// them escaped; JSON was already safe.
func TestControlCharactersPrintEscaped(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	ok(t, "migrate", "--db", db)
	ok(t, "submit", "--db", db, "--queue", "q\nfake-row", "evil\x1b[2J\x1b[31mRED\u202e")
	for _, args := range [][]string{{"list"}, {"stats"}, {"doctor", "--max-wait", "1ns"}} {
		r := cli(t, append([]string{args[0], "--db", db}, args[1:]...)...)
		for _, bad := range []string{"\x1b", "\u202e", "\nfake-row"} {
			if strings.Contains(r.stdout, bad) {
				t.Errorf("cairnq %s prints %q raw:\n%s", args[0], bad, r.stdout)
			}
		}
		if !strings.Contains(r.stdout, `q\nfake-row`) {
			t.Errorf("cairnq %s does not show the queue escaped:\n%s", args[0], r.stdout)
		}
	}
	if r := ok(t, "list", "--db", db); !strings.Contains(r.stdout, `evil\x1b[2J\x1b[31mRED\u202e`) {
		t.Errorf("list does not show the name escaped:\n%s", r.stdout)
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain name": "plain name", "tab\there": `tab\there`, "ünï 名前": "ünï 名前", "\x7f": `\x7f`,
		"\xff": `\xff`, "\u0085": `\u0085`, "a\u200bb": `a\u200bb`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}
