package cairnqgorm_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/lib/pq" // a database/sql driver that is not pgx's stdlib
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqgorm "github.com/cairnq/cairnq-go/adapters/gorm"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const waitTimeout = 20 * time.Second

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// countingLogger is a gorm logger that counts what it is asked to log, so
// a test can tell cairnq's statements never reach the application's logger.
type countingLogger struct{ traces, messages atomic.Int64 }

func (l *countingLogger) LogMode(logger.LogLevel) logger.Interface { return l }
func (l *countingLogger) Info(context.Context, string, ...any)     { l.messages.Add(1) }
func (l *countingLogger) Warn(context.Context, string, ...any)     { l.messages.Add(1) }
func (l *countingLogger) Error(context.Context, string, ...any)    { l.messages.Add(1) }
func (l *countingLogger) Trace(context.Context, time.Time, func() (string, int64), error) {
	l.traces.Add(1)
}

// openGorm opens the application's *gorm.DB on dsn, closed at cleanup.
func openGorm(t testing.TB, dsn string, cfg *gorm.Config) (*gorm.DB, *sql.DB) {
	t.Helper()
	if cfg == nil {
		cfg = &gorm.Config{Logger: logger.Discard}
	}
	db, err := gorm.Open(postgres.Open(dsn), cfg)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sqlDB.Close() })
	return db, sqlDB
}

// openClient opens a cairnq client on the executor, closed at cleanup.
func openClient(t *testing.T, ex executor.Executor) *cairnq.Client {
	t.Helper()
	c, err := cairnq.OpenPostgres(context.Background(), ex, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func runWorker(t *testing.T, w *cairnq.Worker) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
}

func mustQuery(t *testing.T, s executor.Session, query string, args ...any) []executor.Row {
	t.Helper()
	rows, err := s.Query(testCtx(t), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return rows
}

func count(t *testing.T, s executor.Session, query string, args ...any) int64 {
	t.Helper()
	rows := mustQuery(t, s, query, args...)
	if len(rows) != 1 {
		t.Fatalf("%s: %d rows", query, len(rows))
	}
	n, ok := rows[0]["n"].(int64)
	if !ok {
		t.Fatalf("%s: n is %T", query, rows[0]["n"])
	}
	return n
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestQueryExecTx(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	db, _ := openGorm(t, pgtest.DSN(t), nil)
	e := cairnqgorm.New(db, nil)

	rows := mustQuery(t, e, `SELECT $1::bigint AS n, $2::text AS s, '{"a":1}'::jsonb AS j, NULL::text AS z`, int64(7), "x")
	if len(rows) != 1 || rows[0]["n"] != int64(7) || rows[0]["s"] != "x" || rows[0]["z"] != nil {
		t.Fatalf("rows = %#v", rows)
	}
	if j, ok := rows[0]["j"].([]byte); !ok || string(j) != `{"a": 1}` {
		t.Errorf("jsonb = %#v, want the server's text as []byte", rows[0]["j"])
	}
	if rows := mustQuery(t, e, `SELECT 1 WHERE false`); rows == nil || len(rows) != 0 {
		t.Errorf("no rows: %#v, want an empty non-nil slice", rows)
	}
	if err := e.Exec(ctx, `CREATE TABLE t (id bigint PRIMARY KEY, note text); INSERT INTO t VALUES (1, 'one'); INSERT INTO t VALUES (2, 'two')`); err != nil {
		t.Fatalf("multi-statement Exec: %v", err)
	}
	if n := count(t, e, `SELECT count(*) AS n FROM t`); n != 2 {
		t.Fatalf("%d rows after Exec", n)
	}

	// Commit.
	var sawTx bool
	err := e.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		tx, ok := cairnqgorm.GormDB(s)
		sawTx = ok && tx != nil
		_, err := s.Query(ctx, `INSERT INTO t VALUES (3, 'three')`)
		return err
	})
	if err != nil || !sawTx {
		t.Fatalf("Tx: %v (gorm tx seen: %v)", err, sawTx)
	}
	// Rollback on error: fn's error comes back unchanged.
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
	// Rollback on panic, which continues.
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
	if n := count(t, e, `SELECT count(*) AS n FROM t`); n != 3 {
		t.Errorf("%d rows, want 3: only the committed transaction's row is kept", n)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("SELECT 1").Error; err != nil {
		t.Errorf("the application's db after Close: %v", err)
	}
}

// gorm's Raw would take ? and @name for its own placeholders and log every
// statement; the executor bypasses both, and gorm's PrepareStmt cache too,
// which could not prepare a multi-statement script.
func TestNoRewritingNoLoggingNoPreparing(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	log := &countingLogger{}
	db, _ := openGorm(t, pgtest.DSN(t), &gorm.Config{Logger: log, PrepareStmt: true})
	e := cairnqgorm.New(db, nil)

	rows := mustQuery(t, e, `SELECT $1::text AS a, '?' AS q, '@name' AS at, '{"k":1}'::jsonb ? 'k' AS has`, "x")
	if r := rows[0]; r["a"] != "x" || r["q"] != "?" || r["at"] != "@name" || r["has"] != true {
		t.Errorf("row = %#v", r)
	}
	if err := e.Exec(ctx, `CREATE TABLE p (id int); INSERT INTO p VALUES (1)`); err != nil {
		t.Fatalf("multi-statement Exec on a PrepareStmt db: %v", err)
	}
	err := e.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		if err := s.Exec(ctx, `INSERT INTO p VALUES (2); INSERT INTO p VALUES (3)`); err != nil {
			return err
		}
		_, err := s.Query(ctx, `SELECT count(*) AS n FROM p WHERE id > $1`, 0)
		return err
	})
	if err != nil {
		t.Fatalf("Tx on a PrepareStmt db: %v", err)
	}
	if n := log.traces.Load() + log.messages.Load(); n != 0 {
		t.Errorf("the application's logger saw %d entries from cairnq's statements", n)
	}
	// The application's own gorm calls still log, of course.
	if err := db.Exec("SELECT 1").Error; err != nil || log.traces.Load() == 0 {
		t.Errorf("app statement: %v, traces %d", err, log.traces.Load())
	}
}

func TestErrorsKeepSQLState(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	db, _ := openGorm(t, pgtest.DSN(t), nil)
	e := cairnqgorm.New(db, nil)
	_, err := e.Query(ctx, `SELECT * FROM no_such_table`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
		t.Fatalf("err = %v, want a *pgconn.PgError 42P01", err)
	}
	var st interface{ SQLState() string }
	if !errors.As(err, &st) || st.SQLState() != "42P01" || !strings.HasPrefix(err.Error(), "cairnq/gorm: query: ") {
		t.Errorf("err = %v", err)
	}
	if err := e.Exec(ctx, `SELEC 1`); !errors.As(err, &st) || st.SQLState() != "42601" {
		t.Errorf("Exec err = %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.Query(cctx, `SELECT 1`); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}

// callbackCounts fingerprints gorm's callback chains: the number of
// callbacks registered on each processor.
func callbackCounts(db *gorm.DB) map[string]int {
	out := map[string]int{}
	procs := reflect.ValueOf(db.Callback()).Elem().FieldByName("processors")
	for _, k := range procs.MapKeys() {
		out[k.String()] = procs.MapIndex(k).Elem().FieldByName("callbacks").Len()
	}
	return out
}

type configPrint struct {
	config    *gorm.Config
	logger    logger.Interface
	naming    any
	callbacks any
	counts    map[string]int
	plugins   int
	connPool  gorm.ConnPool
	dialector gorm.Dialector
	prepare   bool
	skipTx    bool
}

func fingerprint(db *gorm.DB) configPrint {
	return configPrint{
		config: db.Config, logger: db.Config.Logger, naming: db.Config.NamingStrategy,
		callbacks: db.Callback(), counts: callbackCounts(db), plugins: len(db.Config.Plugins),
		connPool: db.Config.ConnPool, dialector: db.Config.Dialector,
		prepare: db.Config.PrepareStmt, skipTx: db.Config.SkipDefaultTransaction,
	}
}

type rendering struct {
	ID     uint   `gorm:"primaryKey"`
	TaskID string `gorm:"uniqueIndex"`
	Body   string
	Stamp  string
}

// BeforeCreate is a gorm hook: a row created through gorm carries its
// stamp, which proves hooks ran inside cairnq's transaction.
func (r *rendering) BeforeCreate(*gorm.DB) error {
	r.Stamp = "hooked"
	return nil
}

func renderings(t *testing.T, db *gorm.DB) map[string]rendering {
	t.Helper()
	var rs []rendering
	if err := db.Order("task_id").Find(&rs).Error; err != nil {
		t.Fatal(err)
	}
	out := map[string]rendering{}
	for _, r := range rs {
		out[r.TaskID] = r
	}
	return out
}

// The application's own db.Transaction submits a task with SubmitTx: it is
// invisible until the commit and gone after a rollback.
func TestSubmitTxInAppTransaction(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	db, _ := openGorm(t, pgtest.DSN(t), nil)
	c := openClient(t, cairnqgorm.New(db, nil))
	if err := db.AutoMigrate(&rendering{}); err != nil {
		t.Fatal(err)
	}

	rollback := errors.New("roll back")
	var gone *cairnq.Task
	err := db.Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&rendering{TaskID: "pending", Body: "x"}).Error; err != nil {
			return err
		}
		var err error
		if gone, err = cairnqgorm.SubmitTx(ctx, c, tx, "render", map[string]int{"n": 1}, nil); err != nil {
			return err
		}
		if _, err := c.Get(ctx, gone.ID); !errors.Is(err, cairnq.ErrNotFound) {
			t.Errorf("uncommitted task visible outside the transaction: %v", err)
		}
		return rollback
	})
	if err != rollback {
		t.Fatalf("Transaction: %v", err)
	}
	if _, err := c.Get(ctx, gone.ID); !errors.Is(err, cairnq.ErrNotFound) {
		t.Errorf("task of a rolled-back transaction: %v", err)
	}

	var kept *cairnq.Task
	err = db.Transaction(func(tx *gorm.DB) error {
		var err error
		kept, err = cairnqgorm.SubmitTx(ctx, c, tx, "render", nil, &cairnq.SubmitOptions{Key: "k"})
		if err != nil {
			return err
		}
		if _, err := c.GetByKey(ctx, "k"); !errors.Is(err, cairnq.ErrNotFound) {
			t.Errorf("uncommitted keyed task visible: %v", err)
		}
		return tx.Create(&rendering{TaskID: kept.ID, Body: "y"}).Error
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.GetByKey(ctx, "k"); err != nil || got.ID != kept.ID || got.Status != cairnq.StatusQueued {
		t.Errorf("committed task: %+v %v", got, err)
	}
	if rs := renderings(t, db); len(rs) != 1 || rs[kept.ID].Stamp != "hooked" {
		t.Errorf("renderings = %+v", rs)
	}

	// db.Begin works the same way, and a non-transaction is refused.
	tx := db.Begin()
	if _, err := cairnqgorm.SubmitTx(ctx, c, tx, "render", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback().Error; err != nil {
		t.Fatal(err)
	}
	if _, err := cairnqgorm.SubmitTx(ctx, c, db, "render", nil, nil); err == nil || !strings.Contains(err.Error(), "not a transaction") {
		t.Errorf("SubmitTx on the pool: %v", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("TxSession on the pool did not panic")
			}
		}()
		cairnqgorm.TxSession(db)
	}()
}

// A handler settles with the typed SucceedIn: the model row it writes
// through gorm (hooks and all) commits with the settlement, and a lost
// lease rolls it back. Another handler settles inside its own
// db.Transaction with SucceedTx. gorm's config is the same object
// throughout.
func TestWorkerSettlesInGormTransactions(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	log := &countingLogger{}
	db, _ := openGorm(t, pgtest.DSN(t), &gorm.Config{Logger: log})
	if err := db.AutoMigrate(&rendering{}); err != nil {
		t.Fatal(err)
	}
	before := fingerprint(db)
	tracesBefore := log.traces.Load()

	c := openClient(t, cairnqgorm.New(db, nil))
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	lost := make(chan error, 1)
	w.Handle("render", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var steal bool
		if err := tc.Decode(&steal); err != nil {
			return nil, err
		}
		if steal { // another worker recovered the task meanwhile
			if err := db.Exec("UPDATE cairnq_tasks SET worker_id = 'thief' WHERE id = ?", tc.ID()).Error; err != nil {
				return nil, err
			}
		}
		err := cairnqgorm.SucceedIn(ctx, tc, func(ctx context.Context, tx *gorm.DB) (any, error) {
			r := rendering{TaskID: tc.ID(), Body: "pages"}
			if err := tx.Create(&r).Error; err != nil {
				return nil, err
			}
			return map[string]any{"id": r.ID}, nil
		})
		if steal {
			lost <- err
		}
		return nil, err
	}, nil)
	w.Handle("render-own-tx", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return nil, db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Create(&rendering{TaskID: tc.ID(), Body: "own"}).Error; err != nil {
				return err
			}
			return cairnqgorm.SucceedTx(ctx, tc, tx, "done")
		})
	}, nil)
	runWorker(t, w)

	ok, err := c.Submit(ctx, "render", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	stolen, err := c.Submit(ctx, "render", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	own, err := c.Submit(ctx, "render-own-tx", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{ok.ID, own.ID} {
		got, err := c.Wait(ctx, id, &cairnq.WaitOptions{Timeout: waitTimeout})
		if err != nil || got.Status != cairnq.StatusSucceeded {
			t.Fatalf("task %s: %v %+v", id, err, got)
		}
	}
	if err := <-lost; !errors.Is(err, cairnq.ErrLostLease) {
		t.Errorf("SucceedIn after losing the lease: %v, want ErrLostLease", err)
	}
	rs := renderings(t, db)
	if len(rs) != 2 || rs[ok.ID].Stamp != "hooked" || rs[own.ID].Stamp != "hooked" {
		t.Errorf("renderings = %+v, want %s and %s, stamped by the hook, and no row of the lost lease", rs, ok.ID, own.ID)
	}
	if got, _ := c.Get(ctx, ok.ID); !strings.Contains(string(got.Result), fmt.Sprint(rs[ok.ID].ID)) {
		t.Errorf("result %s does not carry the row id %d", got.Result, rs[ok.ID].ID)
	}
	if s, _ := c.Get(ctx, stolen.ID); s.Status != cairnq.StatusRunning || s.WorkerID != "thief" {
		t.Errorf("stolen task: %s by %s", s.Status, s.WorkerID)
	}

	if after := fingerprint(db); !reflect.DeepEqual(before, after) {
		t.Errorf("gorm config changed:\nbefore %+v\nafter  %+v", before, after)
	}
	// Every trace is one of the application's own gorm statements: the
	// handler's three Creates, its UPDATE and the one Find above.
	if n := log.traces.Load() - tracesBefore; n != 5 {
		t.Errorf("the application's logger saw %d statements, want 5 (its own)", n)
	}
}

// A typed SucceedIn on a client that does not run on this adapter refuses
// before writing anything.
func TestSucceedInNeedsAGormClient(t *testing.T) {
	t.Parallel()
	db, _ := openGorm(t, pgtest.DSN(t), nil)
	c := openClient(t, foreign{cairnqgorm.New(db, nil)})
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 1)
	w.Handle("x", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		err := cairnqgorm.SucceedIn(ctx, tc, func(context.Context, *gorm.DB) (any, error) {
			t.Error("fn ran")
			return nil, nil
		})
		errs <- err
		return nil, err
	}, nil)
	runWorker(t, w)
	if _, err := c.Submit(testCtx(t), "x", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err == nil || !strings.Contains(err.Error(), "does not run on a cairnqgorm executor") {
		t.Errorf("err = %v", err)
	}
}

func mustGorm(t *testing.T, sqlDB *sql.DB) *gorm.DB {
	t.Helper()
	db, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// foreign hides the gorm session behind a plain executor.Session, as a
// client on another adapter would hand out.
type foreign struct{ *cairnqgorm.Executor }

func (f foreign) Tx(ctx context.Context, fn func(context.Context, executor.Session) error) error {
	return f.Executor.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		return fn(ctx, struct{ executor.Session }{s})
	})
}

type note struct{ channel, payload string }

func recv(t *testing.T, ch <-chan note) note {
	t.Helper()
	select {
	case n := <-ch:
		return n
	case <-time.After(waitTimeout):
		t.Fatal("no notification")
		return note{}
	}
}

func notify(t *testing.T, db *sql.DB, channel, payload string) {
	t.Helper()
	if _, err := db.ExecContext(testCtx(t), `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
		t.Fatal(err)
	}
}

// listenerPID finds the backend LISTENing in the test's database (after an
// idle check its last query is pgx's ping).
func listenerPID(t *testing.T, db *sql.DB) (pid int64, lastQuery string, found bool) {
	t.Helper()
	err := db.QueryRowContext(testCtx(t), `SELECT pid, query FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()
		  AND (query ILIKE 'listen%' OR query = '-- ping')`).Scan(&pid, &lastQuery)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return pid, lastQuery, true
}

func TestListen(t *testing.T) {
	t.Parallel()
	db, sqlDB := openGorm(t, pgtest.DSN(t), nil)
	e := cairnqgorm.New(db, nil)
	got := make(chan note, 16)
	var stopped atomic.Bool
	stop, err := e.Listen(testCtx(t), []string{"cairnq_a", `Mixed "Case".ch`, "cairnq_a"}, func(c, p string) {
		if stopped.Load() {
			t.Errorf("notification after stop: %s %q", c, p)
		}
		got <- note{c, p}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if n := sqlDB.Stats().InUse; n != 1 {
		t.Errorf("%d pooled connections in use while listening, want the 1 the listener reserved", n)
	}

	// Notifications on one listener arrive in commit order, so the absence
	// of the others before the last one is proof they were not delivered.
	sent := []note{
		{"cairnq_other", "ignored"},
		{"cairnq_a", `{"id":1,"q":"it's \"x\""}`},
		{"CAIRNQ_A", "case matters"},
		{`Mixed "Case".ch`, "héllo\nworld"},
		{"cairnq_a", ""},
	}
	for _, n := range sent {
		notify(t, sqlDB, n.channel, n.payload)
	}
	for _, want := range []note{sent[1], sent[3], sent[4]} {
		if n := recv(t, got); n != want {
			t.Fatalf("got %+v, want %+v", n, want)
		}
	}
	if _, _, ok := listenerPID(t, sqlDB); !ok {
		t.Fatal("no LISTEN backend in pg_stat_activity")
	}

	stop()
	stopped.Store(true)
	stop() // idempotent
	if n := sqlDB.Stats().InUse; n != 0 {
		t.Errorf("%d connections in use after stop", n)
	}
	poll(t, "the listener backend to end", func() bool { _, _, ok := listenerPID(t, sqlDB); return !ok })
	notify(t, sqlDB, "cairnq_a", "after stop")
	select {
	case n := <-got:
		t.Fatalf("delivered after stop: %+v", n)
	default:
	}
}

// listenerGoroutines counts goroutines carrying the listener's profile
// label for channel.
func listenerGoroutines(t *testing.T, channel string) int {
	t.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		t.Fatal(err)
	}
	n := 0
	for rec := range strings.SplitSeq(buf.String(), "\n\n") {
		if strings.Contains(rec, `"cairnq.channels":"`+channel+`"`) {
			var k int
			if _, err := fmt.Sscanf(rec, "%d @", &k); err == nil {
				n += k
			}
		}
	}
	return n
}

func TestListenReconnects(t *testing.T) {
	t.Parallel()
	db, sqlDB := openGorm(t, pgtest.DSN(t), nil)
	admin, err := sql.Open("postgres", pgtest.AdminDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	reconnected := make(chan struct{}, 16)
	e := cairnqgorm.New(db, &cairnqgorm.Options{OnReconnect: func() { reconnected <- struct{}{} }})
	const channel = "cairnq_wake_gorm"
	got := make(chan note, 16)
	stop, err := e.Listen(testCtx(t), []string{channel}, func(c, p string) { got <- note{c, p} })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	notify(t, sqlDB, channel, "before")
	if n := recv(t, got); n.payload != "before" {
		t.Fatalf("got %+v", n)
	}

	for round := range 2 {
		pid, _, ok := listenerPID(t, sqlDB)
		if !ok {
			t.Fatal("no listener backend")
		}
		if _, err := admin.ExecContext(testCtx(t), `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
		select {
		case <-reconnected:
		case <-time.After(waitTimeout):
			t.Fatalf("round %d: OnReconnect did not run", round)
		}
		if p, _, ok := listenerPID(t, sqlDB); !ok || p == pid {
			t.Fatalf("round %d: listener backend %d (found %v), want a new one", round, p, ok)
		}
		payload := fmt.Sprint("after ", round)
		notify(t, sqlDB, channel, payload)
		if n := recv(t, got); n != (note{channel, payload}) {
			t.Fatalf("got %+v", n)
		}
	}
	if n := sqlDB.Stats().InUse; n != 1 {
		t.Errorf("%d connections in use after reconnects, want 1: broken ones must be discarded", n)
	}
	stop()
	if n := listenerGoroutines(t, channel); n != 0 {
		t.Errorf("%d listener goroutines outlive stop", n)
	}
	if n := sqlDB.Stats().InUse; n != 0 {
		t.Errorf("%d connections in use after stop", n)
	}
}

func TestListenIdleCheckKeepsTheConnection(t *testing.T) {
	t.Parallel()
	db, sqlDB := openGorm(t, pgtest.DSN(t), nil)
	reconnected := make(chan struct{}, 16)
	e := cairnqgorm.New(db, &cairnqgorm.Options{OnReconnect: func() { reconnected <- struct{}{} }})
	cairnqgorm.SetListenHealth(e, 20*time.Millisecond, 5*time.Second)
	got := make(chan note, 16)
	stop, err := e.Listen(testCtx(t), []string{"idle"}, func(c, p string) { got <- note{c, p} })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	pid, _, _ := listenerPID(t, sqlDB)
	poll(t, "an idle check ping", func() bool { _, q, _ := listenerPID(t, sqlDB); return q == "-- ping" })
	notify(t, sqlDB, "idle", "still here")
	if n := recv(t, got); n.payload != "still here" {
		t.Fatalf("got %+v", n)
	}
	if p, _, _ := listenerPID(t, sqlDB); p != pid {
		t.Errorf("listener backend changed from %d to %d across idle checks", pid, p)
	}
	select {
	case <-reconnected:
		t.Error("an idle check reconnected")
	default:
	}
}

func TestCloseStopsListeners(t *testing.T) {
	t.Parallel()
	db, sqlDB := openGorm(t, pgtest.DSN(t), nil)
	e := cairnqgorm.New(db, nil)
	stop, err := e.Listen(testCtx(t), []string{"a"}, func(string, string) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	stop() // after Close: a no-op
	if n := sqlDB.Stats().InUse; n != 0 {
		t.Errorf("%d connections in use after Close", n)
	}
	if _, err := e.Listen(testCtx(t), []string{"a"}, func(string, string) {}); err == nil {
		t.Error("Listen after Close succeeded")
	}
	if err := sqlDB.PingContext(testCtx(t)); err != nil {
		t.Errorf("the application's pool after Close: %v", err)
	}
}

func TestListenArguments(t *testing.T) {
	t.Parallel()
	db, _ := openGorm(t, pgtest.DSN(t), nil)
	e := cairnqgorm.New(db, nil)
	for _, chans := range [][]string{nil, {""}, {strings.Repeat("x", 64)}} {
		if _, err := e.Listen(testCtx(t), chans, func(string, string) {}); err == nil {
			t.Errorf("Listen(%q) succeeded", chans)
		}
	}
	if _, err := e.Listen(testCtx(t), []string{"a"}, nil); err == nil {
		t.Error("Listen with a nil onNotify succeeded")
	}
}

func TestListenUnavailable(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)

	// A pool of one connection: LISTEN would hold it for good.
	db, sqlDB := openGorm(t, dsn, nil)
	sqlDB.SetMaxOpenConns(1)
	if _, err := cairnqgorm.New(db, nil).Listen(testCtx(t), []string{"a"}, func(string, string) {}); !errors.Is(err, executor.ErrListenUnavailable) {
		t.Errorf("one-connection pool: %v, want ErrListenUnavailable", err)
	}

	// gorm's postgres dialector over a *sql.DB of another driver.
	pq, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pq.Close() })
	e := cairnqgorm.New(mustGorm(t, pq), nil)
	if _, err := e.Listen(testCtx(t), []string{"a"}, func(string, string) {}); !errors.Is(err, executor.ErrListenUnavailable) {
		t.Errorf("lib/pq pool: %v, want ErrListenUnavailable", err)
	}
	if n := pq.Stats().InUse; n != 0 {
		t.Errorf("%d connections in use after the refusal, want the probed one back in the pool", n)
	}
	// Statements still work there; cairnq polls.
	if n := count(t, e, `SELECT count(*) AS n FROM pg_class WHERE relname = $1`, "pg_class"); n != 1 {
		t.Errorf("count = %d", n)
	}
}

// Two clients on separate pools share nothing in-process, so with every
// poll set to a minute only LISTEN/NOTIFY through the adapter can carry the
// task to the worker and its result back to the caller in time.
func TestListenWakesWorkerAndCaller(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	apiDB, _ := openGorm(t, dsn, nil)
	workerDB, _ := openGorm(t, dsn, nil)
	api := openClient(t, cairnqgorm.New(apiDB, nil))
	w, err := cairnq.NewWorker(openClient(t, cairnqgorm.New(workerDB, nil)), &cairnq.WorkerOptions{PollInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("echo", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return tc.Payload(), nil }, nil)
	runWorker(t, w)
	slow := cairnq.WaitOptions{Timeout: waitTimeout, PollInterval: time.Minute, MaxPollInterval: time.Minute}
	for i := range 3 {
		got, err := api.Call(testCtx(t), "echo", i, &cairnq.CallOptions{WaitOptions: slow})
		if err != nil || string(got.Result) != fmt.Sprint(i) {
			t.Fatalf("call %d (woken by notifications or not at all): %v %+v", i, err, got)
		}
	}
}
