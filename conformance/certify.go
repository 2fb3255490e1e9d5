package conformance

// The executor certification: its entry point (CertifyExecutor, Factory),
// the harness every check runs on (suite, env, the statement helpers) and
// the list of checks. The checks live by family:
//
//	certify_rows.go        values in and out: int8_normalized, jsonb_normalized,
//	                       rows_by_position, null_params, params_bind
//	certify_statements.go  multi_statement_exec, sqlstate_errors
//	certify_tx.go          tx_commits, tx_rolls_back_on_*, tx_is_one_connection
//	certify_listen.go      listen_channels, listen_stop, listen_unavailable
//	certify_client.go      through a cairnq Client: store_close_keeps_app_pool,
//	                       concurrent_submits, worker_run
//	certify_submit_many.go submit_many
//	certify_scenarios.go   scenarios/<name>

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/conformance/pgserver"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
)

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
//	rows_by_position                    QueryPositional returns what Query does
//	                                    (executor.PositionalQuerier; skipped
//	                                    without it)
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
//	submit_many                         a batch (SubmitMany, SubmitManyTx) is
//	                                    written whole or not at all, in order,
//	                                    its keys locked without deadlock
//	copy_rows                           CopyFrom writes the rows given, or
//	                                    fails its transaction (executor.Copier;
//	                                    skipped without it)
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
// The server comes from [pgserver.DSN]; the package under test should run
// its tests through [pgserver.Main]:
//
//	func TestMain(m *testing.M) { pgserver.Main(m) }
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
		{"rows_by_position", (*suite).rowsByPosition},
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
		{"submit_many", (*suite).submitMany},
		{"copy_rows", (*suite).copyRows},
		{"workflow", (*suite).workflow},
		{"durable", (*suite).durable},
		{"global_limit", (*suite).globalLimit},
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
	ex := s.f.Open(t, pgserver.DSN(t))
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

// runWorker runs w until the stop it returns is called. stop ends Run's
// context and returns Run's error, or, when Run has not returned 15s
// later, an error saying the executor's statements do not honour
// context cancellation (returned false). It is safe to call twice.
func (s *suite) runWorker(ctx context.Context, w *cairnq.Worker) (stop func() (err error, returned bool)) {
	runCtx, stopRun := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(runCtx) }()
	var once sync.Once
	var err error
	returned := true
	return func() (error, bool) {
		once.Do(func() {
			stopRun()
			select {
			case err = <-runErr:
			case <-time.After(15 * time.Second):
				err, returned = fmt.Errorf("Worker.Run did not return within 15s of its context ending: a statement of %s does not honour context cancellation", s.name), false
			}
		})
		return err, returned
	}
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
