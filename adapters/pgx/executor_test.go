package cairnqpgx_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// execModes are the modes every parameter test runs in; 0 is "the pool's
// default".
var execModes = []pgx.QueryExecMode{
	0,
	pgx.QueryExecModeCacheStatement,
	pgx.QueryExecModeCacheDescribe,
	pgx.QueryExecModeDescribeExec,
	pgx.QueryExecModeExec,
	pgx.QueryExecModeSimpleProtocol,
}

func modeName(m pgx.QueryExecMode) string {
	if m == 0 {
		return "default"
	}
	return m.String()
}

// newPool is an application-owned pool on a fresh database.
func newPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// appDB is the application's pool seen through database/sql, for the
// tests shared with the adapters that run on one. Closing it leaves the
// pool open.
func appDB(t *testing.T, pool *pgxpool.Pool) *sql.DB {
	t.Helper()
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { db.Close() })
	return db
}

// adapter is this adapter for the tests shared with the others. Its
// listener dials a connection of its own, so it takes none from the pool.
var adapter = adaptertest.Adapter{
	Name: "pgx",
	Open: func(t *testing.T, dsn string, o adaptertest.Options) adaptertest.Pool {
		e, pool := newExecutorOn(t, dsn, &cairnqpgx.Options{OnReconnect: o.OnReconnect})
		if o.FastIdleCheck {
			cairnqpgx.SetListenHealth(e, 20*time.Millisecond, 5*time.Second)
		}
		return adaptertest.Pool{Exec: e, App: appDB(t, pool), InUse: func() int { return int(pool.Stat().AcquiredConns()) }}
	},
}

func newExecutor(t *testing.T, opts *cairnqpgx.Options) (*cairnqpgx.Executor, *pgxpool.Pool) {
	t.Helper()
	return newExecutorOn(t, pgtest.DSN(t), opts)
}

// newExecutorOn is an executor on an application-owned pool on dsn, which
// logs to the test's output.
func newExecutorOn(t *testing.T, dsn string, opts *cairnqpgx.Options) (*cairnqpgx.Executor, *pgxpool.Pool) {
	t.Helper()
	pool := newPool(t, dsn)
	var o cairnqpgx.Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	e := cairnqpgx.New(pool, &o)
	t.Cleanup(func() { _ = e.Close() })
	return e, pool
}

func mustExec(t *testing.T, s executor.Session, script string) {
	t.Helper()
	if err := s.Exec(adaptertest.Ctx(t), script); err != nil {
		t.Fatalf("%s: %v", script, err)
	}
}

func TestQueryReturnsPgxValues(t *testing.T) {
	t.Parallel()
	e, _ := newExecutor(t, nil)
	mustExec(t, e, `CREATE TABLE t (id bigint PRIMARY KEY, doc jsonb, str jsonb, name text, note text)`)
	adaptertest.Query(t, e, `INSERT INTO t VALUES (9007199254740993, '{"a":[1,"x"],"b":null}', '"42"', 'n', NULL)`)

	rows := adaptertest.Query(t, e, `SELECT id, doc, str, name, note FROM t`)
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	// JSON columns arrive as their text: a decoded JSON string would be a
	// Go string nobody could tell from JSON text ("42" would read as 42).
	want := executor.Row{
		"id":   int64(9007199254740993),
		"doc":  json.RawMessage(`{"a": [1, "x"], "b": null}`),
		"str":  json.RawMessage(`"42"`),
		"name": "n",
		"note": nil,
	}
	if !reflect.DeepEqual(rows[0], want) {
		t.Fatalf("row = %#v\nwant  %#v", rows[0], want)
	}
}

func TestQueryWithoutRowsReturnsEmptySlice(t *testing.T) {
	t.Parallel()
	e, _ := newExecutor(t, nil)
	mustExec(t, e, `CREATE TABLE t (id bigint)`)
	for _, sql := range []string{
		`INSERT INTO t VALUES (1)`,
		`SELECT id FROM t WHERE false`,
		`UPDATE t SET id = 2`,
	} {
		rows := adaptertest.Query(t, e, sql)
		if rows == nil || len(rows) != 0 {
			t.Errorf("%s: rows = %#v, want an empty non-nil slice", sql, rows)
		}
	}
}

// TestParamsEveryExecMode binds every kind of argument the store passes
// (nil, string, int64, float64, bool, array literals cast with ::text[],
// JSON text cast with ::jsonb) in each exec mode, on the pool and in a
// transaction, and runs the void-returning calls the store makes.
func TestParamsEveryExecMode(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	setup := cairnqpgx.New(newPool(t, dsn), nil)
	mustExec(t, setup, `CREATE TABLE item (
		id bigint PRIMARY KEY, tags text[] NOT NULL, doc jsonb, score float8, ok boolean, note text)`)

	for i, mode := range execModes {
		t.Run(modeName(mode), func(t *testing.T) {
			t.Parallel()
			e := cairnqpgx.New(newPool(t, dsn), &cairnqpgx.Options{ExecMode: mode})
			t.Cleanup(func() { _ = e.Close() })
			id := int64(1_000_000_000_000 + i)
			tags := `{"a","b c","d\"e","it's","{x}",NULL}`
			doc := `{"k":[1,2],"s":"it's \"q\" \\ é"}`

			// Every argument kind, cast in SQL.
			rows := adaptertest.Query(t, e, `SELECT $1::text[] AS tags, $2::jsonb AS doc, $3::bigint AS n,
				$4::float8 AS f, $5::boolean AS b, $6::text AS nul, $7::text AS s`,
				tags, doc, id, 1.5, true, nil, `O'Reilly \ x`)
			want := executor.Row{
				"tags": []any{"a", "b c", `d"e`, "it's", "{x}", nil},
				"doc":  json.RawMessage(`{"k": [1, 2], "s": "it's \"q\" \\ é"}`),
				"n":    id,
				"f":    1.5,
				"b":    true,
				"nul":  nil,
				"s":    `O'Reilly \ x`,
			}
			if len(rows) != 1 || !reflect.DeepEqual(rows[0], want) {
				t.Fatalf("rows = %#v\nwant   %#v", rows, want)
			}

			// Into columns, uncast where the column gives the type, then
			// filtered with an array literal.
			adaptertest.Query(t, e, `INSERT INTO item (id, tags, doc, score, ok, note)
				VALUES ($1, $2::text[], $3::jsonb, $4, $5, $6)`, id, tags, doc, 2.25, false, nil)
			rows = adaptertest.Query(t, e, `SELECT id, tags, doc->>'s' AS s, score, ok, note FROM item
				WHERE id = ANY($1::bigint[]) AND tags && $2::text[] AND ($3::text IS NULL OR note = $3)`,
				fmt.Sprintf("{%d,-1}", id), `{"b c"}`, nil)
			want = executor.Row{
				"id": id, "tags": []any{"a", "b c", `d"e`, "it's", "{x}", nil},
				"s": `it's "q" \ é`, "score": 2.25, "ok": false, "note": nil,
			}
			if len(rows) != 1 || !reflect.DeepEqual(rows[0], want) {
				t.Fatalf("rows = %#v\nwant   %#v", rows, want)
			}

			// Void results: an advisory lock in a transaction, and pg_notify.
			err := e.Tx(adaptertest.Ctx(t), func(ctx context.Context, s executor.Session) error {
				rows, err := s.Query(ctx, `SELECT pg_advisory_xact_lock($1)`, id)
				if err != nil {
					return err
				}
				if len(rows) != 1 {
					return fmt.Errorf("advisory lock: %d rows", len(rows))
				}
				// void is not in pgx's type map: Values gives the text
				// form, an empty string.
				if v := rows[0]["pg_advisory_xact_lock"]; v != nil && v != "" {
					return fmt.Errorf("void column = %#v", v)
				}
				_, err = s.Query(ctx, `SELECT pg_notify($1, $2)`, "cairnq_nobody", `{"p":1}`)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}

			// The array-literal string also binds to an uncast text[] column
			// and a jsonb column in an UPDATE.
			adaptertest.Query(t, e, `UPDATE item SET tags = $2::text[], doc = $3::jsonb WHERE id = $1`, id, `{}`, `[]`)
			rows = adaptertest.Query(t, e, `SELECT tags, doc FROM item WHERE id = $1`, id)
			if want := (executor.Row{"tags": []any{}, "doc": json.RawMessage(`[]`)}); !reflect.DeepEqual(rows[0], want) {
				t.Fatalf("after update %#v, want %#v", rows[0], want)
			}
		})
	}
}

func TestExecRunsMultiStatementScripts(t *testing.T) {
	t.Parallel()
	for _, mode := range execModes {
		t.Run(modeName(mode), func(t *testing.T) {
			t.Parallel()
			e, _ := newExecutor(t, &cairnqpgx.Options{ExecMode: mode})
			// Dollar quotes and $1 inside a function body must reach the
			// server untouched.
			mustExec(t, e, `
				CREATE TABLE a (id bigint);
				INSERT INTO a VALUES (1), (2);
				CREATE FUNCTION twice(bigint) RETURNS bigint LANGUAGE sql AS $$ SELECT $1 * 2 $$;
				INSERT INTO a SELECT twice(id) + 10 FROM a;`)
			if n := adaptertest.Count(t, e, `SELECT sum(id)::bigint AS n FROM a`); n != 1+2+12+14 {
				t.Fatalf("sum = %d", n)
			}
			// Inside a transaction too.
			err := e.Tx(adaptertest.Ctx(t), func(ctx context.Context, s executor.Session) error {
				return s.Exec(ctx, `CREATE TABLE b (x int); INSERT INTO b VALUES (1);`)
			})
			if err != nil {
				t.Fatal(err)
			}
			if n := adaptertest.Count(t, e, `SELECT count(*) AS n FROM b`); n != 1 {
				t.Fatalf("count(b) = %d", n)
			}
		})
	}
}

func TestErrorsKeepSQLState(t *testing.T) {
	t.Parallel()
	e, _ := newExecutor(t, nil)
	mustExec(t, e, `CREATE TABLE u (id bigint PRIMARY KEY)`)
	adaptertest.Query(t, e, `INSERT INTO u VALUES ($1)`, int64(1))

	check := func(op string, err error, code string) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", op)
		}
		if !strings.HasPrefix(err.Error(), "cairnq/pgx: ") {
			t.Errorf("%s: %q lacks the cairnq/pgx prefix", op, err)
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != code {
			t.Errorf("%s: errors.As *pgconn.PgError = %v, want code %s", op, pgErr, code)
		}
		var st interface{ SQLState() string }
		if !errors.As(err, &st) || st.SQLState() != code {
			t.Errorf("%s: SQLState() not %s: %v", op, code, err)
		}
	}
	_, err := e.Query(adaptertest.Ctx(t), `INSERT INTO u VALUES ($1)`, int64(1))
	check("query", err, "23505")
	check("exec", e.Exec(adaptertest.Ctx(t), `SELECT 1; SELEC 2`), "42601")
	err = e.Tx(adaptertest.Ctx(t), func(ctx context.Context, s executor.Session) error {
		_, err := s.Query(ctx, `INSERT INTO u VALUES ($1)`, int64(1))
		return err
	})
	check("tx", err, "23505")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Query(ctx, `SELECT 1`); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled query: %v, want context.Canceled", err)
	}
}

func TestTx(t *testing.T) {
	t.Parallel()
	e, pool := newExecutor(t, nil)
	mustExec(t, e, `CREATE TABLE t (id bigint PRIMARY KEY)`)
	idle := func(what string) {
		t.Helper()
		if n := pool.Stat().AcquiredConns(); n != 0 {
			t.Fatalf("%s: %d connections still acquired", what, n)
		}
	}

	t.Run("commit", func(t *testing.T) {
		err := e.Tx(adaptertest.Ctx(t), func(ctx context.Context, s executor.Session) error {
			_, err := s.Query(ctx, `INSERT INTO t VALUES (1)`)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := adaptertest.Count(t, e, `SELECT count(*) AS n FROM t WHERE id = 1`); n != 1 {
			t.Fatalf("committed row count = %d", n)
		}
		idle("commit")
	})

	t.Run("rollback on error", func(t *testing.T) {
		sentinel := errors.New("app says no")
		err := e.Tx(adaptertest.Ctx(t), func(ctx context.Context, s executor.Session) error {
			if _, err := s.Query(ctx, `INSERT INTO t VALUES (2)`); err != nil {
				return err
			}
			return sentinel
		})
		if err != sentinel {
			t.Fatalf("Tx = %v, want the fn's own error unchanged", err)
		}
		if n := adaptertest.Count(t, e, `SELECT count(*) AS n FROM t WHERE id = 2`); n != 0 {
			t.Fatal("row of a failed transaction committed")
		}
		idle("rollback")
	})

	t.Run("rollback on panic", func(t *testing.T) {
		var recovered any
		func() {
			defer func() { recovered = recover() }()
			_ = e.Tx(adaptertest.Ctx(t), func(ctx context.Context, s executor.Session) error {
				if _, err := s.Query(ctx, `INSERT INTO t VALUES (3)`); err != nil {
					return err
				}
				panic("boom")
			})
		}()
		if recovered != "boom" {
			t.Fatalf("recovered %v, want the fn's panic", recovered)
		}
		if n := adaptertest.Count(t, e, `SELECT count(*) AS n FROM t WHERE id = 3`); n != 0 {
			t.Fatal("row of a panicking transaction committed")
		}
		idle("panic")
	})

	t.Run("rollback on Goexit", func(t *testing.T) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = e.Tx(context.Background(), func(ctx context.Context, s executor.Session) error {
				if _, err := s.Query(ctx, `INSERT INTO t VALUES (4)`); err != nil {
					return err
				}
				runtime.Goexit()
				return nil
			})
		}()
		<-done
		if n := adaptertest.Count(t, e, `SELECT count(*) AS n FROM t WHERE id = 4`); n != 0 {
			t.Fatal("row of a Goexit transaction committed")
		}
		idle("goexit")
	})

	t.Run("isolation", func(t *testing.T) {
		err := e.Tx(adaptertest.Ctx(t), func(ctx context.Context, s executor.Session) error {
			if _, err := s.Query(ctx, `INSERT INTO t VALUES (5)`); err != nil {
				return err
			}
			if n := adaptertest.Count(t, s, `SELECT count(*) AS n FROM t WHERE id = 5`); n != 1 {
				t.Errorf("the transaction does not see its own write (%d)", n)
			}
			if n := adaptertest.Count(t, e, `SELECT count(*) AS n FROM t WHERE id = 5`); n != 0 {
				t.Errorf("the pool sees an uncommitted write (%d)", n)
			}
			tx, ok := cairnqpgx.PgxTx(s)
			if !ok || tx == nil || s.(*cairnqpgx.Session).Native() != tx {
				t.Errorf("PgxTx(session) = %v, %v; Native = %v", tx, ok, s.(*cairnqpgx.Session).Native())
			}
			// The application writes with its own pgx calls in the same
			// transaction.
			_, err := tx.Exec(ctx, `INSERT INTO t VALUES (6)`)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := adaptertest.Count(t, e, `SELECT count(*) AS n FROM t WHERE id IN (5, 6)`); n != 2 {
			t.Fatalf("committed %d of 2 rows", n)
		}
	})

	t.Run("concurrent use of a session", func(t *testing.T) {
		err := e.Tx(adaptertest.Ctx(t), func(ctx context.Context, s executor.Session) error {
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for range 8 {
				wg.Go(func() {
					if _, err := s.Query(ctx, `SELECT pg_sleep(0.001), $1::bigint AS n`, int64(7)); err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			return <-errs
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestAppHeldTransactionAndConnection(t *testing.T) {
	t.Parallel()
	e, pool := newExecutor(t, nil)
	mustExec(t, e, `CREATE TABLE t (id bigint PRIMARY KEY)`)
	ctx := adaptertest.Ctx(t)

	for _, commit := range []bool{false, true} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s := cairnqpgx.TxSession(tx, &cairnqpgx.Options{ExecMode: pgx.QueryExecModeExec})
		if got, ok := cairnqpgx.PgxTx(s); !ok || got != tx {
			t.Fatal("PgxTx(TxSession(tx)) is not tx")
		}
		if _, err := s.Query(ctx, `INSERT INTO t VALUES ($1)`, int64(10)); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		want := int64(0)
		if commit {
			want = 1
		}
		if n := adaptertest.Count(t, e, `SELECT count(*) AS n FROM t`); n != want {
			t.Fatalf("commit=%v: %d rows, want %d", commit, n, want)
		}
	}

	pc, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Release()
	s := cairnqpgx.ConnSession(pc.Conn(), nil)
	adaptertest.Query(t, s, `SELECT set_config('cairnq.test', 'here', false)`)
	rows := adaptertest.Query(t, s, `SELECT current_setting('cairnq.test') AS v`)
	if rows[0]["v"] != "here" {
		t.Fatalf("connection session lost its session state: %#v", rows)
	}
	if _, ok := cairnqpgx.PgxTx(s); ok {
		t.Fatal("a connection session claims a transaction")
	}
	if s.(*cairnqpgx.Session).Native() != pc.Conn() {
		t.Fatal("Native of a connection session is not the connection")
	}
}

func TestCloseLeavesAppPoolOpen(t *testing.T) {
	t.Parallel()
	pool := newPool(t, pgtest.DSN(t))
	e := cairnqpgx.New(pool, nil)
	if e.Native() != pool || e.Pool() != pool {
		t.Fatal("Native/Pool is not the app's pool")
	}
	stop, err := e.Listen(adaptertest.Ctx(t), []string{"c"}, func(string, string) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	stop() // after Close: a no-op
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pool.Ping(adaptertest.Ctx(t)); err != nil {
		t.Fatalf("the app's pool no longer works after Close: %v", err)
	}
	var n int
	if err := pool.QueryRow(adaptertest.Ctx(t), `SELECT 1`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("app pool query: %v", err)
	}
}

func TestOpenWithSchema(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	const schema = "Cairnq_Mixed1"
	e, err := cairnqpgx.Open(adaptertest.Ctx(t), dsn, &cairnqpgx.Options{Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	if n := adaptertest.Count(t, e, `SELECT count(*) AS n FROM pg_namespace WHERE nspname = $1`, schema); n != 1 {
		t.Fatalf("schema %s not created", schema)
	}

	// Hold every connection at once, so each is a distinct backend.
	pool := e.Pool()
	ctx := adaptertest.Ctx(t)
	conns := make([]*pgxpool.Conn, 4)
	var wg sync.WaitGroup
	errs := make([]error, len(conns))
	for i := range conns {
		wg.Go(func() { conns[i], errs[i] = pool.Acquire(ctx) })
	}
	wg.Wait()
	pids := map[uint32]bool{}
	for i, c := range conns {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		var got string
		if err := c.QueryRow(ctx, `SELECT current_schema()`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != schema {
			t.Errorf("connection %d: current_schema() = %q, want %q", i, got, schema)
		}
		pids[c.Conn().PgConn().PID()] = true
	}
	for _, c := range conns {
		c.Release()
	}
	if len(pids) != len(conns) {
		t.Fatalf("%d distinct backends, want %d", len(pids), len(conns))
	}

	// Unqualified DDL lands in the schema.
	mustExec(t, e, `CREATE TABLE placed (id int)`)
	if n := adaptertest.Count(t, e, `SELECT count(*) AS n FROM pg_tables WHERE schemaname = $1 AND tablename = 'placed'`, schema); n != 1 {
		t.Fatal("table not created in the schema")
	}

	// Opening again finds the schema.
	e2, err := cairnqpgx.Open(adaptertest.Ctx(t), dsn, &cairnqpgx.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if n := adaptertest.Count(t, e2, `SELECT count(*) AS n FROM placed`); n != 0 {
		t.Fatal("second executor does not resolve the schema")
	}
	owned := e2.Pool()
	if err := e2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := owned.Ping(adaptertest.Ctx(t)); err == nil {
		t.Fatal("Close of an Open executor left its pool open")
	}
}

func TestOpenRejectsBadOptionsBeforeConnecting(t *testing.T) {
	t.Parallel()
	// Nothing listens on port 1: reaching the network would fail
	// differently (and more slowly).
	const dsn = "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=5"
	for _, schema := range []string{
		"1abc", "a-b", `a"b`, "a;DROP SCHEMA public", "ü", "a b", strings.Repeat("s", 64),
	} {
		_, err := cairnqpgx.Open(context.Background(), dsn, &cairnqpgx.Options{Schema: schema})
		var arg *cairnq.ArgumentError
		if !errors.As(err, &arg) || arg.Arg != "schema" {
			t.Errorf("schema %q: err = %v (%T), want a *cairnq.ArgumentError for the schema", schema, err, err)
		}
	}
	if _, err := cairnqpgx.Open(context.Background(), dsn, &cairnqpgx.Options{ExecMode: 99}); err == nil || !strings.Contains(err.Error(), "ExecMode") {
		t.Errorf("bad ExecMode: %v", err)
	}
	if _, err := cairnqpgx.Open(context.Background(), dsn, &cairnqpgx.Options{MaxConns: -1}); err == nil || !strings.Contains(err.Error(), "MaxConns") {
		t.Errorf("negative MaxConns: %v", err)
	}
	if _, err := cairnqpgx.Open(context.Background(), dsn, nil); err == nil {
		t.Error("Open against nothing succeeded")
	}
}

func TestListen(t *testing.T) { adapter.Parallel(t, adaptertest.Adapter.Listen) }

func TestListenReconnects(t *testing.T) { adapter.Parallel(t, adaptertest.Adapter.ListenReconnects) }

func TestListenLeavesNoGoroutine(t *testing.T) {
	t.Parallel()
	e, pool := newExecutor(t, nil)
	app := appDB(t, pool)
	admin := newPool(t, pgtest.AdminDSN(t))
	const channel = "cairnq_leak_check"
	if n := adaptertest.ListenerGoroutines(t, channel); n != 0 {
		t.Fatalf("%d labeled goroutines before Listen", n)
	}
	got := make(chan adaptertest.Note, 4)
	stop, err := e.Listen(adaptertest.Ctx(t), []string{channel}, func(c, p string) { got <- adaptertest.Note{Channel: c, Payload: p} })
	if err != nil {
		t.Fatal(err)
	}
	adaptertest.Poll(t, "the listener goroutine, by its label", func() bool { return adaptertest.ListenerGoroutines(t, channel) >= 1 })
	// Go through a reconnect too, so the goroutines it starts are covered.
	pid := adaptertest.OneListener(t, app, 0)
	if _, err := admin.Exec(adaptertest.Ctx(t), `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	adaptertest.OneListener(t, app, pid)
	adaptertest.Notify(t, app, channel, "x")
	adaptertest.Recv(t, got)

	stop()
	if n := adaptertest.ListenerGoroutines(t, channel); n != 0 {
		var buf bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
		t.Fatalf("%d listener goroutines outlive stop:\n%s", n, buf.String())
	}
}

func TestListenArguments(t *testing.T) { adapter.Parallel(t, adaptertest.Adapter.ListenArguments) }

// TestListenIdleChecksKeepTheConnection: an idle listener pings its
// connection (pgx's "-- ping"), and a healthy one is kept, not replaced.
func TestListenIdleChecksKeepTheConnection(t *testing.T) {
	adapter.Parallel(t, adaptertest.Adapter.ListenIdleCheckKeepsTheConnection)
}

// TestListenWithAppNotificationHandler: a pool whose ConnConfig routes
// notifications to the application's own handler would starve a hijacked
// connection, so the listener dials from a copy of the pool's config
// without it, still running the pool's connect hooks.
func TestListenWithAppNotificationHandler(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	var appHandler, beforeConnect, afterConnect atomic.Int32
	cfg.ConnConfig.OnNotification = func(*pgconn.PgConn, *pgconn.Notification) { appHandler.Add(1) }
	cfg.BeforeConnect = func(context.Context, *pgx.ConnConfig) error { beforeConnect.Add(1); return nil }
	cfg.AfterConnect = func(context.Context, *pgx.Conn) error { afterConnect.Add(1); return nil }
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e := cairnqpgx.New(pool, &cairnqpgx.Options{Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	t.Cleanup(func() { _ = e.Close() })

	got := make(chan adaptertest.Note, 4)
	stop, err := e.Listen(adaptertest.Ctx(t), []string{"own"}, func(c, p string) { got <- adaptertest.Note{Channel: c, Payload: p} })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if beforeConnect.Load() != 1 || afterConnect.Load() != 1 {
		t.Fatalf("pool hooks ran %d/%d times for the listener, want 1/1", beforeConnect.Load(), afterConnect.Load())
	}
	// From the pool itself, whose one connection the test counts below.
	if _, err := pool.Exec(adaptertest.Ctx(t), `SELECT pg_notify($1, $2)`, "own", "mine"); err != nil {
		t.Fatal(err)
	}
	if n := adaptertest.Recv(t, got); n != (adaptertest.Note{Channel: "own", Payload: "mine"}) {
		t.Fatalf("got %+v", n)
	}
	if appHandler.Load() != 0 {
		t.Fatal("the application's handler saw the listener's notification")
	}
	if pool.Stat().TotalConns() != 1 {
		t.Fatalf("pool has %d connections; the listener's should not be one of them", pool.Stat().TotalConns())
	}
}

// Rows that repeat a column's value share its decoded form (the claim's
// rows repeat their queue, name, status and lease): every row must still
// read what it holds, a change between rows included, and a mutable value
// (JSON text, bytea) must stay each row's own.
func TestRepeatedValuesReadAsTheirRows(t *testing.T) {
	t.Parallel()
	e, _ := newExecutor(t, nil)
	const sql = `SELECT * FROM (VALUES
		(1::bigint, 'a'::text, 2::int, 1.5::float8, true, '{"k":1}'::jsonb, '\x01'::bytea, NULL::text),
		(1::bigint, 'a'::text, 2::int, 1.5::float8, true, '{"k":1}'::jsonb, '\x01'::bytea, 'x'::text),
		(7::bigint, 'b'::text, 3::int, 2.5::float8, false, '{"k":2}'::jsonb, '\x02'::bytea, 'x'::text),
		(1::bigint, 'b'::text, 3::int, 2.5::float8, false, '{"k":2}'::jsonb, '\x02'::bytea, NULL::text)
	) AS v(i8, t, i4, f8, b, j, by, n) ORDER BY 1 = 7, 2, 8 NULLS FIRST`
	want := [][]any{
		{int64(1), "a", int32(2), 1.5, true, json.RawMessage(`{"k": 1}`), []byte{1}, nil},
		{int64(1), "a", int32(2), 1.5, true, json.RawMessage(`{"k": 1}`), []byte{1}, "x"},
		{int64(1), "b", int32(3), 2.5, false, json.RawMessage(`{"k": 2}`), []byte{2}, nil},
		{int64(7), "b", int32(3), 2.5, false, json.RawMessage(`{"k": 2}`), []byte{2}, "x"},
	}
	cols := []string{"i8", "t", "i4", "f8", "b", "j", "by", "n"}
	ctx := adaptertest.Ctx(t)
	maps := adaptertest.Query(t, e, sql)
	rows, err := e.QueryPositional(ctx, sql)
	if err != nil {
		t.Fatal(err)
	}
	if len(maps) != len(want) || len(rows.Values) != len(want) {
		t.Fatalf("Query gave %d rows, QueryPositional %d, want %d", len(maps), len(rows.Values), len(want))
	}
	for i, w := range want {
		for j, col := range cols {
			if got := maps[i][col]; !reflect.DeepEqual(got, w[j]) {
				t.Errorf("Query row %d %s = %#v, want %#v", i, col, got, w[j])
			}
			if got := rows.Values[i][j]; !reflect.DeepEqual(got, w[j]) {
				t.Errorf("QueryPositional row %d %s = %#v, want %#v", i, col, got, w[j])
			}
		}
	}
	// Writing into the first row's JSON and bytes leaves the second row's.
	maps[0]["j"].(json.RawMessage)[0] = 'X'
	maps[0]["by"].([]byte)[0] = 9
	rows.Values[0][5].(json.RawMessage)[0] = 'X'
	rows.Values[0][6].([]byte)[0] = 9
	if !reflect.DeepEqual(maps[1]["j"], want[1][5]) || !reflect.DeepEqual(maps[1]["by"], want[1][6]) ||
		!reflect.DeepEqual(rows.Values[1][5], want[1][5]) || !reflect.DeepEqual(rows.Values[1][6], want[1][6]) {
		t.Errorf("rows share a mutable value: %#v %#v / %#v %#v", maps[1]["j"], maps[1]["by"], rows.Values[1][5], rows.Values[1][6])
	}
}
