package cairnqbunsql_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	_ "github.com/lib/pq" // a database/sql driver that is neither pgx's stdlib nor pgdriver
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/driver/pgdriver"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqbunsql "github.com/cairnq/cairnq-go/adapters/bunsql"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The two drivers a *bun.DB with pgdialect runs on.
const (
	viaStdlib   = "pgx-stdlib"
	viaPgdriver = "pgdriver"
)

var drivers = []string{viaStdlib, viaPgdriver}

// eachDriver runs test once per driver, in parallel.
func eachDriver(t *testing.T, test func(t *testing.T, driver string)) {
	t.Parallel()
	for _, d := range drivers {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			test(t, d)
		})
	}
}

// eachAdapter runs one of the tests shared with the other adapters once
// per driver, in parallel.
func eachAdapter(t *testing.T, test func(adaptertest.Adapter, *testing.T)) {
	eachDriver(t, func(t *testing.T, driver string) { test(adapterOn(driver), t) })
}

// adapterOn is this adapter over driver, for the tests shared with the
// other adapters. pgdriver dials its own LISTEN connection, cannot quote a
// channel name holding a double quote, and shows its idle checks as
// probes sent from the pool rather than pings.
func adapterOn(driver string) adaptertest.Adapter {
	a := adaptertest.Adapter{
		Name: "bun_" + driver,
		Open: func(t *testing.T, dsn string, o adaptertest.Options) adaptertest.Pool {
			db := openBun(t, dsn, driver)
			e := cairnqbunsql.New(db, &cairnqbunsql.Options{OnReconnect: o.OnReconnect})
			if o.FastIdleCheck {
				cairnqbunsql.SetListenHealth(e, 20*time.Millisecond, 5*time.Second)
			}
			return adaptertest.Pool{Exec: e, App: db.DB}
		},
		InTx: func(s executor.Session) bool {
			tx, ok := cairnqbunsql.BunTx(s)
			return ok && tx.Tx != nil
		},
		ErrPrefix:    "cairnq/bun: query: ",
		ConnsHeld:    1,
		MixedChannel: "Mixed Case.ch",
	}
	if driver == viaPgdriver {
		a.ConnsHeld = 0
		a.BadChannels = [][]string{{`quote"d`}, {`back\slash`}, {"new\nline"}}
		a.AwaitIdleCheck = awaitProbes
	}
	return a
}

// openBun opens the application's *bun.DB on dsn over driver, closed at
// cleanup.
func openBun(t testing.TB, dsn, driver string) *bun.DB {
	t.Helper()
	var sqldb *sql.DB
	switch driver {
	case viaStdlib:
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		sqldb = stdlib.OpenDB(*cfg)
	case viaPgdriver:
		sqldb = sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(dsn)))
	default:
		t.Fatalf("unknown driver %q", driver)
	}
	db := bun.NewDB(sqldb, pgdialect.New())
	t.Cleanup(func() { db.Close() })
	return db
}

// hookLog records the queries bun's query hooks see.
type hookLog struct {
	mu      sync.Mutex
	queries []string
}

func (h *hookLog) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context { return ctx }

func (h *hookLog) AfterQuery(_ context.Context, e *bun.QueryEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.queries = append(h.queries, e.Query)
}

func (h *hookLog) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.queries
	h.queries = nil
	return q
}

func TestQueryExecTx(t *testing.T) { eachAdapter(t, adaptertest.Adapter.QueryExecTx) }

// bun's own QueryContext would format the arguments into the text with its
// ? placeholders (leaving $1 unbound) and run the query hooks; the executor
// bypasses both. Its transactions go through RunInTx, whose BEGIN and
// COMMIT or ROLLBACK the hooks see, as for any bun transaction.
func TestNoFormattingNoHooks(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string) {
		ctx := adaptertest.Ctx(t)
		db := openBun(t, pgtest.DSN(t), driver)
		hooks := &hookLog{}
		db.AddQueryHook(hooks)
		e := cairnqbunsql.New(db, nil)

		rows := adaptertest.Query(t, e, `SELECT $1::text AS a, '?' AS q, '{"k":1}'::jsonb ? 'k' AS has`, "x")
		if r := rows[0]; r["a"] != "x" || r["q"] != "?" || r["has"] != true {
			t.Errorf("row = %#v", r)
		}
		if err := e.Exec(ctx, `CREATE TABLE p (id int); INSERT INTO p VALUES (1)`); err != nil {
			t.Fatal(err)
		}
		if q := hooks.take(); len(q) != 0 {
			t.Errorf("bun's hooks saw cairnq's statements: %q", q)
		}
		if err := e.Tx(ctx, func(ctx context.Context, s executor.Session) error {
			_, err := s.Query(ctx, `INSERT INTO p VALUES ($1)`, int64(2))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		_ = e.Tx(ctx, func(context.Context, executor.Session) error { return errors.New("no") })
		if q := hooks.take(); !slices.Equal(q, []string{"BEGIN", "COMMIT", "BEGIN", "ROLLBACK"}) {
			t.Errorf("hooks saw %q, want only RunInTx's BEGIN/COMMIT and BEGIN/ROLLBACK", q)
		}
	})
}

func TestErrorsKeepSQLState(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string) {
		err := adapterOn(driver).ErrorsKeepSQLState(t)
		switch driver {
		case viaStdlib:
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) {
				t.Errorf("err = %v, want a *pgconn.PgError inside", err)
			}
		case viaPgdriver:
			var pe pgdriver.Error
			if !errors.As(err, &pe) || pe.Field('C') != "42P01" {
				t.Errorf("err = %v, want a pgdriver.Error inside", err)
			}
		}
	})
}

type rendering struct {
	bun.BaseModel `bun:"table:renderings"`
	ID            int64  `bun:",pk,autoincrement"`
	TaskID        string `bun:",unique,notnull"`
	Body          string
}

func createRenderings(t *testing.T, db *bun.DB) {
	t.Helper()
	if _, err := db.NewCreateTable().Model((*rendering)(nil)).Exec(adaptertest.Ctx(t)); err != nil {
		t.Fatal(err)
	}
}

func renderings(t *testing.T, db *bun.DB) map[string]rendering {
	t.Helper()
	var rs []rendering
	if err := db.NewSelect().Model(&rs).Order("task_id").Scan(adaptertest.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	return adaptertest.ByTaskID(rs, func(r rendering) string { return r.TaskID })
}

// The application's own RunInTx submits a task with SubmitTx: it is
// invisible until the commit and gone after a rollback.
func TestSubmitTxInAppTransaction(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string) {
		db := openBun(t, pgtest.DSN(t), driver)
		c := adaptertest.OpenClient(t, cairnqbunsql.New(db, nil))
		createRenderings(t, db)

		kept := adaptertest.SubmitTxInAppTransaction(t, c, func(ctx context.Context, fn func(context.Context, adaptertest.AppTx) error) error {
			return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error { return fn(ctx, bunTx(c, tx)) })
		})
		if rs := renderings(t, db); len(rs) != 1 || rs[kept.ID].TaskID != kept.ID {
			t.Errorf("renderings = %+v", rs)
		}
		if _, err := cairnqbunsql.SubmitTx(adaptertest.Ctx(t), c, bun.Tx{}, "render", nil, nil); err == nil {
			t.Error("SubmitTx with a zero bun.Tx succeeded")
		}
	})
}

// bunTx is the application's bun transaction tx as the shared test uses
// it: the typed SubmitTx on it, and a model row inserted with bun.
func bunTx(c *cairnq.Client, tx bun.Tx) adaptertest.AppTx {
	return adaptertest.AppTx{
		Submit: func(ctx context.Context, kind string, payload any, opts *cairnq.SubmitOptions) (*cairnq.Task, error) {
			return cairnqbunsql.SubmitTx(ctx, c, tx, kind, payload, opts)
		},
		SubmitMany: func(ctx context.Context, items []cairnq.SubmitItem) ([]*cairnq.Task, error) {
			return cairnqbunsql.SubmitManyTx(ctx, c, tx, items)
		},
		Record: func(ctx context.Context, taskID string) error {
			_, err := tx.NewInsert().Model(&rendering{TaskID: taskID}).Exec(ctx)
			return err
		},
	}
}

// A handler settles with the typed SucceedIn: the model row it inserts
// with bun commits with the settlement, and a lost lease rolls it back.
// Another handler settles inside its own RunInTx with SucceedTx.
func TestWorkerSettlesInBunTransactions(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string) {
		db := openBun(t, pgtest.DSN(t), driver)
		createRenderings(t, db)
		c := adaptertest.OpenClient(t, cairnqbunsql.New(db, nil))
		done := adaptertest.WorkerSettles(t, c, adaptertest.Settlers{
			Steal: func(ctx context.Context, taskID string) error {
				_, err := db.ExecContext(ctx, "UPDATE cairnq_tasks SET worker_id = 'thief' WHERE id = ?", taskID)
				return err
			},
			SucceedIn: func(ctx context.Context, tc *cairnq.TaskContext) error {
				return cairnqbunsql.SucceedIn(ctx, tc, func(ctx context.Context, tx bun.Tx) (any, error) {
					r := rendering{TaskID: tc.ID(), Body: "pages"}
					if _, err := tx.NewInsert().Model(&r).Exec(ctx); err != nil {
						return nil, err
					}
					return map[string]int64{"id": r.ID}, nil
				})
			},
			SucceedTx: func(ctx context.Context, tc *cairnq.TaskContext) error {
				return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
					if _, err := tx.NewInsert().Model(&rendering{TaskID: tc.ID(), Body: "own"}).Exec(ctx); err != nil {
						return err
					}
					return cairnqbunsql.SucceedTx(ctx, tc, tx, "done")
				})
			},
		})
		rs := renderings(t, db)
		if len(rs) != 2 || rs[done.OK].Body != "pages" || rs[done.Own].Body != "own" {
			t.Errorf("renderings = %+v, want %s and %s and no row of the lost lease", rs, done.OK, done.Own)
		}
		if id := rs[done.OK].ID; id != done.ResultID {
			t.Errorf("result carries row id %d, want %d", done.ResultID, id)
		}
	})
}

func TestIDBSession(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string) {
		ctx := adaptertest.Ctx(t)
		db := openBun(t, pgtest.DSN(t), driver)
		if _, err := db.ExecContext(ctx, "CREATE TABLE i (id bigint)"); err != nil {
			t.Fatal(err)
		}
		insert := func(idb bun.IDB, id int64) {
			t.Helper()
			s, err := cairnqbunsql.IDBSession(idb)
			if err != nil {
				t.Fatal(err)
			}
			adaptertest.Query(t, s, `INSERT INTO i VALUES ($1)`, id)
		}
		insert(db, 1)
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		insert(conn, 2)
		insert(&conn, 3)
		conn.Close()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		insert(tx, 4)
		insert(&tx, 5)
		s, _ := cairnqbunsql.IDBSession(tx)
		if got, ok := cairnqbunsql.BunTx(s); !ok || got.Tx != tx.Tx {
			t.Error("BunTx of a transaction's IDBSession")
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if s, _ := cairnqbunsql.IDBSession(db); s != nil {
			if _, ok := cairnqbunsql.BunTx(s); ok {
				t.Error("BunTx of the pool's session reports a transaction")
			}
		}
		if n := adaptertest.Count(t, cairnqbunsql.New(db, nil), `SELECT count(*) AS n FROM i`); n != 3 {
			t.Errorf("%d rows, want 3 (the transaction's two rolled back)", n)
		}
		if _, err := cairnqbunsql.IDBSession(bun.Tx{}); err == nil {
			t.Error("IDBSession of a zero bun.Tx succeeded")
		}
	})
}

func TestListen(t *testing.T) { eachAdapter(t, adaptertest.Adapter.Listen) }

func TestListenReconnects(t *testing.T) { eachAdapter(t, adaptertest.Adapter.ListenReconnects) }

// lastProbe is when the pgdriver listener last sent its probe from the
// pool, as pg_stat_activity remembers it.
func lastProbe(t *testing.T, db *sql.DB) time.Time {
	t.Helper()
	var at sql.NullTime
	err := db.QueryRowContext(adaptertest.Ctx(t), `SELECT max(query_start) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'SELECT pg_notify(''cairnq\_probe\_%'`).Scan(&at)
	if err != nil {
		t.Fatal(err)
	}
	return at.Time
}

// awaitProbes waits for two idle-check probes of the pgdriver listener in
// a row: the first came back, so the connection passed a check.
func awaitProbes(t *testing.T, p adaptertest.Pool, _ int64) {
	t.Helper()
	for range 2 {
		since := lastProbe(t, p.App)
		adaptertest.Poll(t, "an idle check probe", func() bool { return lastProbe(t, p.App).After(since) })
	}
}

func TestListenIdleCheckKeepsTheConnection(t *testing.T) {
	eachAdapter(t, adaptertest.Adapter.ListenIdleCheckKeepsTheConnection)
}

func TestCloseStopsListeners(t *testing.T) { eachAdapter(t, adaptertest.Adapter.CloseStopsListeners) }

func TestListenArguments(t *testing.T) { eachAdapter(t, adaptertest.Adapter.ListenArguments) }

func TestListenUnavailable(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)

	// pgx's stdlib with a pool of one connection: LISTEN would hold it.
	one := openBun(t, dsn, viaStdlib)
	one.SetMaxOpenConns(1)
	adaptertest.ListenRefused(t, "one-connection pool", cairnqbunsql.New(one, nil), one.DB)

	// bun over lib/pq: neither pgx's stdlib nor pgdriver.
	pq, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := bun.NewDB(pq, pgdialect.New())
	t.Cleanup(func() { db.Close() })
	adaptertest.ListenRefused(t, "lib/pq pool", cairnqbunsql.New(db, nil), pq)
}

func TestListenWakesWorkerAndCaller(t *testing.T) {
	eachAdapter(t, adaptertest.Adapter.ListenWakesWorkerAndCaller)
}
