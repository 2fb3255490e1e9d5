package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ncruces/go-sqlite3"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/internal/testkit/dirsnap"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
	"github.com/cairnq/cairnq-go/internal/testkit/readonly"
	"github.com/cairnq/cairnq-go/protocol"
)

// readCommands are the commands that only read, each as run on a database
// holding the task id.
func readCommands(id string) [][]string {
	return [][]string{
		{"stats"}, {"stats", "--json"}, {"list"}, {"list", "--json"}, {"get", id}, {"get", "--json", id},
		{"watch", "--for", "30ms"}, {"watch", "--json", "--for", "30ms"},
		{"doctor"}, {"doctor", "--json"}, {"migrate", "--check"}, {"migrate", "--check", "--json"},
	}
}

// noDatabaseCommands is every command that must find no database where
// there is none: the read commands and the writes that need an
// installation.
func noDatabaseCommands(id string) [][]string {
	return append(readCommands(id), []string{"submit", "x"}, []string{"cancel", id}, []string{"retry", id}, []string{"purge"},
		[]string{"workflow", "get", id}, []string{"workflow", "cancel", id}, []string{"workflow", "retry", id},
		[]string{"event", "send", id, "go"}, []string{"pause", "q"}, []string{"resume", "q"})
}

func withDB(args []string, db ...string) []string {
	return append(append([]string{args[0]}, db...), args[1:]...)
}

// A command that does not create finds no database where there is none,
// says so with exit 3, and leaves nothing behind: no file and no directory
// on SQLite, no table and no schema on Postgres.
func TestNoDatabaseCreatesNothing(t *testing.T) {
	id := cairnq.NewTaskID()
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		missing := filepath.Join(dir, "sub", "missing.db")
		for _, args := range noDatabaseCommands(id) {
			args = withDB(args, "--db", missing)
			r := cli(t, args...)
			want(t, r, exitNotFound, args...)
			if !strings.Contains(r.stderr, "no such database") {
				t.Errorf("cairnq %s: no clear message\n%s", strings.Join(args, " "), r)
			}
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("the commands left %v behind", entries)
		}
		var st schemaJSON
		r := cli(t, "migrate", "--check", "--json", "--db", missing)
		decode(t, r, &st)
		if st.State != "absent" || len(st.Missing) != len(protocol.Migrations(protocol.SQLite)) || st.SDKSchemaVersion != protocol.SchemaVersion {
			t.Errorf("migrate --check --json of a missing file = %+v", st)
		}

		// Another application's file: no cairnq tables, refused alike
		// and left as it was.
		app := filepath.Join(dir, "app.db")
		c, err := sqlite3.Open(app)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Exec("CREATE TABLE users (id integer primary key, name text); INSERT INTO users VALUES (1, 'a')"); err != nil {
			t.Fatal(err)
		}
		c.Close()
		before := dirsnap.Take(t, dir)
		for _, args := range noDatabaseCommands(id) {
			args = withDB(args, "--db", app)
			r := cli(t, args...)
			want(t, r, exitNotFound, args...)
			if !strings.Contains(r.stderr, "no cairnq tables") {
				t.Errorf("cairnq %s: no clear message\n%s", strings.Join(args, " "), r)
			}
		}
		dirsnap.Same(t, dir, before)
	})
	t.Run("postgres", func(t *testing.T) {
		b := postgresBackend(t)
		fingerprint := pgFingerprint(t, b)
		for _, db := range [][]string{{"--db", b.db}, {"--db", b.db, "--schema", "jobs"}} {
			for _, args := range noDatabaseCommands(id) {
				args = withDB(args, db...)
				r := cli(t, args...)
				want(t, r, exitNotFound, args...)
				if !strings.Contains(r.stderr, "no such database") {
					t.Errorf("cairnq %s: no clear message\n%s", strings.Join(args, " "), r)
				}
			}
		}
		if n := b.text(t, "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'cairnq%'"); n != "0" {
			t.Errorf("the database holds %s cairnq tables, want 0", n)
		}
		if got := pgFingerprint(t, b); got != fingerprint {
			t.Errorf("the database changed:\nbefore %s\nafter  %s", fingerprint, got)
		}
	})
}

// The read commands leave an installed database as it was: a SQLite file
// byte-identical with no -wal or -shm left, a Postgres database with the
// same tables, ledger and rows.
func TestReadCommandsChangeNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		for _, schema := range []string{"", "jobs"} {
			if schema != "" && b.dialect != protocol.Postgres {
				continue
			}
			db := []string{"--db", b.db}
			if schema != "" {
				db = append(db, "--schema", schema)
			}
			ok(t, withDB([]string{"migrate"}, db...)...)
			var task taskJSON
			decode(t, ok(t, withDB([]string{"submit", "--json", "n"}, db...)...), &task)
			before := fingerprint(t, b)
			for _, args := range readCommands(task.ID) {
				args = withDB(args, db...)
				if r := cli(t, args...); r.code != exitOK {
					t.Errorf("cairnq %s: exit %d\n%s", strings.Join(args, " "), r.code, r)
				}
			}
			if after := fingerprint(t, b); after != before {
				t.Errorf("schema %q: the read commands changed the database:\nbefore %s\nafter  %s", schema, before, after)
			}
		}
	})
}

// fingerprint is everything of b's database a read command could change.
func fingerprint(t *testing.T, b backend) string {
	t.Helper()
	if b.dialect == protocol.Postgres {
		return pgFingerprint(t, b)
	}
	files := dirsnap.Take(t, filepath.Dir(b.db))
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	sum := strings.Join(names, ",")
	for _, n := range names {
		sum += "|" + n + ":" + strconv.Itoa(len(files[n])) + ":" + strconv.FormatUint(fnv(files[n]), 16)
	}
	return sum
}

func fnv(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// pgFingerprint is the schemas, tables, ledgers, meta rows and task rows of
// b's database.
func pgFingerprint(t *testing.T, b backend) string {
	t.Helper()
	var out []string
	out = append(out, b.text(t, `SELECT coalesce(string_agg(nspname, ',' ORDER BY nspname), '') FROM pg_namespace`))
	out = append(out, b.text(t, `SELECT coalesce(string_agg(schemaname || '.' || tablename, ',' ORDER BY schemaname, tablename), '')
		FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')`))
	for _, schema := range strings.Split(b.text(t, `SELECT coalesce(string_agg(DISTINCT schemaname, ','), '') FROM pg_tables WHERE tablename = 'cairnq_tasks'`), ",") {
		if schema == "" {
			continue
		}
		q := func(s string) string { return strings.ReplaceAll(s, "S.", `"`+schema+`".`) }
		out = append(out,
			b.text(t, q(`SELECT coalesce(string_agg(name || ':' || applied_at_ms, ',' ORDER BY name), '') FROM S.cairnq_migrations`)),
			b.text(t, q(`SELECT coalesce(string_agg(key || '=' || value, ',' ORDER BY key), '') FROM S.cairnq_meta`)),
			b.text(t, q(`SELECT coalesce(string_agg(id || ':' || status || ':' || updated_at_ms, ',' ORDER BY id), '') FROM S.cairnq_tasks`)))
	}
	return strings.Join(out, " | ")
}

// migrate --check reports every state and exits by it; the read commands
// refuse what they must not run on, and migrate brings a database behind
// up to date.
func TestMigrateCheck(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		check := func(code int) schemaJSON {
			t.Helper()
			r := cli(t, "migrate", "--check", "--json", "--db", b.db)
			want(t, r, code, "migrate", "--check")
			var st schemaJSON
			decode(t, r, &st)
			return st
		}
		if st := check(exitNotFound); st.State != "absent" {
			t.Errorf("check of an empty database = %+v", st)
		}
		ok(t, "migrate", "--db", b.db)
		st := check(exitOK)
		if st.State != "current" || st.ProtocolVersion != 1 || st.SchemaVersion != protocol.SchemaVersion ||
			len(st.Migrations) != len(protocol.Migrations(b.dialect)) || len(st.Missing) != 0 || len(st.Unknown) != 0 {
			t.Errorf("check after migrate = %+v", st)
		}
		if b.dialect == protocol.Postgres && st.Schema != "public" {
			t.Errorf("check on Postgres names schema %q, want public", st.Schema)
		}
		for _, m := range st.Migrations {
			if m.AppliedAtMs <= 0 {
				t.Errorf("ledger row %+v", m)
			}
		}
		if r := ok(t, "migrate", "--check", "--db", b.db); !strings.Contains(r.stdout, "0001_init.sql") || !strings.Contains(r.stdout, "current") {
			t.Errorf("migrate --check:\n%s", r)
		}

		// Behind: the ledger lacks the newest migration.
		b.exec(t, "DELETE FROM cairnq_migrations WHERE name = '0010_drop_status_index.sql'")
		if st := check(exitAttention); st.State != "behind" || !slices.Equal(st.Missing, []string{"0010_drop_status_index.sql"}) {
			t.Errorf("check behind = %+v", st)
		}
		if r := cli(t, "stats", "--db", b.db); r.code != exitError || !strings.Contains(r.stderr, "lacks migrations 0010_drop_status_index.sql") {
			t.Errorf("stats on a database behind:\n%s", r)
		}
		r := cli(t, "doctor", "--json", "--db", b.db)
		want(t, r, exitAttention, "doctor")
		var rep doctorJSON
		decode(t, r, &rep)
		if rep.OK || rep.status("schema") != "attention" || rep.status("leases") != "skipped" {
			t.Errorf("doctor on a database behind = %+v", rep)
		}
		if r := ok(t, "migrate", "--db", b.db); !strings.Contains(r.stdout, "applied 1 migration: 0010_drop_status_index.sql") {
			t.Errorf("migrate of a database behind:\n%s", r)
		}
		check(exitOK)

		// Ahead: a newer SDK's migration; still usable.
		b.exec(t, "INSERT INTO cairnq_migrations (name, applied_at_ms) VALUES ('0099_future.sql', 1); UPDATE cairnq_meta SET value = '99' WHERE key = 'schema_version'")
		if st := check(exitAttention); st.State != "ahead" || !slices.Equal(st.Unknown, []string{"0099_future.sql"}) || st.SchemaVersion != 99 {
			t.Errorf("check ahead = %+v", st)
		}
		ok(t, "stats", "--db", b.db)
		if r := ok(t, "migrate", "--db", b.db); !strings.Contains(r.stdout, "nothing to apply") || !strings.Contains(r.stdout, "ahead") {
			t.Errorf("migrate of a database ahead:\n%s", r)
		}

		// Another protocol major: reported, refused, untouched.
		b.exec(t, "DELETE FROM cairnq_migrations WHERE name = '0099_future.sql'; UPDATE cairnq_meta SET value = '10' WHERE key = 'schema_version'")
		b.exec(t, "UPDATE cairnq_meta SET value = '2' WHERE key = 'protocol_version'")
		before := fingerprint(t, b)
		if st := check(exitAttention); st.State != "incompatible" || st.ProtocolVersion != 2 {
			t.Errorf("check incompatible = %+v", st)
		}
		for _, args := range [][]string{{"stats"}, {"migrate"}, {"submit", "x"}} {
			args = withDB(args, "--db", b.db)
			r := cli(t, args...)
			var pv *cairnq.ProtocolVersionMismatchError
			if r.code != exitError || !errors.As(r.err, &pv) || pv.Found != 2 {
				t.Errorf("cairnq %s on protocol 2:\n%s", strings.Join(args, " "), r)
			}
		}
		if after := fingerprint(t, b); after != before {
			t.Errorf("a database of another protocol changed:\nbefore %s\nafter  %s", before, after)
		}
	})
}

// doctorJSON is doctor --json.
type doctorJSON struct {
	OK       bool   `json:"ok"`
	Backend  string `json:"backend"`
	Database string `json:"database"`
	Checks   []struct {
		Check, Status, Detail string
	} `json:"checks"`
	Schema        schemaJSON `json:"schema"`
	ExpiredLeases []struct {
		ID           string `json:"id"`
		Name         string `json:"name"`
		Queue        string `json:"queue"`
		WorkerID     string `json:"worker_id"`
		LeaseUntilMs int64  `json:"lease_until_ms"`
		Attempt      int    `json:"attempt"`
		MaxAttempts  int    `json:"max_attempts"`
	} `json:"expired_leases"`
	Queues []struct {
		Queue         string `json:"queue"`
		Due           int    `json:"due"`
		OldestRunAtMs int64  `json:"oldest_run_at_ms"`
		OldestAgeMs   int64  `json:"oldest_age_ms"`
	} `json:"queues"`
	Failures []struct {
		Name           string `json:"name"`
		Count          int    `json:"count"`
		LastFailedAtMs int64  `json:"last_failed_at_ms"`
	} `json:"failures"`
	MaxWaitMs       int64 `json:"max_wait_ms"`
	FailureWindowMs int64 `json:"failure_window_ms"`
	MaxFailures     int   `json:"max_failures"`
}

func (d doctorJSON) status(check string) string {
	for _, c := range d.Checks {
		if c.Check == check {
			return c.Status
		}
	}
	return ""
}

func TestDoctor(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		doctor := func(code int, args ...string) doctorJSON {
			t.Helper()
			args = append([]string{"doctor", "--json", "--db", b.db}, args...)
			r := cli(t, args...)
			want(t, r, code, args...)
			var d doctorJSON
			decode(t, r, &d)
			// Every field is there, arrays as arrays.
			var raw map[string]json.RawMessage
			json.Unmarshal([]byte(r.stdout), &raw)
			for _, k := range []string{"ok", "backend", "database", "checks", "schema", "expired_leases", "queues", "paused", "failures", "max_wait_ms", "failure_window_ms", "max_failures"} {
				if v, ok := raw[k]; !ok || string(v) == "null" {
					t.Errorf("doctor --json: %s is %s", k, v)
				}
			}
			return d
		}
		ok(t, "migrate", "--db", b.db)
		d := doctor(exitOK)
		listen := "n/a"
		if b.dialect == protocol.Postgres {
			listen = "ok"
		}
		if !d.OK || d.Backend != b.name || d.Schema.State != "current" || d.status("schema") != "ok" || d.status("listen") != listen ||
			d.status("route") != listen || d.status("leases") != "ok" || d.status("queues") != "ok" || d.status("paused") != "ok" || d.status("failures") != "ok" || len(d.Checks) != 7 {
			t.Fatalf("doctor of a healthy database = %+v", d)
		}
		if r := ok(t, "doctor", "--db", b.db); !strings.Contains(r.stdout, "nothing needs attention") {
			t.Errorf("doctor:\n%s", r)
		}

		// A task whose lease ran out a minute ago with no claim since, a
		// queue whose work has waited two hours, and two failures.
		var stuck, late, send1, send2 taskJSON
		decode(t, ok(t, "submit", "--json", "--db", b.db, "stuck"), &stuck)
		decode(t, ok(t, "submit", "--json", "--db", b.db, "--queue", "gpu", "render"), &late)
		decode(t, ok(t, "submit", "--json", "--db", b.db, "--queue", "mail", "send"), &send1)
		decode(t, ok(t, "submit", "--json", "--db", b.db, "--queue", "mail", "send"), &send2)
		now := b.now(t)
		ms := func(v int64) string { return strconv.FormatInt(v, 10) }
		b.exec(t, "UPDATE cairnq_tasks SET status = 'running', attempt = 1, worker_id = 'w1', lease_until_ms = "+ms(now-60_000)+" WHERE id = '"+stuck.ID+"'")
		b.exec(t, "UPDATE cairnq_tasks SET run_at_ms = "+ms(now-2*3600_000)+" WHERE id = '"+late.ID+"'")
		b.exec(t, "UPDATE cairnq_tasks SET status = 'failed', attempt = 1, completed_at_ms = "+ms(now)+
			` WHERE id IN ('`+send1.ID+`', '`+send2.ID+`')`)

		d = doctor(exitAttention)
		if d.OK || d.status("schema") != "ok" || d.status("leases") != "attention" || d.status("queues") != "attention" || d.status("failures") != "attention" {
			t.Errorf("doctor checks = %+v", d.Checks)
		}
		if len(d.ExpiredLeases) != 1 || d.ExpiredLeases[0].ID != stuck.ID || d.ExpiredLeases[0].WorkerID != "w1" ||
			d.ExpiredLeases[0].LeaseUntilMs != now-60_000 || d.ExpiredLeases[0].Attempt != 1 {
			t.Errorf("doctor expired_leases = %+v", d.ExpiredLeases)
		}
		if len(d.Queues) != 1 || d.Queues[0].Queue != "gpu" || d.Queues[0].Due != 1 || d.Queues[0].OldestRunAtMs != now-2*3600_000 ||
			d.Queues[0].OldestAgeMs < 2*3600_000 {
			t.Errorf("doctor queues = %+v", d.Queues)
		}
		if len(d.Failures) != 1 || d.Failures[0].Name != "send" || d.Failures[0].Count != 2 || d.Failures[0].LastFailedAtMs != now {
			t.Errorf("doctor failures = %+v", d.Failures)
		}
		if d.MaxWaitMs != 300_000 || d.FailureWindowMs != 3600_000 || d.MaxFailures != 0 {
			t.Errorf("doctor thresholds = %+v", d)
		}
		r := cli(t, "doctor", "--db", b.db)
		want(t, r, exitAttention, "doctor")
		for _, s := range []string{"ATTENTION", stuck.ID, "gpu: 1 due", "send 2", "3 checks need attention"} {
			if !strings.Contains(r.stdout, s) {
				t.Errorf("doctor lacks %q:\n%s", s, r)
			}
		}

		// Looser thresholds leave only the lease.
		d = doctor(exitAttention, "--max-wait", "3h", "--max-failures", "2", "--window", "30m")
		if d.status("queues") != "ok" || d.status("failures") != "ok" || d.status("leases") != "attention" || d.FailureWindowMs != 1800_000 {
			t.Errorf("doctor with looser thresholds = %+v", d.Checks)
		}
		// Out of the window, the failures no longer count.
		b.exec(t, "UPDATE cairnq_tasks SET completed_at_ms = "+ms(now-2*3600_000)+" WHERE status = 'failed'")
		if d = doctor(exitAttention); d.status("failures") != "ok" || len(d.Failures) != 0 {
			t.Errorf("doctor of old failures = %+v", d)
		}
	})
}

// TestDoctorBehindPoolers: doctor works through a pooler on its defaults,
// says where the connection goes, and needs attention for LISTEN only in
// transaction mode, where notifications never arrive.
func TestDoctorBehindPoolers(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ok(t, "migrate", "--db", dsn)
	for _, c := range []struct {
		mode   pgtest.PoolMode
		code   int
		listen string
	}{
		{pgtest.PoolTransaction, exitOK, "n/a"},
		{pgtest.PoolSession, exitOK, "ok"},
	} {
		pooled := pgtest.Pooler(t, dsn, c.mode)
		r := cli(t, "doctor", "--json", "--db", pooled)
		want(t, r, c.code, "doctor", string(c.mode))
		var d doctorJSON
		decode(t, r, &d)
		detail := func(check string) string {
			for _, k := range d.Checks {
				if k.Check == check {
					return k.Detail
				}
			}
			return ""
		}
		if d.status("route") != "ok" || !strings.Contains(detail("route"), "pooler") || !strings.Contains(detail("route"), "unnamed") {
			t.Errorf("%s mode: route = %s %q", c.mode, d.status("route"), detail("route"))
		}
		if d.status("listen") != c.listen || d.status("schema") != "ok" || d.status("queues") != "ok" {
			t.Errorf("%s mode: checks = %+v", c.mode, d.Checks)
		}
		if c.mode == pgtest.PoolTransaction && !strings.Contains(detail("listen"), "pooler") {
			t.Errorf("transaction mode: listen = %q, want it to name the pooler", detail("listen"))
		}
	}
}

// TestReadOnlyDatabase: on a SQLite file this process may only read (an
// operator's copy, a backup), the reading commands work, and a write says
// permission denied. Before, every command said there was no such
// database and that 'cairnq migrate' would create one.
func TestReadOnlyDatabase(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "tasks.db")
	ok(t, "migrate", "--db", db)
	var task taskJSON
	decode(t, ok(t, "submit", "--json", "--db", db, "kept"), &task)
	ro, how := readonly.Dir(t, dir)
	db = filepath.Join(ro, "tasks.db")
	for _, args := range [][]string{
		{"stats"}, {"list"}, {"get", task.ID}, {"doctor"}, {"migrate", "--check"},
	} {
		r := ok(t, append([]string{args[0], "--db", db}, args[1:]...)...)
		if args[0] == "list" && !strings.Contains(r.stdout, task.ID) {
			t.Errorf("list on %s lacks the task:\n%s", how, r)
		}
	}
	r := cli(t, "submit", "--db", db, "refused")
	if r.code == exitOK || !strings.Contains(r.stderr, "permission denied") || strings.Contains(r.stderr, "migrate") {
		t.Errorf("submit on %s: want a failure saying permission denied, got\n%s", how, r)
	}
}
