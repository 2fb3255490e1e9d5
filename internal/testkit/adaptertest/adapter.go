package adaptertest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// ListenExecutor is an executor with the LISTEN capability, as every
// Postgres adapter here has.
type ListenExecutor interface {
	executor.Executor
	executor.Listener
}

// Options are the executor settings the shared tests vary. Each adapter
// spells them in its own Options type, so [Adapter.Open] translates.
type Options struct {
	// OnReconnect, when not nil, goes into the executor's options, so a
	// test can tell when a listener came back.
	OnReconnect func()
	// FastIdleCheck shortens the listeners' idle check (through the
	// adapter's test-only hook), so a test sees one within a second.
	FastIdleCheck bool
}

// Pool is an executor under test together with the application's own pool
// it runs on.
type Pool struct {
	// Exec is the executor under test.
	Exec ListenExecutor
	// App reaches the same database as the application would, around the
	// executor: tests notify and watch pg_stat_activity through it, and it
	// must keep working after Exec.Close.
	App *sql.DB
	// InUse reports how many of the application's pooled connections are
	// taken, to catch a listener that leaks one. Nil means App.Stats().InUse,
	// right where App is the application's pool itself.
	InUse func() int
}

func (p Pool) inUse() int {
	if p.InUse != nil {
		return p.InUse()
	}
	return p.App.Stats().InUse
}

// Adapter is what the shared tests need to know of one adapter on one
// driver. Zero fields take the default their doc states, which is what a
// driver that speaks Postgres through pgx needs.
type Adapter struct {
	// Name tells this adapter's channels apart from those of other tests of
	// the binary, since listener goroutines are counted process-wide.
	Name string
	// Open opens the executor on dsn with o, both closed at cleanup.
	Open func(t *testing.T, dsn string, o Options) Pool
	// InTx reports whether a transaction's session hands out the driver's
	// own transaction, so the application can write in it. Nil skips the
	// check.
	InTx func(s executor.Session) bool
	// ErrPrefix is how the adapter's errors begin ("cairnq/gorm: query: "
	// for a failed Query), so a reader knows which layer failed.
	ErrPrefix string
	// ConnsHeld is how many of the application's pooled connections a
	// listener holds: 1 where the LISTEN connection is taken from the pool,
	// 0 (the default) where the driver dials one of its own.
	ConnsHeld int
	// MixedChannel is a channel name of mixed case and punctuation that the
	// driver can LISTEN on; the default holds double quotes, which only a
	// driver quoting identifiers properly can take.
	MixedChannel string
	// BadChannels are channel names this driver refuses beyond the ones
	// every adapter refuses (none, empty, longer than 63 bytes).
	BadChannels [][]string
	// AwaitIdleCheck waits until the listener on backend pid has passed an
	// idle check, whose trace in the server depends on the driver. Nil means
	// [AwaitPing].
	AwaitIdleCheck func(t *testing.T, p Pool, pid int64)
}

// Parallel runs test on a in parallel with the package's other tests: it
// is the whole body of an adapter's test that is one of the shared ones,
// so each keeps its own name there.
func (a Adapter) Parallel(t *testing.T, test func(Adapter, *testing.T)) {
	t.Parallel()
	test(a, t)
}

func (a Adapter) open(t *testing.T, o Options) Pool {
	t.Helper()
	return a.Open(t, pgtest.DSN(t), o)
}

// QueryExecTx checks that rows, multi-statement scripts and transactions
// (commit, rollback on error, rollback on a panic that continues) behave
// the same on every adapter, and that Close leaves the application's pool
// open.
func (a Adapter) QueryExecTx(t *testing.T) {
	ctx := Ctx(t)
	p := a.open(t, Options{})
	e := p.Exec

	rows := Query(t, e, `SELECT $1::bigint AS n, $2::text AS s, '{"a":1}'::jsonb AS j, NULL::text AS z, $3::text AS quoted`,
		int64(7), "x", "it's $1 ?")
	if len(rows) != 1 || rows[0]["n"] != int64(7) || rows[0]["s"] != "x" || rows[0]["z"] != nil || rows[0]["quoted"] != "it's $1 ?" {
		t.Fatalf("rows = %#v", rows)
	}
	if j, ok := rows[0]["j"].([]byte); !ok || string(j) != `{"a": 1}` {
		t.Errorf("jsonb = %#v, want the server's text as []byte", rows[0]["j"])
	}
	if rows := Query(t, e, `SELECT 1 WHERE false`); rows == nil || len(rows) != 0 {
		t.Errorf("no rows: %#v, want an empty non-nil slice", rows)
	}
	if err := e.Exec(ctx, `CREATE TABLE t (id bigint PRIMARY KEY, note text); INSERT INTO t VALUES (1, 'one'); INSERT INTO t VALUES (2, 'two?')`); err != nil {
		t.Fatalf("multi-statement Exec: %v", err)
	}
	if n := Count(t, e, `SELECT count(*) AS n FROM t`); n != 2 {
		t.Fatalf("%d rows after Exec", n)
	}

	sawTx := a.InTx == nil
	err := e.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		if a.InTx != nil {
			sawTx = a.InTx(s)
		}
		_, err := s.Query(ctx, `INSERT INTO t VALUES ($1, $2)`, int64(3), "three")
		return err
	})
	if err != nil || !sawTx {
		t.Fatalf("Tx: %v (driver's transaction seen: %v)", err, sawTx)
	}
	boom := errors.New("boom")
	err = e.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		if _, err := s.Query(ctx, `INSERT INTO t VALUES (4, 'four')`); err != nil {
			return err
		}
		return boom
	})
	if err != boom {
		t.Fatalf("Tx error = %v, want fn's error unchanged", err)
	}
	func() {
		defer func() {
			if r := recover(); r != "kaboom" {
				t.Errorf("recovered %v, want the panic to continue", r)
			}
		}()
		_ = e.Tx(ctx, func(ctx context.Context, s executor.Session) error {
			if _, err := s.Query(ctx, `INSERT INTO t VALUES (5, 'five')`); err != nil {
				t.Error(err)
			}
			panic("kaboom")
		})
	}()
	if n := Count(t, e, `SELECT count(*) AS n FROM t`); n != 3 {
		t.Errorf("%d rows, want 3: only the committed transaction's row is kept", n)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.App.PingContext(ctx); err != nil {
		t.Errorf("the application's db after Close: %v", err)
	}
}

// ErrorsKeepSQLState checks that a failed Query, Exec and Tx each keep the
// server's SQLSTATE behind the adapter's prefix, which the core classifies
// errors by, and that a canceled context stays errors.Is-visible. It
// returns the failed Query's error, so the caller can look for its
// driver's own error type inside.
func (a Adapter) ErrorsKeepSQLState(t *testing.T) error {
	ctx := Ctx(t)
	e := a.open(t, Options{}).Exec
	queryErr := func() error { _, err := e.Query(ctx, `SELECT * FROM no_such_table`); return err }()
	var st interface{ SQLState() string }
	if !errors.As(queryErr, &st) || st.SQLState() != "42P01" || !strings.HasPrefix(queryErr.Error(), a.ErrPrefix) {
		t.Fatalf("err = %v, want SQLSTATE 42P01 after %q", queryErr, a.ErrPrefix)
	}
	if err := e.Exec(ctx, `SELEC 1`); !errors.As(err, &st) || st.SQLState() != "42601" {
		t.Errorf("Exec err = %v", err)
	}
	if err := e.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		_, err := s.Query(ctx, `SELECT 1/0`)
		return err
	}); !errors.As(err, &st) || st.SQLState() != "22012" {
		t.Errorf("Tx err = %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.Query(cctx, `SELECT 1`); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
	return queryErr
}

// ListenWakesWorkerAndCaller runs two clients on separate pools, which
// share nothing in-process, with every poll set to a minute: only
// LISTEN/NOTIFY through the adapter can carry the task to the worker and
// its result back to the caller in time.
func (a Adapter) ListenWakesWorkerAndCaller(t *testing.T) {
	dsn := pgtest.DSN(t)
	api := OpenClient(t, a.Open(t, dsn, Options{}).Exec)
	w, err := cairnq.NewWorker(OpenClient(t, a.Open(t, dsn, Options{}).Exec), &cairnq.WorkerOptions{PollInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("echo", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return tc.Payload(), nil }, nil)
	RunWorker(t, w)
	slow := cairnq.WaitOptions{Timeout: WaitTimeout, PollInterval: time.Minute, MaxPollInterval: time.Minute}
	for i := range 3 {
		got, err := api.Call(Ctx(t), "echo", i, &cairnq.CallOptions{WaitOptions: slow})
		if err != nil || string(got.Result) != fmt.Sprint(i) {
			t.Fatalf("call %d (woken by notifications or not at all): %v %+v", i, err, got)
		}
	}
}
