package cairnqbun_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	cairnqbun "github.com/cairnq/cairnq-go/adapters/bunsql"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const waitTimeout = 20 * time.Second

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

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
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

func TestQueryExecTx(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string) {
		ctx := testCtx(t)
		db := openBun(t, pgtest.DSN(t), driver)
		e := cairnqbun.New(db, nil)

		rows := mustQuery(t, e, `SELECT $1::bigint AS n, $2::text AS s, '{"a":1}'::jsonb AS j, NULL::text AS z, $3::text AS quoted`,
			int64(7), "x", "it's $1 ?")
		if len(rows) != 1 || rows[0]["n"] != int64(7) || rows[0]["s"] != "x" || rows[0]["z"] != nil || rows[0]["quoted"] != "it's $1 ?" {
			t.Fatalf("rows = %#v", rows)
		}
		if j, ok := rows[0]["j"].([]byte); !ok || string(j) != `{"a": 1}` {
			t.Errorf("jsonb = %#v, want the server's text as []byte", rows[0]["j"])
		}
		if rows := mustQuery(t, e, `SELECT 1 WHERE false`); rows == nil || len(rows) != 0 {
			t.Errorf("no rows: %#v, want an empty non-nil slice", rows)
		}
		if err := e.Exec(ctx, `CREATE TABLE t (id bigint PRIMARY KEY, note text); INSERT INTO t VALUES (1, 'one'); INSERT INTO t VALUES (2, 'two?')`); err != nil {
			t.Fatalf("multi-statement Exec: %v", err)
		}
		if n := count(t, e, `SELECT count(*) AS n FROM t`); n != 2 {
			t.Fatalf("%d rows after Exec", n)
		}

		var sawTx bool
		err := e.Tx(ctx, func(ctx context.Context, s executor.Session) error {
			tx, ok := cairnqbun.BunTx(s)
			sawTx = ok && tx.Tx != nil
			_, err := s.Query(ctx, `INSERT INTO t VALUES ($1, $2)`, int64(3), "three")
			return err
		})
		if err != nil || !sawTx {
			t.Fatalf("Tx: %v (bun.Tx seen: %v)", err, sawTx)
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
		if n := count(t, e, `SELECT count(*) AS n FROM t`); n != 3 {
			t.Errorf("%d rows, want 3: only the committed transaction's row is kept", n)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if err := db.PingContext(ctx); err != nil {
			t.Errorf("the application's db after Close: %v", err)
		}
	})
}

// bun's own QueryContext would format the arguments into the text with its
// ? placeholders (leaving $1 unbound) and run the query hooks; the executor
// bypasses both. Its transactions go through RunInTx, whose BEGIN and
// COMMIT or ROLLBACK the hooks see, as for any bun transaction.
func TestNoFormattingNoHooks(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string) {
		ctx := testCtx(t)
		db := openBun(t, pgtest.DSN(t), driver)
		hooks := &hookLog{}
		db.AddQueryHook(hooks)
		e := cairnqbun.New(db, nil)

		rows := mustQuery(t, e, `SELECT $1::text AS a, '?' AS q, '{"k":1}'::jsonb ? 'k' AS has`, "x")
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
		ctx := testCtx(t)
		e := cairnqbun.New(openBun(t, pgtest.DSN(t), driver), nil)
		_, err := e.Query(ctx, `SELECT * FROM no_such_table`)
		var st interface{ SQLState() string }
		if !errors.As(err, &st) || st.SQLState() != "42P01" || !strings.HasPrefix(err.Error(), "cairnq/bun: query: ") {
			t.Fatalf("err = %v, want SQLSTATE 42P01", err)
		}
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
		if err := e.Exec(ctx, `SELEC 1`); !errors.As(err, &st) || st.SQLState() != "42601" {
			t.Errorf("Exec err = %v", err)
		}
		if err := e.Tx(ctx, func(ctx context.Context, s executor.Session) error {
			_, err := s.Query(ctx, `SELECT 1/0`)
			return err
		}); !errors.As(err, &st) || st.SQLState() != "22012" {
			t.Errorf("Tx err = %v", err)
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
	if _, err := db.NewCreateTable().Model((*rendering)(nil)).Exec(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

func renderings(t *testing.T, db *bun.DB) map[string]rendering {
	t.Helper()
	var rs []rendering
	if err := db.NewSelect().Model(&rs).Order("task_id").Scan(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	out := map[string]rendering{}
	for _, r := range rs {
		out[r.TaskID] = r
	}
	return out
}

// The application's own RunInTx submits a task with SubmitTx: it is
// invisible until the commit and gone after a rollback.
func TestSubmitTxInAppTransaction(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string) {
		ctx := testCtx(t)
		db := openBun(t, pgtest.DSN(t), driver)
		c := openClient(t, cairnqbun.New(db, nil))
		createRenderings(t, db)

		rollback := errors.New("roll back")
		var gone *cairnq.Task
		err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			if _, err := tx.NewInsert().Model(&rendering{TaskID: "pending"}).Exec(ctx); err != nil {
				return err
			}
			var err error
			if gone, err = cairnqbun.SubmitTx(ctx, c, tx, "render", map[string]int{"n": 1}, nil); err != nil {
				return err
			}
			if _, err := c.Get(ctx, gone.ID); !errors.Is(err, cairnq.ErrNotFound) {
				t.Errorf("uncommitted task visible outside the transaction: %v", err)
			}
			return rollback
		})
		if err != rollback {
			t.Fatalf("RunInTx: %v", err)
		}
		if _, err := c.Get(ctx, gone.ID); !errors.Is(err, cairnq.ErrNotFound) {
			t.Errorf("task of a rolled-back transaction: %v", err)
		}

		var kept *cairnq.Task
		err = db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			var err error
			if kept, err = cairnqbun.SubmitTx(ctx, c, tx, "render", nil, &cairnq.SubmitOptions{Key: "k"}); err != nil {
				return err
			}
			if _, err := c.GetByKey(ctx, "k"); !errors.Is(err, cairnq.ErrNotFound) {
				t.Errorf("uncommitted keyed task visible: %v", err)
			}
			_, err = tx.NewInsert().Model(&rendering{TaskID: kept.ID}).Exec(ctx)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := c.GetByKey(ctx, "k"); err != nil || got.ID != kept.ID || got.Status != cairnq.StatusQueued {
			t.Errorf("committed task: %+v %v", got, err)
		}
		if rs := renderings(t, db); len(rs) != 1 || rs[kept.ID].TaskID != kept.ID {
			t.Errorf("renderings = %+v", rs)
		}
		if _, err := cairnqbun.SubmitTx(ctx, c, bun.Tx{}, "render", nil, nil); err == nil {
			t.Error("SubmitTx with a zero bun.Tx succeeded")
		}
	})
}

// A handler settles with the typed SucceedIn: the model row it inserts
// with bun commits with the settlement, and a lost lease rolls it back.
// Another handler settles inside its own RunInTx with SucceedTx.
func TestWorkerSettlesInBunTransactions(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string) {
		ctx := testCtx(t)
		db := openBun(t, pgtest.DSN(t), driver)
		createRenderings(t, db)
		c := openClient(t, cairnqbun.New(db, nil))
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
				if _, err := db.ExecContext(ctx, "UPDATE cairnq_tasks SET worker_id = 'thief' WHERE id = ?", tc.ID()); err != nil {
					return nil, err
				}
			}
			err := cairnqbun.SucceedIn(ctx, tc, func(ctx context.Context, tx bun.Tx) (any, error) {
				r := rendering{TaskID: tc.ID(), Body: "pages"}
				if _, err := tx.NewInsert().Model(&r).Exec(ctx); err != nil {
					return nil, err
				}
				return map[string]int64{"id": r.ID}, nil
			})
			if steal {
				lost <- err
			}
			return nil, err
		}, nil)
		w.Handle("render-own-tx", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			return nil, db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
				if _, err := tx.NewInsert().Model(&rendering{TaskID: tc.ID(), Body: "own"}).Exec(ctx); err != nil {
					return err
				}
				return cairnqbun.SucceedTx(ctx, tc, tx, "done")
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
		if len(rs) != 2 || rs[ok.ID].Body != "pages" || rs[own.ID].Body != "own" {
			t.Errorf("renderings = %+v, want %s and %s and no row of the lost lease", rs, ok.ID, own.ID)
		}
		if got, _ := c.Get(ctx, ok.ID); !strings.Contains(string(got.Result), fmt.Sprint(rs[ok.ID].ID)) {
			t.Errorf("result %s does not carry the row id %d", got.Result, rs[ok.ID].ID)
		}
		if s, _ := c.Get(ctx, stolen.ID); s.Status != cairnq.StatusRunning || s.WorkerID != "thief" {
			t.Errorf("stolen task: %s by %s", s.Status, s.WorkerID)
		}
	})
}

func TestIDBSession(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string) {
		ctx := testCtx(t)
		db := openBun(t, pgtest.DSN(t), driver)
		if _, err := db.ExecContext(ctx, "CREATE TABLE i (id bigint)"); err != nil {
			t.Fatal(err)
		}
		insert := func(idb bun.IDB, id int64) {
			t.Helper()
			s, err := cairnqbun.IDBSession(idb)
			if err != nil {
				t.Fatal(err)
			}
			mustQuery(t, s, `INSERT INTO i VALUES ($1)`, id)
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
		s, _ := cairnqbun.IDBSession(tx)
		if got, ok := cairnqbun.BunTx(s); !ok || got.Tx != tx.Tx {
			t.Error("BunTx of a transaction's IDBSession")
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if s, _ := cairnqbun.IDBSession(db); s != nil {
			if _, ok := cairnqbun.BunTx(s); ok {
				t.Error("BunTx of the pool's session reports a transaction")
			}
		}
		if n := count(t, cairnqbun.New(db, nil), `SELECT count(*) AS n FROM i`); n != 3 {
			t.Errorf("%d rows, want 3 (the transaction's two rolled back)", n)
		}
		if _, err := cairnqbun.IDBSession(bun.Tx{}); err == nil {
			t.Error("IDBSession of a zero bun.Tx succeeded")
		}
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

func notify(t *testing.T, db *bun.DB, channel, payload string) {
	t.Helper()
	if _, err := db.DB.ExecContext(testCtx(t), `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
		t.Fatal(err)
	}
}

// listenerPIDs lists the backends LISTENing in the test's database (after
// an idle check, pgx's last query is its ping).
func listenerPIDs(t *testing.T, db *bun.DB) []int64 {
	t.Helper()
	rows, err := db.DB.QueryContext(testCtx(t), `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()
		  AND (query ILIKE 'listen%' OR query = '-- ping') ORDER BY pid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var pids []int64
	for rows.Next() {
		var pid int64
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return pids
}

// oneListener waits until exactly one backend LISTENs, other than not,
// and returns it.
func oneListener(t *testing.T, db *bun.DB, not int64) int64 {
	t.Helper()
	var pid int64
	poll(t, "one listener backend", func() bool {
		pids := listenerPIDs(t, db)
		if len(pids) == 1 && pids[0] != not {
			pid = pids[0]
			return true
		}
		return false
	})
	return pid
}

func TestListen(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string) {
		db := openBun(t, pgtest.DSN(t), driver)
		e := cairnqbun.New(db, nil)
		got := make(chan note, 16)
		var stopped atomic.Bool
		stop, err := e.Listen(testCtx(t), []string{"cairnq_a", "Mixed Case.ch", "cairnq_a"}, func(c, p string) {
			if stopped.Load() {
				t.Errorf("notification after stop: %s %q", c, p)
			}
			got <- note{c, p}
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		wantInUse := map[string]int{viaStdlib: 1, viaPgdriver: 0}[driver]
		if n := db.Stats().InUse; n != wantInUse {
			t.Errorf("%d pooled connections in use while listening, want %d", n, wantInUse)
		}

		// Notifications on one listener arrive in commit order, so the
		// absence of the others before the last one is proof they were not
		// delivered. Listen returned once subscribed: nothing is lost.
		sent := []note{
			{"cairnq_other", "ignored"},
			{"cairnq_a", `{"id":1,"q":"it's \"x\""}`},
			{"CAIRNQ_A", "case matters"},
			{"Mixed Case.ch", "héllo\nworld"},
			{"cairnq_a", ""},
		}
		for _, n := range sent {
			notify(t, db, n.channel, n.payload)
		}
		for _, want := range []note{sent[1], sent[3], sent[4]} {
			if n := recv(t, got); n != want {
				t.Fatalf("got %+v, want %+v", n, want)
			}
		}
		oneListener(t, db, 0)

		stop()
		stopped.Store(true)
		stop() // idempotent
		if n := db.Stats().InUse; n != 0 {
			t.Errorf("%d connections in use after stop", n)
		}
		poll(t, "the listener backend to end", func() bool { return len(listenerPIDs(t, db)) == 0 })
		notify(t, db, "cairnq_a", "after stop")
		select {
		case n := <-got:
			t.Fatalf("delivered after stop: %+v", n)
		default:
		}
	})
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
	eachDriver(t, func(t *testing.T, driver string) {
		db := openBun(t, pgtest.DSN(t), driver)
		admin, err := sql.Open("postgres", pgtest.AdminDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.Close() })
		reconnected := make(chan struct{}, 16)
		e := cairnqbun.New(db, &cairnqbun.Options{OnReconnect: func() { reconnected <- struct{}{} }})
		channel := "cairnq_wake_" + strings.ReplaceAll(driver, "-", "_")
		got := make(chan note, 16)
		stop, err := e.Listen(testCtx(t), []string{channel}, func(c, p string) { got <- note{c, p} })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		notify(t, db, channel, "before")
		if n := recv(t, got); n.payload != "before" {
			t.Fatalf("got %+v", n)
		}

		pid := oneListener(t, db, 0)
		for round := range 2 {
			if _, err := admin.ExecContext(testCtx(t), `SELECT pg_terminate_backend($1)`, pid); err != nil {
				t.Fatal(err)
			}
			select {
			case <-reconnected:
			case <-time.After(waitTimeout):
				t.Fatalf("round %d: OnReconnect did not run", round)
			}
			pid = oneListener(t, db, pid)
			payload := fmt.Sprint("after ", round)
			notify(t, db, channel, payload)
			if n := recv(t, got); n != (note{channel, payload}) {
				t.Fatalf("got %+v", n)
			}
		}
		wantInUse := map[string]int{viaStdlib: 1, viaPgdriver: 0}[driver]
		if n := db.Stats().InUse; n != wantInUse {
			t.Errorf("%d connections in use after reconnects, want %d: broken ones must be discarded", n, wantInUse)
		}
		stop()
		if n := listenerGoroutines(t, channel); n != 0 {
			t.Errorf("%d listener goroutines outlive stop", n)
		}
		if n := db.Stats().InUse; n != 0 {
			t.Errorf("%d connections in use after stop", n)
		}
	})
}

// lastProbe is when the pgdriver listener last sent its probe from the
// pool, as pg_stat_activity remembers it.
func lastProbe(t *testing.T, db *bun.DB) time.Time {
	t.Helper()
	var at sql.NullTime
	err := db.DB.QueryRowContext(testCtx(t), `SELECT max(query_start) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'SELECT pg_notify(''cairnq\_probe\_%'`).Scan(&at)
	if err != nil {
		t.Fatal(err)
	}
	return at.Time
}

func TestListenIdleCheckKeepsTheConnection(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string) {
		db := openBun(t, pgtest.DSN(t), driver)
		reconnected := make(chan struct{}, 16)
		e := cairnqbun.New(db, &cairnqbun.Options{OnReconnect: func() { reconnected <- struct{}{} }})
		cairnqbun.SetListenHealth(e, 20*time.Millisecond, 5*time.Second)
		got := make(chan note, 16)
		stop, err := e.Listen(testCtx(t), []string{"idle"}, func(c, p string) { got <- note{c, p} })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		pid := oneListener(t, db, 0)
		switch driver {
		case viaStdlib: // pgx pings on the LISTEN connection itself
			poll(t, "an idle check ping", func() bool {
				var q string
				err := db.DB.QueryRowContext(testCtx(t), `SELECT query FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&q)
				return err == nil && q == "-- ping"
			})
		case viaPgdriver: // two probes in a row: the first came back
			for range 2 {
				since := lastProbe(t, db)
				poll(t, "an idle check probe", func() bool { return lastProbe(t, db).After(since) })
			}
		}
		notify(t, db, "idle", "still here")
		if n := recv(t, got); n.payload != "still here" {
			t.Fatalf("got %+v", n)
		}
		if pids := listenerPIDs(t, db); !slices.Equal(pids, []int64{pid}) {
			t.Errorf("listener backends %v, want still %d", pids, pid)
		}
		select {
		case <-reconnected:
			t.Error("an idle check reconnected")
		default:
		}
	})
}

func TestCloseStopsListeners(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string) {
		db := openBun(t, pgtest.DSN(t), driver)
		e := cairnqbun.New(db, nil)
		stop, err := e.Listen(testCtx(t), []string{"a"}, func(string, string) {})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		stop() // after Close: a no-op
		if n := db.Stats().InUse; n != 0 {
			t.Errorf("%d connections in use after Close", n)
		}
		poll(t, "the listener backend to end", func() bool { return len(listenerPIDs(t, db)) == 0 })
		if _, err := e.Listen(testCtx(t), []string{"a"}, func(string, string) {}); err == nil {
			t.Error("Listen after Close succeeded")
		}
		if err := db.PingContext(testCtx(t)); err != nil {
			t.Errorf("the application's pool after Close: %v", err)
		}
	})
}

func TestListenArguments(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string) {
		e := cairnqbun.New(openBun(t, pgtest.DSN(t), driver), nil)
		bad := [][]string{nil, {""}, {strings.Repeat("x", 64)}}
		if driver == viaPgdriver {
			bad = append(bad, []string{`quote"d`}, []string{`back\slash`}, []string{"new\nline"})
		}
		for _, chans := range bad {
			if _, err := e.Listen(testCtx(t), chans, func(string, string) {}); err == nil {
				t.Errorf("Listen(%q) succeeded", chans)
			}
		}
		if _, err := e.Listen(testCtx(t), []string{"a"}, nil); err == nil {
			t.Error("Listen with a nil onNotify succeeded")
		}
	})
}

func TestListenUnavailable(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)

	// pgx's stdlib with a pool of one connection: LISTEN would hold it.
	one := openBun(t, dsn, viaStdlib)
	one.SetMaxOpenConns(1)
	if _, err := cairnqbun.New(one, nil).Listen(testCtx(t), []string{"a"}, func(string, string) {}); !errors.Is(err, executor.ErrListenUnavailable) {
		t.Errorf("one-connection pool: %v, want ErrListenUnavailable", err)
	}

	// bun over lib/pq: neither pgx's stdlib nor pgdriver.
	pq, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := bun.NewDB(pq, pgdialect.New())
	t.Cleanup(func() { db.Close() })
	e := cairnqbun.New(db, nil)
	if _, err := e.Listen(testCtx(t), []string{"a"}, func(string, string) {}); !errors.Is(err, executor.ErrListenUnavailable) {
		t.Errorf("lib/pq pool: %v, want ErrListenUnavailable", err)
	}
	if n := pq.Stats().InUse; n != 0 {
		t.Errorf("%d connections in use after the refusal, want the probed one back in the pool", n)
	}
	if n := count(t, e, `SELECT count(*) AS n FROM pg_class WHERE relname = $1`, "pg_class"); n != 1 {
		t.Errorf("count = %d", n)
	}
}

// Two clients on separate pools share nothing in-process, so with every
// poll set to a minute only LISTEN/NOTIFY through the adapter can carry the
// task to the worker and its result back to the caller in time.
func TestListenWakesWorkerAndCaller(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string) {
		dsn := pgtest.DSN(t)
		api := openClient(t, cairnqbun.New(openBun(t, dsn, driver), nil))
		w, err := cairnq.NewWorker(openClient(t, cairnqbun.New(openBun(t, dsn, driver), nil)), &cairnq.WorkerOptions{PollInterval: time.Minute})
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
	})
}
