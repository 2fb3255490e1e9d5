package cairnqgorm_test

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
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
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

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

// adapter is this adapter for the tests shared with the others.
var adapter = adaptertest.Adapter{
	Name: "gorm",
	Open: func(t *testing.T, dsn string, o adaptertest.Options) adaptertest.Pool {
		db, sqlDB := openGorm(t, dsn, nil)
		e := cairnqgorm.New(db, &cairnqgorm.Options{OnReconnect: o.OnReconnect})
		if o.FastIdleCheck {
			cairnqgorm.SetListenHealth(e, 20*time.Millisecond, 5*time.Second)
		}
		return adaptertest.Pool{Exec: e, App: sqlDB}
	},
	InTx: func(s executor.Session) bool {
		tx, ok := cairnqgorm.GormDB(s)
		return ok && tx != nil
	},
	ErrPrefix: "cairnq/gorm: query: ",
	ConnsHeld: 1, // pgx's stdlib: the LISTEN connection is one of the pool's
}

func TestQueryExecTx(t *testing.T) { adapter.Parallel(t, adaptertest.Adapter.QueryExecTx) }

// gorm's Raw would take ? and @name for its own placeholders and log every
// statement; the executor bypasses both, and gorm's PrepareStmt cache too,
// which could not prepare a multi-statement script.
func TestNoRewritingNoLoggingNoPreparing(t *testing.T) {
	t.Parallel()
	ctx := adaptertest.Ctx(t)
	log := &countingLogger{}
	db, _ := openGorm(t, pgtest.DSN(t), &gorm.Config{Logger: log, PrepareStmt: true})
	e := cairnqgorm.New(db, nil)

	rows := adaptertest.Query(t, e, `SELECT $1::text AS a, '?' AS q, '@name' AS at, '{"k":1}'::jsonb ? 'k' AS has`, "x")
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
	err := adapter.ErrorsKeepSQLState(t)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
		t.Errorf("err = %v, want a *pgconn.PgError 42P01", err)
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
	return adaptertest.ByTaskID(rs, func(r rendering) string { return r.TaskID })
}

// The application's own db.Transaction submits a task with SubmitTx: it is
// invisible until the commit and gone after a rollback.
func TestSubmitTxInAppTransaction(t *testing.T) {
	t.Parallel()
	ctx := adaptertest.Ctx(t)
	db, _ := openGorm(t, pgtest.DSN(t), nil)
	c := adaptertest.OpenClient(t, cairnqgorm.New(db, nil))
	if err := db.AutoMigrate(&rendering{}); err != nil {
		t.Fatal(err)
	}

	kept := adaptertest.SubmitTxInAppTransaction(t, c, func(ctx context.Context, fn func(context.Context, adaptertest.AppTx) error) error {
		return db.Transaction(func(tx *gorm.DB) error { return fn(ctx, gormTx(c, tx)) })
	})
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

// gormTx is the application's gorm transaction tx as the shared test uses
// it: the typed SubmitTx on it, and a model row created through gorm.
func gormTx(c *cairnq.Client, tx *gorm.DB) adaptertest.AppTx {
	return adaptertest.AppTx{
		Submit: func(ctx context.Context, kind string, payload any, opts *cairnq.SubmitOptions) (*cairnq.Task, error) {
			return cairnqgorm.SubmitTx(ctx, c, tx, kind, payload, opts)
		},
		SubmitMany: func(ctx context.Context, items []cairnq.SubmitItem) ([]*cairnq.Task, error) {
			return cairnqgorm.SubmitManyTx(ctx, c, tx, items)
		},
		Record: func(_ context.Context, taskID string) error {
			return tx.Create(&rendering{TaskID: taskID, Body: "x"}).Error
		},
	}
}

// A handler settles with the typed SucceedIn: the model row it writes
// through gorm (hooks and all) commits with the settlement, and a lost
// lease rolls it back. Another handler settles inside its own
// db.Transaction with SucceedTx. gorm's config is the same object
// throughout.
func TestWorkerSettlesInGormTransactions(t *testing.T) {
	t.Parallel()
	log := &countingLogger{}
	db, _ := openGorm(t, pgtest.DSN(t), &gorm.Config{Logger: log})
	if err := db.AutoMigrate(&rendering{}); err != nil {
		t.Fatal(err)
	}
	before := fingerprint(db)
	tracesBefore := log.traces.Load()

	c := adaptertest.OpenClient(t, cairnqgorm.New(db, nil))
	done := adaptertest.WorkerSettles(t, c, adaptertest.Settlers{
		Steal: func(ctx context.Context, taskID string) error {
			return db.Exec("UPDATE cairnq_tasks SET worker_id = 'thief' WHERE id = ?", taskID).Error
		},
		SucceedIn: func(ctx context.Context, tc *cairnq.TaskContext) error {
			return cairnqgorm.SucceedIn(ctx, tc, func(ctx context.Context, tx *gorm.DB) (any, error) {
				r := rendering{TaskID: tc.ID(), Body: "pages"}
				if err := tx.Create(&r).Error; err != nil {
					return nil, err
				}
				return map[string]any{"id": r.ID}, nil
			})
		},
		SucceedTx: func(ctx context.Context, tc *cairnq.TaskContext) error {
			return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
				if err := tx.Create(&rendering{TaskID: tc.ID(), Body: "own"}).Error; err != nil {
					return err
				}
				return cairnqgorm.SucceedTx(ctx, tc, tx, "done")
			})
		},
	})
	rs := renderings(t, db)
	if len(rs) != 2 || rs[done.OK].Stamp != "hooked" || rs[done.Own].Stamp != "hooked" {
		t.Errorf("renderings = %+v, want %s and %s, stamped by the hook, and no row of the lost lease", rs, done.OK, done.Own)
	}
	if id := int64(rs[done.OK].ID); id != done.ResultID {
		t.Errorf("result carries row id %d, want %d", done.ResultID, id)
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
	c := adaptertest.OpenClient(t, foreign{cairnqgorm.New(db, nil)})
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
	adaptertest.RunWorker(t, w)
	if _, err := c.Submit(adaptertest.Ctx(t), "x", nil, nil); err != nil {
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

func TestListen(t *testing.T) { adapter.Parallel(t, adaptertest.Adapter.Listen) }

func TestListenReconnects(t *testing.T) { adapter.Parallel(t, adaptertest.Adapter.ListenReconnects) }

func TestListenIdleCheckKeepsTheConnection(t *testing.T) {
	adapter.Parallel(t, adaptertest.Adapter.ListenIdleCheckKeepsTheConnection)
}

func TestCloseStopsListeners(t *testing.T) {
	adapter.Parallel(t, adaptertest.Adapter.CloseStopsListeners)
}

func TestListenArguments(t *testing.T) { adapter.Parallel(t, adaptertest.Adapter.ListenArguments) }

func TestListenUnavailable(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)

	// A pool of one connection: LISTEN would hold it for good.
	db, sqlDB := openGorm(t, dsn, nil)
	sqlDB.SetMaxOpenConns(1)
	adaptertest.ListenRefused(t, "one-connection pool", cairnqgorm.New(db, nil), sqlDB)

	// gorm's postgres dialector over a *sql.DB of another driver. Statements
	// still work there; cairnq polls.
	pq, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pq.Close() })
	adaptertest.ListenRefused(t, "lib/pq pool", cairnqgorm.New(mustGorm(t, pq), nil), pq)
}

func TestListenWakesWorkerAndCaller(t *testing.T) {
	adapter.Parallel(t, adaptertest.Adapter.ListenWakesWorkerAndCaller)
}
