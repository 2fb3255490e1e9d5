package conformance

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/protocol"
	"github.com/cairnq/cairnq-go/store"
)

// The scenarios of this module, run by every certification.
//
//go:embed scenarios/*.json
var embeddedScenarios embed.FS

// envScenariosDir names a directory of further scenarios every
// certification runs (CI points it at the reference SDK's scenarios).
const envScenariosDir = "CAIRNQ_SCENARIOS_DIR"

// Timeouts of the certification. A check that exceeds its own is a
// failure (usually a statement waiting for a connection the executor never
// gives back), not a hang.
const (
	checkTimeout  = 60 * time.Second
	notifyTimeout = 10 * time.Second
)

// Factory tells [CertifyExecutor] how to make the executor under test. Only
// Open is required; every other field's zero value is its default.
type Factory struct {
	// Name labels the executor in the suite's log and failure messages.
	// Default "the executor".
	Name string

	// Open returns an executor over a pool it opens for dsn, the way an
	// application would hand cairnq its own pool. The suite calls it once
	// per check, and once per lane of scenarios, each time with a fresh
	// database, from several goroutines at once. Open
	// should fail t (t.Fatal) when it cannot connect, and close its pool in
	// t.Cleanup: the suite closes the executor before that runs, and never
	// closes the pool itself. The pool must allow at least three
	// connections (a transaction, a statement outside it, and LISTEN).
	// Required.
	Open func(t testing.TB, dsn string) executor.Executor

	// AppPoolAlive, when set, reports whether the application's pool behind
	// ex still works (nil when it does); ex is an executor Open returned,
	// and may already be closed, so reach the pool through what Open
	// captured or through ex's own accessor, e.g.
	// ex.(*cairnqpgx.Executor).Pool().Ping(ctx). The suite calls it after a
	// store on ex was closed, and again after a store that owned ex closed
	// ex. Default nil: only the first half is checked, through ex itself.
	AppPoolAlive func(ctx context.Context, ex executor.Executor) error

	// Scenarios is a directory of further scenario files (*.json) to run
	// besides the ones embedded in this package and those in the directory
	// $CAIRNQ_SCENARIOS_DIR names. Default "": none.
	Scenarios string
}

// CertifyExecutor runs cairnq's executor certification against a real
// PostgreSQL server and fails t for every part of the executor contract the
// executor under test breaks. Each check is a subtest named for what it
// checks, whose failure says what is wrong and how to fix it:
//
//	int8_normalized, jsonb_normalized   rows in a form the store reads, and
//	                                    round trips through the store
//	null_params, params_bind            nil binds NULL; string, int64,
//	                                    float64, bool, text[] and JSON text bind
//	multi_statement_exec                Exec runs whole multi-statement scripts
//	sqlstate_errors                     errors keep the server's SQLSTATE
//	tx_commits, tx_rolls_back_on_error, tx_rolls_back_on_panic
//	tx_is_one_connection                a Tx session sees its own uncommitted
//	                                    writes and nothing else does
//	listen_channels, listen_stop        LISTEN delivers the requested
//	                                    channels only, until stop
//	listen_unavailable                  Listen works, or fails with
//	                                    executor.ErrListenUnavailable
//	store_close_keeps_app_pool          closing cairnq leaves the app's pool open
//	concurrent_submits                  many goroutines' submits, grouped by
//	                                    the store, each get their own row
//	worker_run                          a worker runs tasks to completion
//	scenarios/<name>                    every conformance scenario: this
//	                                    module's, Factory.Scenarios and
//	                                    $CAIRNQ_SCENARIOS_DIR
//
// Each check runs on a database of its own; the scenarios share a few
// databases, emptied (TRUNCATE) before each scenario. Checks and scenarios
// run concurrently from goroutines (not t.Parallel, so -parallel does not
// bound them), and CertifyExecutor returns when all are done.
//
// The listen checks are skipped when the executor is not an
// executor.Listener. A server that refuses LISTEN (a transaction-mode
// pooler) cannot be arranged on a normal server, so listen_unavailable
// checks only that Listen either works or reports
// executor.ErrListenUnavailable; an executor that may sit behind such a
// pooler must return an error wrapping it there.
//
// The server comes from [PostgresDSN]; the package under test should run
// its tests through [PostgresMain]:
//
//	func TestMain(m *testing.M) { conformance.PostgresMain(m) }
//
//	func TestMyExecutor(t *testing.T) {
//		conformance.CertifyExecutor(t, conformance.Factory{
//			Open: func(t testing.TB, dsn string) executor.Executor {
//				db, err := sql.Open("mydriver", dsn)
//				if err != nil {
//					t.Fatal(err)
//				}
//				t.Cleanup(func() { db.Close() })
//				return myexecutor.New(db)
//			},
//		})
//	}
func CertifyExecutor(t *testing.T, f Factory) {
	t.Helper()
	certify(testReporter{t}, f)
}

// reporter is where the checks report: *testing.T for CertifyExecutor,
// and a recorder in this package's tests, which certify deliberately
// broken executors and assert which checks fail.
type reporter interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	// Fatalf reports and ends the check.
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	// test is the running test, for provisioning, cleanups and the factory.
	test() *testing.T
	// run runs fn as a subtest called name and returns when it is done. It
	// may be called from several goroutines at once.
	run(name string, fn func(r reporter))
}

type testReporter struct{ *testing.T }

func (r testReporter) test() *testing.T { return r.T }

func (r testReporter) run(name string, fn func(r reporter)) {
	r.T.Run(name, func(t *testing.T) { fn(testReporter{t}) })
}

// Concurrency of a certification. Checks and scenarios mostly wait (on
// the server, on lease timers), so they run from goroutines rather than
// t.Parallel, which go test holds to the core count; the bounds keep their
// pools well below a server's default 100 connections.
const (
	// checkConcurrency is how many checks run at once, each on a database
	// of its own.
	checkConcurrency = 8
	// scenarioLanes is how many scenarios run at once. A lane is one
	// database and one executor, emptied between its scenarios: far cheaper
	// than creating and migrating a database per scenario.
	scenarioLanes = 4
)

// suite is one certification.
type suite struct {
	f    Factory
	name string
}

// check is one named part of the contract.
type check struct {
	name string
	fn   func(s *suite, r reporter)
}

// checks lists the contract checks, each run as a subtest of its name.
func checks() []check {
	return []check{
		{"int8_normalized", (*suite).int8Normalized},
		{"jsonb_normalized", (*suite).jsonbNormalized},
		{"null_params", (*suite).nullParams},
		{"params_bind", (*suite).paramsBind},
		{"multi_statement_exec", (*suite).multiStatementExec},
		{"sqlstate_errors", (*suite).sqlstateErrors},
		{"tx_commits", (*suite).txCommits},
		{"tx_rolls_back_on_error", (*suite).txRollsBackOnError},
		{"tx_rolls_back_on_panic", (*suite).txRollsBackOnPanic},
		{"tx_is_one_connection", (*suite).txIsOneConnection},
		{"listen_channels", (*suite).listenChannels},
		{"listen_stop", (*suite).listenStop},
		{"listen_unavailable", (*suite).listenUnavailable},
		{"store_close_keeps_app_pool", (*suite).storeCloseKeepsAppPool},
		{"concurrent_submits", (*suite).concurrentSubmits},
		{"worker_run", (*suite).workerRun},
	}
}

func certify(r reporter, f Factory) {
	r.Helper()
	if f.Open == nil {
		r.Fatalf("conformance: Factory.Open is nil. Fix: set it to a func that opens a pool for the dsn it is given and returns your executor over it")
	}
	s := &suite{f: f, name: f.Name}
	if s.name == "" {
		s.name = "the executor"
	}
	scenarios, err := s.scenarios()
	if err != nil {
		r.Fatalf("conformance: loading scenarios: %v", err)
	}
	r.Logf("conformance: certifying %s: %d checks and %d scenarios", s.name, len(checks()), len(scenarios))
	var wg sync.WaitGroup
	wg.Go(func() { r.run("scenarios", func(r reporter) { s.runScenarios(r, scenarios) }) })
	slots := make(chan struct{}, checkConcurrency)
	for _, c := range checks() {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			r.run(c.name, func(r reporter) { c.fn(s, r) })
		})
	}
	wg.Wait()
}

// scenarios loads the embedded scenarios, then those of Factory.Scenarios
// and $CAIRNQ_SCENARIOS_DIR (each directory once).
func (s *suite) scenarios() ([]Scenario, error) {
	entries, err := fs.ReadDir(embeddedScenarios, "scenarios")
	if err != nil {
		return nil, err
	}
	var out []Scenario
	for _, e := range entries {
		p := path.Join("scenarios", e.Name())
		data, err := embeddedScenarios.ReadFile(p)
		if err != nil {
			return nil, err
		}
		sc, err := ParseScenario(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		sc.Path = p
		out = append(out, sc)
	}
	var seen []string
	for _, dir := range []string{s.f.Scenarios, os.Getenv(envScenariosDir)} {
		if dir == "" {
			continue
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, err
		}
		if slices.Contains(seen, abs) {
			continue
		}
		seen = append(seen, abs)
		more, err := LoadScenarios(dir)
		if err != nil {
			return nil, err
		}
		if len(more) == 0 {
			return nil, fmt.Errorf("%s holds no scenarios (*.json)", dir)
		}
		out = append(out, more...)
	}
	return out, nil
}

// env is what a check runs on: a fresh database and an executor over it.
type env struct {
	ctx context.Context
	ex  executor.Executor
}

// setup gives the check a fresh database and an executor over it, closed
// when the check ends.
func (s *suite) setup(r reporter) env {
	r.Helper()
	e := s.setupOpen(r)
	r.test().Cleanup(func() {
		if err := e.ex.Close(); err != nil {
			r.Logf("closing the executor: %v", err)
		}
	})
	return e
}

// setupOpen is setup leaving the executor's Close to the check.
func (s *suite) setupOpen(r reporter) env {
	r.Helper()
	t := r.test()
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	t.Cleanup(cancel)
	ex := s.f.Open(t, PostgresDSN(t))
	if ex == nil {
		r.Fatalf("Factory.Open returned a nil executor. Fix: return an executor over a pool opened for the dsn Open is given")
	}
	return env{ctx: ctx, ex: ex}
}

// client opens a cairnq client on the check's executor, closed when the
// check ends (which leaves the executor open).
func (s *suite) client(r reporter, e env) *cairnq.Client {
	r.Helper()
	c, err := cairnq.OpenPostgres(e.ctx, e.ex, nil)
	if err != nil {
		r.Fatalf("cairnq.OpenPostgres on %s failed: %v. Fix: the store reads the catalog with Query and migrates with multi-statement Exec scripts inside Tx; the checks multi_statement_exec, tx_commits, params_bind and int8_normalized point at the part that breaks", s.name, err)
	}
	r.test().Cleanup(func() { c.Close() })
	return c
}

// exec runs a script the check needs as setup.
func exec(r reporter, e env, script string) {
	r.Helper()
	if err := e.ex.Exec(e.ctx, script); err != nil {
		r.Fatalf("Exec(%q) failed: %v. Fix: Exec must run a parameterless script on the pool (see multi_statement_exec)", script, err)
	}
}

// one runs a statement that yields exactly one row and returns it.
func one(r reporter, ctx context.Context, sess executor.Session, sql string, args ...any) executor.Row {
	r.Helper()
	rows, err := sess.Query(ctx, sql, args...)
	if err != nil {
		r.Fatalf("Query(%q) failed: %v. Fix: Query must run one statement with positional $n arguments on the pool (or the session's transaction) and return its rows", sql, err)
	}
	if len(rows) != 1 {
		r.Fatalf("Query(%q) returned %d rows, want 1. Fix: return every row the statement produced, one Row each", sql, len(rows))
	}
	return rows[0]
}

// column returns a row's value, failing the check when the column is
// missing.
func column(r reporter, row executor.Row, col string) any {
	r.Helper()
	v, ok := row[col]
	if !ok {
		r.Fatalf("the row has no key %q (it has %v). Fix: key every column by the name the server gives it, SQL NULL included (as nil)", col, keys(row))
	}
	return v
}

// count returns how many rows table holds, as seen through sess.
func count(r reporter, ctx context.Context, sess executor.Session, table string) int64 {
	r.Helper()
	row := one(r, ctx, sess, "SELECT count(*) AS n FROM "+table)
	n, err := int8Value(column(r, row, "n"))
	if err != nil {
		r.Fatalf("count(*): %v (see int8_normalized)", err)
	}
	return n
}

// dbNowMs reads the database clock in epoch milliseconds, the way the
// store stamps tasks.
func dbNowMs(r reporter, e env) int64 {
	r.Helper()
	row := one(r, e.ctx, e.ex, "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint) AS now_ms")
	n, err := int8Value(column(r, row, "now_ms"))
	if err != nil {
		r.Fatalf("reading the database clock: %v (see int8_normalized)", err)
	}
	return n
}

// int8Value reads a non-NULL bigint in the forms executor.Row allows
// (executor.Int64 defines them).
func int8Value(v any) (int64, error) {
	n, ok, err := executor.Int64(v)
	if err == nil && !ok {
		err = errors.New("NULL where a value was selected")
	}
	return n, err
}

// textValue reads a text column: a string or its bytes.
func textValue(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	}
	return "", fmt.Errorf("%s is not text (want string or []byte)", describe(v))
}

// jsonValueOf reads a jsonb column as the store does (executor.JSONText)
// and decodes it.
func jsonValueOf(v any) (any, error) {
	text, err := executor.JSONText(v)
	if err != nil || text == nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(text, &out); err != nil {
		return nil, fmt.Errorf("%s is not JSON text: %v", describe(v), err)
	}
	return out, nil
}

// describe shows a driver's value with its Go type, text quoted.
func describe(v any) string {
	switch x := v.(type) {
	case string, []byte, json.RawMessage:
		return fmt.Sprintf("%T %q", x, x)
	}
	return fmt.Sprintf("%T %v", v, v)
}

func keys(row executor.Row) []string {
	out := make([]string, 0, len(row))
	for k := range row {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func decodeJSON(s string) any {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		panic(err) // the suite's own literals
	}
	return v
}

// int8Normalized: bigint values come back in a form the store reads, and
// the store's integer fields (epoch-ms stamps, counts) come out right.
func (s *suite) int8Normalized(r reporter) {
	e := s.setup(r)
	const fix = "Fix: return the driver's bigint value unconverted, in a form executor.Int64 reads (int64, int32, int, an exact float64, json.Number, or its decimal text as string or []byte)"
	row := one(r, e.ctx, e.ex, "SELECT 4503599627370497::int8 AS big, (-42)::int8 AS neg, 0::int8 AS zero, "+
		"NULL::int8 AS absent, count(*) AS counted FROM (VALUES (1), (2)) AS v(x)")
	for _, want := range []struct {
		col string
		n   int64
	}{{"big", 4503599627370497}, {"neg", -42}, {"zero", 0}, {"counted", 2}} {
		v := column(r, row, want.col)
		n, err := int8Value(v)
		switch {
		case err != nil:
			r.Errorf("bigint column %s (%d) came back as %s, which the store cannot read: %v. %s", want.col, want.n, describe(v), err, fix)
		case n != want.n:
			r.Errorf("bigint column %s came back as %s, which reads as %d, not %d. %s", want.col, describe(v), n, want.n, fix)
		}
	}
	if v := column(r, row, "absent"); v != nil {
		r.Errorf("a NULL bigint came back as %s, not nil. Fix: return SQL NULL as nil; the store reads nil as a timestamp that is not set", describe(v))
	}

	c := s.client(r, e)
	before := dbNowMs(r, e)
	sub, err := c.Submit(e.ctx, "certify.int8", map[string]any{"n": 1}, &cairnq.SubmitOptions{Queue: "certify", MaxAttempts: 7, Priority: -3})
	if err != nil {
		r.Fatalf("Submit through the store failed: %v. The store reads the inserted row back (RETURNING *), epoch-ms bigint columns included. %s", err, fix)
	}
	after := dbNowMs(r, e)
	got, err := c.Get(e.ctx, sub.ID)
	if err != nil {
		r.Fatalf("Get through the store failed: %v. %s", err, fix)
	}
	list, err := c.List(e.ctx, &cairnq.ListOptions{Queue: "certify"})
	if err != nil {
		r.Fatalf("List through the store failed: %v. %s", err, fix)
	}
	if len(list) != 1 {
		r.Fatalf("List returned %d tasks, want the 1 submitted", len(list))
	}
	for op, task := range map[string]*cairnq.Task{"Submit": sub, "Get": got, "List": list[0]} {
		for field, at := range map[string]time.Time{"created_at_ms": task.CreatedAt, "updated_at_ms": task.UpdatedAt, "run_at_ms": task.RunAt} {
			if ms := at.UnixMilli(); ms < before || ms > after {
				r.Errorf("%s returned %s = %d, outside [%d, %d], the database clock just before and after the submit: the store misread a bigint column. %s", op, field, ms, before, after, fix)
			}
		}
		if task.MaxAttempts != 7 || task.Priority != -3 || task.Attempt != 0 {
			r.Errorf("%s returned max_attempts %d, priority %d, attempt %d; want 7, -3, 0. %s", op, task.MaxAttempts, task.Priority, task.Attempt, fix)
		}
		if !task.LeaseUntil.IsZero() || !task.CompletedAt.IsZero() {
			r.Errorf("%s returned lease_until %v and completed_at %v for a queued task, whose columns are NULL. Fix: return SQL NULL as nil", op, task.LeaseUntil, task.CompletedAt)
		}
	}
	stats, err := c.Stats(e.ctx, "certify")
	if err != nil {
		r.Fatalf("Stats through the store failed: %v. count(*) is a bigint. %s", err, fix)
	}
	if n := stats["certify"].Queued; n != 1 {
		r.Errorf("Stats counts %d queued tasks, want 1: the store misread count(*), a bigint. %s", n, fix)
	}
	if room, err := c.QueueHeadroom(e.ctx, "certify", 5); err != nil || room != 4 {
		r.Errorf("QueueHeadroom(5) = %d, %v; want 4 with one task queued. %s", room, err, fix)
	}
}

// jsonbNormalized: jsonb values come back in a form the store reads, and
// payload, metadata and result round-trip through the store unchanged.
func (s *suite) jsonbNormalized(r reporter) {
	e := s.setup(r)
	const fix = "Fix: return jsonb as the server's text ([]byte, string or json.RawMessage), or decoded as a map[string]any or []any; a string is always taken as JSON text, so a driver that decodes jsonb scalars must hand those back undecoded"
	cols := []struct{ col, json string }{
		{"obj", `{"s": "naïve \"q\" \\ 🚀", "n": -1.5, "b": true, "z": null, "l": [1, "two", []], "o": {}}`},
		{"arr", `[{"k": "v"}, 2, null]`},
		{"str", `"hello"`},
		{"numstr", `"123"`},
		{"num", `17`},
	}
	var sel []string
	for _, c := range cols {
		sel = append(sel, "'"+strings.ReplaceAll(c.json, "'", "''")+"'::jsonb AS "+c.col)
	}
	row := one(r, e.ctx, e.ex, "SELECT "+strings.Join(sel, ", ")+", NULL::jsonb AS absent")
	for _, c := range cols {
		v := column(r, row, c.col)
		got, err := jsonValueOf(v)
		if err != nil {
			r.Errorf("jsonb column %s (%s) cannot be read: %v. %s", c.col, c.json, err, fix)
			continue
		}
		if want := decodeJSON(c.json); !jsonEqual(got, want) {
			r.Errorf("jsonb column %s came back as %s, which reads as %s, want %s. %s", c.col, describe(v), show(got), show(want), fix)
		}
	}
	if v := column(r, row, "absent"); v != nil {
		r.Errorf("a NULL jsonb came back as %s, not nil. Fix: return SQL NULL as nil", describe(v))
	}

	c := s.client(r, e)
	metadata := map[string]any{"origin": "café", "flags": []any{true, false, nil}}
	payloads := []any{
		decodeJSON(cols[0].json), decodeJSON(cols[1].json), "hello", "123", 17.0, true,
	}
	ids := map[string]any{}
	for _, p := range payloads {
		task, err := c.Submit(e.ctx, "certify.json", p, &cairnq.SubmitOptions{Queue: "certify", Metadata: metadata})
		if err != nil {
			r.Fatalf("Submit of payload %s through the store failed: %v. %s", show(p), err, fix)
		}
		ids[task.ID] = p
	}
	claimed, err := storeOf(c).Claim(e.ctx, store.ClaimParams{Queues: []string{"certify"}, WorkerID: "certify", Lease: time.Minute, Limit: len(payloads)})
	if err != nil || len(claimed) != len(payloads) {
		r.Fatalf("Claim through the store returned %d tasks, %v; want %d. %s", len(claimed), err, len(payloads), fix)
	}
	for id, p := range ids {
		// The result echoes the payload: the result column is jsonb too.
		if _, err := storeOf(c).Succeed(e.ctx, id, "certify", p); err != nil {
			r.Fatalf("Succeed with result %s through the store failed: %v. %s", show(p), err, fix)
		}
		got, err := c.Get(e.ctx, id)
		if err != nil {
			r.Fatalf("Get through the store failed: %v. %s", err, fix)
		}
		for field, raw := range map[string]json.RawMessage{"payload": got.Payload, "result": got.Result} {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				r.Errorf("Get returned %s `%s`, which is not JSON (it went in as %s). %s", field, raw, show(p), fix)
			} else if !jsonEqual(v, jsonShapeOf(p)) {
				r.Errorf("Get returned %s `%s`, want %s. %s", field, raw, show(p), fix)
			}
		}
		var md any
		if err := json.Unmarshal(got.Metadata, &md); err != nil || !jsonEqual(md, jsonShapeOf(metadata)) {
			r.Errorf("Get returned metadata `%s`, want %s. %s", got.Metadata, show(metadata), fix)
		}
	}
}

// jsonShapeOf converts a Go value to decoded-JSON shapes.
func jsonShapeOf(v any) any {
	out, err := jsonValue(v)
	if err != nil {
		panic(err) // the suite's own values
	}
	return out
}

// nullParams: a nil argument binds SQL NULL, and SQL NULL comes back nil.
func (s *suite) nullParams(r reporter) {
	e := s.setup(r)
	const fix = "Fix: bind a nil argument as SQL NULL, whatever the parameter's type; the store passes nil for every absent value (optional filters, parent ids, messages)"
	rows, err := e.ex.Query(e.ctx, `SELECT
		CASE WHEN $1::text IS NULL THEN 'null' ELSE 'bound' END AS text_param,
		CASE WHEN $2::bigint IS NULL THEN 'null' ELSE 'bound' END AS bigint_param,
		CASE WHEN $3::jsonb IS NULL THEN 'null' ELSE 'bound' END AS jsonb_param,
		CASE WHEN $4::double precision IS NULL THEN 'null' ELSE 'bound' END AS float_param,
		$5::text AS after_nulls,
		NULL::text AS null_text`, nil, nil, nil, nil, "x")
	if err != nil {
		r.Fatalf("Query with nil arguments failed: %v. %s", err, fix)
	}
	if len(rows) != 1 {
		r.Fatalf("Query returned %d rows, want 1", len(rows))
	}
	row := rows[0]
	for _, col := range []string{"text_param", "bigint_param", "jsonb_param", "float_param"} {
		got, err := textValue(column(r, row, col))
		if err != nil {
			r.Errorf("%s: %v", col, err)
		} else if got != "null" {
			r.Errorf("a nil argument for a %s parameter did not bind SQL NULL: the server saw a value. %s", strings.TrimSuffix(col, "_param"), fix)
		}
	}
	if got, err := textValue(column(r, row, "after_nulls")); err != nil || got != "x" {
		r.Errorf("the argument after four nils came back as %v (%v), want \"x\": arguments must bind to $1..$n in order, nils included. %s", got, err, fix)
	}
	if v := column(r, row, "null_text"); v != nil {
		r.Errorf("a NULL text column came back as %s, not nil. Fix: return SQL NULL as nil, never as a zero value", describe(v))
	}
}

// paramsBind: the argument types the store passes bind as it expects.
func (s *suite) paramsBind(r reporter) {
	e := s.setup(r)
	text := "it's \"quoted\", back\\slash, naïve 🚀"
	array := `{"a","b \"q\" \\ c","","NULL-ish"}`
	row := one(r, e.ctx, e.ex, `SELECT $1::text AS s, $2::bigint AS i, $3::integer AS i4, $4::double precision AS f,
		$5::boolean AS b, cardinality($6::text[]) AS n, ($6::text[])[2] AS second, $7::jsonb ->> 'k' AS k,
		CASE WHEN $1::text = $8 THEN 'same' ELSE 'differs' END AS reused`,
		text, int64(1)<<40+1, int64(-7), 2.5, true, array, `{"k": "v ü"}`, text)
	if got, err := textValue(column(r, row, "s")); err != nil || got != text {
		r.Errorf("a string argument came back as %q (%v), want %q. Fix: bind string arguments as text, byte for byte", got, err, text)
	}
	for _, want := range []struct {
		col string
		n   int64
	}{{"i", 1<<40 + 1}, {"i4", -7}, {"n", 4}} {
		if n, err := int8Value(column(r, row, want.col)); err != nil || n != want.n {
			r.Errorf("an int64 argument (%s) came back as %d (%v), want %d. Fix: bind int64 arguments to bigint and integer parameters", want.col, n, err, want.n)
		}
	}
	switch f := column(r, row, "f").(type) {
	case float64:
		if f != 2.5 {
			r.Errorf("a float64 argument came back as %v, want 2.5", f)
		}
	default:
		if s, err := textValue(f); err != nil || s != "2.5" {
			r.Errorf("a float64 argument came back as %s, want 2.5. Fix: bind float64 arguments to double precision parameters", describe(f))
		}
	}
	if b, ok := column(r, row, "b").(bool); !ok || !b {
		r.Errorf("a bool argument came back as %s, want true. Fix: bind bool arguments to boolean parameters and return booleans as bool", describe(row["b"]))
	}
	if got, err := textValue(column(r, row, "second")); err != nil || got != `b "q" \ c` {
		r.Errorf("a text[] literal bound as a string lost its quoting: element 2 came back as %q (%v). Fix: bind the string as is; the store sends arrays as text[] literals", got, err)
	}
	if got, err := textValue(column(r, row, "k")); err != nil || got != "v ü" {
		r.Errorf("JSON text bound as a string and cast to jsonb came back as %q (%v), want \"v ü\". Fix: bind the string as is", got, err)
	}
	if got, err := textValue(column(r, row, "reused")); err != nil || got != "same" {
		r.Errorf("a parameter used twice ($1) did not bind the same value both times (%q, %v). Fix: bind $n by position; the store reuses parameters", got, err)
	}
	rows, err := e.ex.Query(e.ctx, "SELECT 1 AS x WHERE $1::boolean", false)
	if err != nil || len(rows) != 0 {
		r.Errorf("a statement yielding no rows returned %d rows, %v; want none and no error", len(rows), err)
	}
}

// multiStatementExec: Exec runs a whole script, statements with semicolons
// in function bodies included, on the pool and in a Tx session.
func (s *suite) multiStatementExec(r reporter) {
	e := s.setup(r)
	const fix = "Fix: send the script whole, as one simple-protocol query without arguments (database/sql: ExecContext with no args; pgx: QueryExecModeSimpleProtocol); never prepare it or split it on semicolons (function bodies hold them)"
	script := `CREATE TABLE cairnq_certify_multi (v integer);
INSERT INTO cairnq_certify_multi (v) VALUES (1);
CREATE FUNCTION cairnq_certify_times_ten() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.v := NEW.v * 10; -- a semicolon inside a body
    RETURN NEW;
END;
$$;
CREATE TRIGGER cairnq_certify_times_ten BEFORE INSERT ON cairnq_certify_multi
    FOR EACH ROW EXECUTE FUNCTION cairnq_certify_times_ten();
INSERT INTO cairnq_certify_multi (v) VALUES (2);`
	if err := e.ex.Exec(e.ctx, script); err != nil {
		r.Fatalf("Exec of a multi-statement script (a migration's shape) failed: %v. %s", err, fix)
	}
	values := func() []int64 {
		rows, err := e.ex.Query(e.ctx, "SELECT v FROM cairnq_certify_multi ORDER BY v")
		if err != nil {
			r.Fatalf("reading back what the script wrote: %v", err)
		}
		var out []int64
		for _, row := range rows {
			n, err := int8Value(column(r, row, "v"))
			if err != nil {
				r.Fatalf("integer column v: %v", err)
			}
			out = append(out, n)
		}
		return out
	}
	if got := values(); !slices.Equal(got, []int64{1, 20}) {
		r.Fatalf("after Exec the table holds %v, want [1 20]: every statement of the script must run, in order. %s", got, fix)
	}
	err := e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		return sess.Exec(ctx, "INSERT INTO cairnq_certify_multi (v) VALUES (3); INSERT INTO cairnq_certify_multi (v) VALUES (4);")
	})
	if err != nil {
		r.Fatalf("Exec of a two-statement script in a Tx session failed: %v. %s", err, fix)
	}
	if got := values(); !slices.Equal(got, []int64{1, 20, 30, 40}) {
		r.Fatalf("after Exec in a Tx session the table holds %v, want [1 20 30 40]. %s", got, fix)
	}
	err = e.ex.Exec(e.ctx, "INSERT INTO cairnq_certify_multi (v) VALUES (5); SELECT * FROM cairnq_certify_missing;")
	if err == nil {
		r.Fatalf("Exec of a script whose second statement fails returned nil. Fix: return the server's error")
	}
	if got := values(); !slices.Equal(got, []int64{1, 20, 30, 40}) {
		r.Errorf("a failing script left its earlier statements committed (the table holds %v): the statements ran one by one. %s; Postgres then runs it as one implicit transaction", got, fix)
	}
}

// sqlstateErrors: a server error keeps its SQLSTATE reachable through
// errors.As, which is how the store tells a lost migration race from a
// real failure.
func (s *suite) sqlstateErrors(r reporter) {
	e := s.setup(r)
	const fix = "Fix: wrap the driver's error with %%w (pgx's *pgconn.PgError and lib/pq's *pq.Error have a SQLState method), or give your error type a SQLState() string method"
	state := func(op string, err error, want string) {
		r.Helper()
		if err == nil {
			r.Errorf("%s succeeded, but the server fails it with SQLSTATE %s. Fix: return the server's error", op, want)
			return
		}
		var se interface{ SQLState() string }
		if !errors.As(err, &se) {
			r.Errorf("%s failed with %q, whose SQLSTATE errors.As(err, &x) cannot find (x an interface{ SQLState() string }); the store recognizes 42P07 and 23505 that way. "+fix, op, err)
			return
		}
		if got := se.SQLState(); got != want {
			r.Errorf("%s failed with SQLSTATE %q, want %q. Fix: report the server's own SQLSTATE", op, got, want)
		}
	}
	_, err := e.ex.Query(e.ctx, "SELECT * FROM cairnq_certify_missing")
	state("Query of a missing table", err, "42P01")
	exec(r, e, "CREATE TABLE cairnq_certify_twice (v integer)")
	state("Exec of CREATE TABLE for an existing table", e.ex.Exec(e.ctx, "CREATE TABLE cairnq_certify_twice (v integer)"), "42P07")
	err = e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		_, err := sess.Query(ctx, "SELECT * FROM cairnq_certify_missing")
		return err
	})
	state("Tx whose session queried a missing table", err, "42P01")
}

// txTable makes the table the tx checks write to.
func txTable(r reporter, e env) {
	r.Helper()
	exec(r, e, "CREATE TABLE cairnq_certify_tx (v text NOT NULL)")
}

func insertTx(ctx context.Context, sess executor.Session, v string) error {
	rows, err := sess.Query(ctx, "INSERT INTO cairnq_certify_tx (v) VALUES ($1)", v)
	if err == nil && len(rows) != 0 {
		err = fmt.Errorf("an INSERT without RETURNING returned %d rows, want none", len(rows))
	}
	return err
}

// poolUsable checks the executor still runs statements, a few times over
// so that a connection returned to the pool in a broken state is met.
func poolUsable(r reporter, e env, after string) {
	r.Helper()
	for range 8 {
		if _, err := e.ex.Query(e.ctx, "SELECT 1 AS x"); err != nil {
			r.Fatalf("after %s, a statement on the executor failed: %v. Fix: end the transaction (roll back) before its connection goes back to the pool", after, err)
		}
	}
}

// txCommits: Tx commits when fn returns nil.
func (s *suite) txCommits(r reporter) {
	e := s.setup(r)
	txTable(r, e)
	err := e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		if err := insertTx(ctx, sess, "query"); err != nil {
			return err
		}
		return sess.Exec(ctx, "INSERT INTO cairnq_certify_tx (v) VALUES ('exec')")
	})
	if err != nil {
		r.Fatalf("Tx returned %v for a fn that returned nil. Fix: commit and return nil", err)
	}
	if n := count(r, e.ctx, e.ex, "cairnq_certify_tx"); n != 2 {
		r.Errorf("after Tx returned nil, the executor sees %d of the 2 rows fn inserted: Tx must commit when fn returns nil", n)
	}
}

// txRollsBackOnError: Tx rolls back when fn returns an error, and returns
// that error.
func (s *suite) txRollsBackOnError(r reporter) {
	e := s.setup(r)
	txTable(r, e)
	failure := errors.New("conformance: fn fails on purpose")
	err := e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		if err := insertTx(ctx, sess, "rolled back"); err != nil {
			return err
		}
		return failure
	})
	if !errors.Is(err, failure) {
		r.Errorf("Tx returned %v, not the error fn returned. Fix: return fn's error unchanged (or wrapped with %%w): the store finds ErrLostLease and its other sentinels in it with errors.Is", err)
	}
	if n := count(r, e.ctx, e.ex, "cairnq_certify_tx"); n != 0 {
		r.Errorf("Tx committed although fn returned an error: the row fn inserted is visible afterwards. Fix: Tx must roll back when fn returns a non-nil error")
	}
	// A statement that fails aborts the transaction; the connection must
	// still come back usable.
	err = e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		_, err := sess.Query(ctx, "SELECT * FROM cairnq_certify_missing")
		return err
	})
	if err == nil {
		r.Errorf("Tx returned nil although fn returned the error of a failed statement. Fix: roll back and return fn's error")
	}
	poolUsable(r, e, "a Tx whose statement failed")
}

// panicValue is what txRollsBackOnPanic panics with.
type panicValue struct{ note string }

// txRollsBackOnPanic: Tx rolls back when fn panics, and re-panics.
func (s *suite) txRollsBackOnPanic(r reporter) {
	e := s.setup(r)
	txTable(r, e)
	boom := &panicValue{"conformance: fn panics on purpose"}
	var recovered any
	var err error
	func() {
		defer func() { recovered = recover() }()
		err = e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
			if err := insertTx(ctx, sess, "rolled back"); err != nil {
				return err
			}
			panic(boom)
		})
	}()
	switch {
	case recovered == nil:
		r.Errorf("Tx returned (%v) although fn panicked: it swallowed the panic. Fix: roll back in a deferred function, then let the panic continue (re-panic with the recovered value)", err)
	case recovered != boom:
		r.Errorf("Tx re-panicked with %v, not fn's panic value. Fix: re-panic with exactly the value recover() returned", recovered)
	}
	if n := count(r, e.ctx, e.ex, "cairnq_certify_tx"); n != 0 {
		r.Errorf("Tx committed although fn panicked: the row fn inserted is visible afterwards. Fix: roll back in a deferred function when fn does not return")
	}
	poolUsable(r, e, "a Tx whose fn panicked")
}

// txIsOneConnection: every statement of a Tx session runs in the one
// transaction, which sees its own uncommitted writes; nothing else does.
func (s *suite) txIsOneConnection(r reporter) {
	e := s.setup(r)
	txTable(r, e)
	const fix = "Fix: run every statement of the session fn receives on the transaction's own connection (its pgx.Tx, *sql.Tx, ...), never on the pool"
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	err := e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		txid := func() (int64, error) {
			rows, err := sess.Query(ctx, "SELECT txid_current() AS txid")
			if err != nil || len(rows) != 1 {
				return 0, fmt.Errorf("txid_current(): %d rows, %v", len(rows), err)
			}
			return int8Value(rows[0]["txid"])
		}
		first, err := txid()
		if err != nil {
			return err
		}
		if err := insertTx(ctx, sess, "uncommitted"); err != nil {
			return err
		}
		rows, err := sess.Query(ctx, "SELECT count(*) AS n FROM cairnq_certify_tx")
		if err != nil || len(rows) != 1 {
			return fmt.Errorf("count in the session: %d rows, %v", len(rows), err)
		}
		if n, err := int8Value(rows[0]["n"]); err != nil || n != 1 {
			fail("the Tx session does not see the row it just inserted (count %d, %v): its statements ran on different connections. %s", n, err, fix)
		}
		if second, err := txid(); err != nil {
			return err
		} else if second != first {
			fail("two statements of one Tx session ran in different transactions (txid %d, then %d). %s", first, second, fix)
		}
		// Outside the transaction, on another pooled connection.
		octx, cancel := context.WithTimeout(ctx, notifyTimeout)
		defer cancel()
		rows, err = e.ex.Query(octx, "SELECT count(*) AS n FROM cairnq_certify_tx")
		if err != nil || len(rows) != 1 {
			fail("while a Tx was open, a statement on the executor failed (%d rows, %v): the pool must have a connection besides the transaction's", len(rows), err)
			return nil
		}
		if n, err := int8Value(rows[0]["n"]); err != nil || n != 0 {
			fail("a statement outside the transaction saw the row the Tx session inserted before commit (count %d, %v): the session ran it outside the transaction, in autocommit. %s", n, err, fix)
		}
		return nil
	})
	if err != nil {
		r.Fatalf("Tx failed: %v", err)
	}
	for _, p := range problems {
		r.Errorf("%s", p)
	}
	if n := count(r, e.ctx, e.ex, "cairnq_certify_tx"); n != 1 {
		r.Errorf("after the Tx committed, the executor sees %d rows, want 1", n)
	}
}

// note is one notification as Listen delivered it.
type note struct{ channel, payload string }

// inbox collects notifications and lets a check wait for one.
type inbox struct {
	mu     sync.Mutex
	notes  []note
	signal chan struct{}
}

func newInbox() *inbox { return &inbox{signal: make(chan struct{}, 1)} }

func (b *inbox) add(channel, payload string) {
	b.mu.Lock()
	b.notes = append(b.notes, note{channel, payload})
	b.mu.Unlock()
	select {
	case b.signal <- struct{}{}:
	default:
	}
}

func (b *inbox) all() []note {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.notes)
}

func (b *inbox) has(n note) bool { return slices.Contains(b.all(), n) }

// await waits for n, calling resend now and then in case it was sent
// before the subscription took effect; it reports whether n arrived.
func (b *inbox) await(ctx context.Context, n note, resend func()) bool {
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for !b.has(n) {
		select {
		case <-b.signal:
		case <-tick.C:
			if resend != nil {
				resend()
			}
		case <-ctx.Done():
			return b.has(n)
		}
	}
	return true
}

// listener returns the executor as a Listener, skipping the check when it
// is none.
func (s *suite) listener(r reporter, e env) executor.Listener {
	r.Helper()
	l, ok := e.ex.(executor.Listener)
	if !ok {
		r.Skipf("%s is not an executor.Listener, so cairnq polls (which costs latency, never correctness). Implement Listen to wake workers and waiters at once", s.name)
	}
	return l
}

// listen subscribes, skipping the check when LISTEN is unavailable.
func (s *suite) listen(r reporter, e env, l executor.Listener, b *inbox, channels ...string) func() {
	r.Helper()
	stop, err := l.Listen(e.ctx, channels, b.add)
	if errors.Is(err, executor.ErrListenUnavailable) {
		r.Skipf("Listen reports executor.ErrListenUnavailable on a server that accepts LISTEN, so cairnq polls: %v", err)
	}
	if err != nil {
		r.Fatalf("Listen(%v) failed: %v. Fix: LISTEN on a dedicated connection; return an error wrapping executor.ErrListenUnavailable only where LISTEN can never work", channels, err)
	}
	if stop == nil {
		r.Fatalf("Listen returned a nil stop func. Fix: return a func that unsubscribes")
	}
	return stop
}

// notify sends a notification through the executor.
func notify(r reporter, e env, channel, payload string) {
	r.Helper()
	if _, err := e.ex.Query(e.ctx, "SELECT pg_notify($1, $2)", channel, payload); err != nil {
		r.Fatalf("pg_notify through the executor failed: %v", err)
	}
}

// listenChannels: Listen delivers notifications on the channels asked for,
// payloads intact, and nothing from other channels.
func (s *suite) listenChannels(r reporter) {
	e := s.setup(r)
	l := s.listener(r, e)
	const a, b, other = "cairnq_certify_a", "cairnq_certify_b", "cairnq_certify_other"
	box := newInbox()
	stop := s.listen(r, e, l, box, a, b)
	defer stop()
	warm := note{a, "warm-up"}
	if !box.await(e.ctx, warm, func() { notify(r, e, a, "warm-up") }) {
		r.Fatalf("no notification arrived on %s within %v of NOTIFY. Fix: Listen must call onNotify(channel, payload) for every notification on its channels", a, notifyTimeout)
	}
	payload := `naïve "payload", with commas`
	notify(r, e, other, "not subscribed")
	notify(r, e, a, payload)
	notify(r, e, b, "b")
	end := note{a, "end"}
	notify(r, e, end.channel, end.payload) // notifications arrive in commit order
	if !box.await(e.ctx, end, nil) {
		r.Fatalf("a notification on %s never arrived within %v (got %v). Fix: deliver every notification on the subscribed channels", a, notifyTimeout, box.all())
	}
	got := box.all()
	for _, want := range []note{{a, payload}, {b, "b"}} {
		if !slices.Contains(got, want) {
			r.Errorf("the notification %q on %s never arrived (got %v). Fix: deliver every subscribed channel, with the payload unchanged and the channel named as it was asked for", want.payload, want.channel, got)
		}
	}
	for _, n := range got {
		if n.channel != a && n.channel != b {
			r.Errorf("onNotify got a notification on %q (payload %q), a channel Listen was not asked for. Fix: deliver only the requested channels", n.channel, n.payload)
		}
	}
}

// listenStop: after stop returns, onNotify is not called again.
func (s *suite) listenStop(r reporter) {
	e := s.setup(r)
	l := s.listener(r, e)
	const a = "cairnq_certify_stop"
	stopped, witness := newInbox(), newInbox()
	stop := s.listen(r, e, l, stopped, a)
	stopWitness := s.listen(r, e, l, witness, a)
	defer stopWitness()
	warm := note{a, "warm-up"}
	send := func() { notify(r, e, a, "warm-up") }
	if !stopped.await(e.ctx, warm, send) || !witness.await(e.ctx, warm, send) {
		r.Fatalf("a notification on %s did not reach both of two Listens on it within %v. Fix: let Listen be called more than once (two stores may share an executor), each delivering every notification", a, notifyTimeout)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		stop()
	}()
	select {
	case <-done:
	case <-time.After(notifyTimeout):
		r.Fatalf("stop did not return within %v. Fix: stop must unsubscribe, end the listener's goroutine and return", notifyTimeout)
	}
	after := note{a, "after stop"}
	notify(r, e, after.channel, after.payload)
	if !witness.await(e.ctx, after, nil) {
		r.Fatalf("the other Listen on %s stopped delivering when one was stopped. Fix: stop must end only its own subscription", a)
	}
	if stopped.has(after) {
		r.Errorf("onNotify was called for a notification sent after stop returned. Fix: stop must unsubscribe before it returns, and no call may follow it")
	}
}

// listenUnavailable: Listen works on a server that accepts LISTEN, or
// reports executor.ErrListenUnavailable. A refusing server (a transaction
// pooler) cannot be arranged here.
func (s *suite) listenUnavailable(r reporter) {
	e := s.setup(r)
	l := s.listener(r, e)
	stop, err := l.Listen(e.ctx, []string{"cairnq_certify_unavailable"}, func(string, string) {})
	switch {
	case err == nil:
		stop()
		r.Logf("LISTEN works here. Where the server refuses it (a transaction-mode pooler answers SQLSTATE 0A000), Listen must return an error wrapping executor.ErrListenUnavailable; a normal server cannot refuse, so that part is not exercised")
	case errors.Is(err, executor.ErrListenUnavailable):
		r.Logf("Listen reports executor.ErrListenUnavailable (%v): cairnq will poll", err)
	default:
		r.Errorf("Listen failed with %q, which does not wrap executor.ErrListenUnavailable, on a server that accepts LISTEN. Fix: make LISTEN work here; where it can never work (a transaction-mode pooler, no way to reach a dedicated connection) return fmt.Errorf(\"...: %%w\", executor.ErrListenUnavailable), so the store stops retrying and polls", err)
	}
}

// storeCloseKeepsAppPool: closing cairnq leaves the application's pool
// usable, whether or not the store owned the executor.
func (s *suite) storeCloseKeepsAppPool(r reporter) {
	e := s.setupOpen(r)
	owned := false // a store took the executor over and closes it
	var clients []*cairnq.Client
	r.test().Cleanup(func() {
		for _, c := range clients {
			c.Close()
		}
		if !owned {
			e.ex.Close()
		}
	})
	alive := func(when string) {
		r.Helper()
		if s.f.AppPoolAlive == nil {
			return
		}
		if err := s.f.AppPoolAlive(e.ctx, e.ex); err != nil {
			r.Errorf("after %s, the application's own pool no longer works: %v. Fix: Close (and Listen's stop) must release only what the executor itself opened (its listeners, a pool it made from a DSN), never a pool the application handed in", when, err)
		}
	}
	c, err := cairnq.OpenPostgres(e.ctx, e.ex, nil)
	if err != nil {
		r.Fatalf("cairnq.OpenPostgres failed: %v", err)
	}
	clients = append(clients, c)
	if _, err := c.Submit(e.ctx, "certify.close", nil, nil); err != nil {
		r.Fatalf("Submit failed: %v", err)
	}
	if err := c.Close(); err != nil {
		r.Errorf("closing a client on the executor failed: %v", err)
	}
	if _, err := e.ex.Query(e.ctx, "SELECT 1 AS x"); err != nil {
		r.Errorf("after a store on the executor closed, a statement on the executor failed: %v. Fix: Listen's stop must end only the subscription, never close the pool or the executor", err)
	}
	alive("a store on the executor closed")

	c, err = cairnq.OpenPostgres(e.ctx, e.ex, &cairnq.PostgresOptions{CloseExecutor: true})
	if err != nil {
		r.Fatalf("cairnq.OpenPostgres (CloseExecutor) failed: %v", err)
	}
	owned = true
	clients = append(clients, c)
	if err := c.Close(); err != nil {
		r.Errorf("closing a client that owns the executor failed: %v. Fix: Close of an executor over the application's pool has nothing of the pool to release and should return nil", err)
	}
	if s.f.AppPoolAlive == nil {
		r.Logf("Factory.AppPoolAlive is not set, so whether Executor.Close leaves the application's pool open was not checked")
		return
	}
	alive("a store that owned the executor closed it (Executor.Close)")
}

// concurrentSubmits submits from many goroutines at once, which the store
// groups into shared inserts (insert_many, text[] parameters) while one is
// in flight: each caller must get back its own task with every option it
// gave, and the database must hold exactly those tasks. Whether submits
// meet in one group depends on timing, and the store falls back to one
// insert per submit when the server refuses a group, so insert_many is
// also run directly.
func (s *suite) concurrentSubmits(r reporter) {
	e := s.setup(r)
	c := s.client(r, e)
	const n = 40
	type outcome struct {
		task *cairnq.Task
		err  error
	}
	opts := func(i int) *cairnq.SubmitOptions {
		o := &cairnq.SubmitOptions{Queue: fmt.Sprintf("certify-%d", i%3), Priority: i - n/2, MaxAttempts: 1 + i%5,
			Delay: time.Duration(i%2) * time.Hour, Metadata: map[string]any{"i": i}}
		if i%4 == 0 {
			o.ParentID, o.RootID, o.CorrelationID = "task_parent", "task_root", fmt.Sprintf("corr \"%d\"", i)
		}
		return o
	}
	payload := func(i int) map[string]any { return map[string]any{"i": i, "s": "naïve \"q\" \\ {,} NULL"} }
	out := make([]outcome, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			t, err := c.Submit(e.ctx, fmt.Sprintf("certify.concurrent-%d", i), payload(i), opts(i))
			out[i] = outcome{t, err}
		})
	}
	close(start)
	wg.Wait()
	seen := map[string]bool{}
	for i, o := range out {
		if o.err != nil {
			r.Fatalf("submit %d of %d concurrent ones failed: %v", i, n, o.err)
		}
		if seen[o.task.ID] {
			r.Fatalf("two concurrent submits got the same task %s: each caller must get its own row back", o.task.ID)
		}
		seen[o.task.ID] = true
		got, err := c.Get(e.ctx, o.task.ID)
		if err != nil {
			r.Fatalf("Get(%s): %v", o.task.ID, err)
		}
		want, root := opts(i), opts(i).RootID
		if root == "" {
			root = got.ID
		}
		var p map[string]any
		_ = json.Unmarshal(got.Payload, &p)
		if got.Name != fmt.Sprintf("certify.concurrent-%d", i) || got.Queue != want.Queue || got.Priority != want.Priority ||
			got.MaxAttempts != want.MaxAttempts || got.ParentID != want.ParentID || got.RootID != root ||
			got.CorrelationID != want.CorrelationID || p["s"] != payload(i)["s"] || p["i"] != float64(i) ||
			(got.RunAt.Sub(got.CreatedAt)-want.Delay).Abs() > time.Minute || got.Status != cairnq.StatusQueued ||
			o.task.Name != got.Name || o.task.Queue != got.Queue {
			r.Errorf("concurrent submit %d: Submit returned %+v, Get reads %+v; want every option it was given", i, o.task, got)
		}
	}
	if total := count(r, e.ctx, e.ex, "cairnq_tasks"); total != n {
		r.Errorf("the database holds %d tasks after %d concurrent submits; want exactly %d", total, n, n)
	}

	st := protocol.Statements(protocol.Postgres).Get(protocol.StmtInsertMany)
	args, err := st.Bind(protocol.Args{
		"each_id": `{"task_m1","task_m2"}`, "each_name": `{"certify.many","certify.many"}`,
		"each_queue": `{"certify","certify"}`, "each_payload": `{"{\"s\": \"a \\\"q\\\" b\"}","[]"}`,
		"each_metadata": `{"{}","{\"k\": 1}"}`, "each_max_attempts": `{"2","3"}`, "each_priority": `{"-1","5"}`,
		"each_delay_ms": `{"0","60000"}`, "each_parent_id": `{NULL,"task_m1"}`, "each_root_id": `{"task_m1","task_m1"}`,
		"each_correlation_id": `{NULL,"NULL"}`,
	})
	if err != nil {
		r.Fatalf("binding insert_many: %v", err)
	}
	rows, err := e.ex.Query(e.ctx, st.SQL, args...)
	if err != nil {
		r.Fatalf("insert_many (two rows, text[] parameters) failed: %v. Fix: bind string arguments as text; see params_bind", err)
	}
	if len(rows) != 2 {
		r.Fatalf("insert_many returned %d rows, want 2", len(rows))
	}
	for _, id := range []string{"task_m1", "task_m2"} {
		got, err := c.Get(e.ctx, id)
		if err != nil {
			r.Fatalf("Get(%s) after insert_many: %v", id, err)
		}
		var p any
		_ = json.Unmarshal(got.Payload, &p)
		ok := got.Name == "certify.many" && got.Queue == "certify" && got.RootID == "task_m1"
		if id == "task_m1" {
			ok = ok && got.Priority == -1 && got.MaxAttempts == 2 && got.ParentID == "" && got.CorrelationID == "" &&
				fmt.Sprint(p) == `map[s:a "q" b]`
		} else {
			ok = ok && got.Priority == 5 && got.MaxAttempts == 3 && got.ParentID == "task_m1" && got.CorrelationID == "NULL" &&
				string(got.Metadata) != "{}" && got.RunAt.Sub(got.CreatedAt) > 59*time.Second
		}
		if !ok {
			r.Errorf("insert_many wrote %+v (payload %v); want every element of the parallel arrays in its column", got, p)
		}
	}
}

// workerRun: a worker on the executor runs a handful of tasks to their
// end, one failing on purpose, and stops cleanly.

func (s *suite) workerRun(r reporter) {
	e := s.setup(r)
	c := s.client(r, e)
	var mu sync.Mutex
	var survived []string // what the worker reported through OnError
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{
		Queues: []string{"certify"}, Concurrency: 4, PollInterval: 50 * time.Millisecond,
		LeaseDuration: 10 * time.Second, ShutdownTimeout: 5 * time.Second,
		OnError: func(err error, phase cairnq.ErrorPhase, id string) {
			mu.Lock()
			defer mu.Unlock()
			survived = append(survived, fmt.Sprintf("%s error on task %q: %v", phase, id, err))
		},
	})
	if err != nil {
		r.Fatalf("NewWorker: %v", err)
	}
	err = w.Handle("certify.double", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var p struct{ N int }
		if err := tc.Decode(&p); err != nil {
			return nil, err
		}
		if p.N%4 == 3 {
			return nil, fmt.Errorf("certify: %d fails on purpose", p.N)
		}
		return map[string]int{"double": 2 * p.N}, nil
	}, nil)
	if err != nil {
		r.Fatalf("Handle: %v", err)
	}
	runCtx, stopRun := context.WithCancel(e.ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(runCtx) }()
	stopped := false
	stop := func() error {
		stopped = true
		stopRun()
		select {
		case err := <-runErr:
			return err
		case <-time.After(15 * time.Second):
			return fmt.Errorf("Worker.Run did not return within 15s of its context ending: a statement of %s does not honour context cancellation", s.name)
		}
	}
	defer func() {
		if !stopped {
			_ = stop()
		}
		mu.Lock()
		defer mu.Unlock()
		for _, msg := range survived {
			r.Logf("the worker survived a %s", msg)
		}
	}()

	const n = 12
	ids := make([]string, n)
	for i := range n {
		t, err := c.Submit(e.ctx, "certify.double", map[string]int{"N": i}, &cairnq.SubmitOptions{Queue: "certify", MaxAttempts: 1})
		if err != nil {
			r.Fatalf("Submit: %v", err)
		}
		ids[i] = t.ID
	}
	for i, id := range ids {
		t, err := c.Wait(e.ctx, id, &cairnq.WaitOptions{Timeout: 20 * time.Second, PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond})
		if err != nil {
			r.Fatalf("waiting for task %d: %v. A worker on %s did not finish it. Fix the failing named checks first; the log shows what the worker survived", i, err, s.name)
		}
		if i%4 == 3 {
			if t.Status != cairnq.StatusFailed || t.Error == nil {
				r.Errorf("task %d, whose handler failed with one attempt allowed, ended %s with error %v; want failed with its envelope", i, t.Status, t.Error)
			}
			continue
		}
		var res struct{ Double int }
		if t.Status != cairnq.StatusSucceeded || t.DecodeResult(&res) != nil || res.Double != 2*i {
			r.Errorf("task %d ended %s with result %s; want succeeded with {\"double\": %d}", i, t.Status, t.Result, 2*i)
		}
	}
	if err := stop(); err != nil {
		r.Errorf("Worker.Run ended with %v; want nil after its context ended", err)
	}
}

// runScenarios runs every scenario as a subtest of its name, spread over
// lanes.
func (s *suite) runScenarios(r reporter, scenarios []Scenario) {
	lanes := make([]env, min(scenarioLanes, len(scenarios)))
	for i := range lanes {
		lanes[i] = s.setup(r)
		// Migrate once per lane; each scenario then opens a client on a
		// migrated database.
		c, err := cairnq.OpenPostgres(lanes[i].ctx, lanes[i].ex, nil)
		if err != nil {
			r.Fatalf("cairnq.OpenPostgres on %s failed, so no scenario can run: %v. Fix the failing named checks first", s.name, err)
		}
		c.Close()
	}
	queue := make(chan Scenario)
	var wg sync.WaitGroup
	for _, lane := range lanes {
		wg.Go(func() {
			for sc := range queue {
				r.run(sc.Name, func(r reporter) { s.scenario(r, lane.ex, sc) })
			}
		})
	}
	for _, sc := range scenarios {
		queue <- sc
	}
	close(queue)
	wg.Wait()
}

// scenario runs one conformance scenario through a client of its own on
// ex, whose database it empties first.
func (s *suite) scenario(r reporter, ex executor.Executor, sc Scenario) {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	if err := ex.Exec(ctx, "TRUNCATE cairnq_task_keys, cairnq_tasks"); err != nil {
		r.Fatalf("emptying the lane's database before the scenario: %v", err)
	}
	c, err := cairnq.OpenPostgres(ctx, ex, nil)
	if err != nil {
		r.Fatalf("cairnq.OpenPostgres on %s failed: %v", s.name, err)
	}
	defer c.Close()
	if err := RunE(ctx, ClientTarget{Client: c}, sc); err != nil {
		r.Errorf("%v\nThe scenario drives the store end to end on %s. Fix the failing named checks first; a scenario that fails alone usually means a row value the store misreads or a Tx session that is not one transaction", err, s.name)
	}
}
