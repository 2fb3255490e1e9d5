package sqlexec_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/executor/sqlexec"
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/lib/pq"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A driver setup the tests run against: how to open the application's pool,
// and the value forms its driver produces (asserted, so that a driver
// release changing them is noticed here before the store's normalizer
// meets it).
type setup struct {
	name string
	// open returns what is passed to sqlexec.New, and the *sql.DB behind it.
	open  func(t *testing.T, dsn string) (sqlexec.DB, *sql.DB)
	forms map[string]any
	// prepare is the executor's Options.Prepare.
	prepare bool
}

// options is what the setup's executor is made with.
func (s setup) options() *sqlexec.Options { return &sqlexec.Options{Prepare: s.prepare} }

// Forms shared by both drivers.
var (
	formInt8  = int64(42)
	formText  = "txt"
	formBool  = true
	formFloat = 1.5
	formJSONB = []byte(`{"a": 1}`) // jsonb's own text form: a space after the colon
)

// lib/pq decodes what it has no Go type for (void, numeric, arrays, and name,
// the type of catalog columns and current_schema()) as the text's bytes;
// pgx's stdlib as a string.
var pqForms = map[string]any{
	"i8": formInt8, "jb": formJSONB, "t": formText, "b": formBool, "f": formFloat,
	"v": []byte{}, "n": nil, "i4": int64(7), "num": []byte("12.5"), "arr": []byte("{a,b}"),
	"nm": []byte("nm"),
}

var pgxForms = map[string]any{
	"i8": formInt8, "jb": formJSONB, "t": formText, "b": formBool, "f": formFloat,
	"v": "", "n": nil, "i4": int64(7), "num": "12.5", "arr": "{a,b}",
	"nm": "nm",
}

func openSQL(driver string) func(t *testing.T, dsn string) (sqlexec.DB, *sql.DB) {
	return func(t *testing.T, dsn string) (sqlexec.DB, *sql.DB) {
		t.Helper()
		db, err := sql.Open(driver, dsn)
		if err != nil {
			t.Fatalf("sql.Open(%q): %v", driver, err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db, db
	}
}

// wrappedDB has the shape of *sqlx.DB, a struct embedding *sql.DB with
// methods of its own beside, so the pool an sqlx application holds works as
// it is. (A real *sqlx.DB is certified in the examples module, which keeps
// jmoiron/sqlx out of this module's graph.)
type wrappedDB struct {
	*sql.DB
	driverName string
}

func (w *wrappedDB) DriverName() string { return w.driverName }

func openWrapped(t *testing.T, dsn string) (sqlexec.DB, *sql.DB) {
	t.Helper()
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return &wrappedDB{DB: db, driverName: "postgres"}, db // the wrapper itself goes to sqlexec.New
}

var setups = []setup{
	{name: "libpq", open: openSQL("postgres"), forms: pqForms},
	{name: "pgxstdlib", open: openSQL("pgx"), forms: pgxForms},
	{name: "wrapped-libpq", open: openWrapped, forms: pqForms},
	{name: "libpq-prepared", open: openSQL("postgres"), forms: pqForms, prepare: true},
	{name: "pgxstdlib-prepared", open: openSQL("pgx"), forms: pgxForms, prepare: true},
}

// env is one subtest's executor on a fresh database.
type env struct {
	ctx  context.Context
	exec *sqlexec.Executor
	db   *sql.DB
}

// eachSetup runs fn once per driver setup, in parallel, each on a database of
// its own.
func eachSetup(t *testing.T, fn func(t *testing.T, e env)) {
	t.Helper()
	for _, s := range setups {
		runSetup(t, s, func(t *testing.T, _ setup, e env) { fn(t, e) })
	}
}

// eachSetupOf is eachSetup for the setups named.
func eachSetupOf(t *testing.T, names []string, fn func(t *testing.T, s setup, e env)) {
	t.Helper()
	for _, name := range names {
		runSetup(t, setupNamed(name), fn)
	}
}

// runSetup runs fn as a parallel subtest on s's executor over a fresh
// database.
func runSetup(t *testing.T, s setup, fn func(t *testing.T, s setup, e env)) {
	t.Run(s.name, func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		handle, db := s.open(t, pgtest.DSN(t))
		fn(t, s, env{ctx: ctx, exec: sqlexec.New(handle, s.options()), db: db})
	})
}

func setupNamed(name string) setup {
	for _, s := range setups {
		if s.name == name {
			return s
		}
	}
	panic("no setup " + name)
}

func mustExec(t *testing.T, ctx context.Context, s executor.Session, script string) {
	t.Helper()
	if err := s.Exec(ctx, script); err != nil {
		t.Fatalf("Exec(%q): %v", script, err)
	}
}

func count(t *testing.T, ctx context.Context, s executor.Session, table string) int64 {
	t.Helper()
	row := adaptertest.QueryOne(t, ctx, s, "SELECT count(*)::int8 AS n FROM "+table)
	n, ok := row["n"].(int64)
	if !ok {
		t.Fatalf("count(*) arrived as %T", row["n"])
	}
	return n
}

func TestValueForms(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			handle, _ := s.open(t, pgtest.DSN(t))
			e := sqlexec.New(handle, s.options())
			// An argument, so that a prepared setup runs it prepared.
			row := adaptertest.QueryOne(t, ctx, e, `SELECT $1::int8 AS i8, '{"a":1}'::jsonb AS jb, 'txt'::text AS t,
				true AS b, 1.5::float8 AS f, pg_sleep(0) AS v, NULL::int8 AS n, 7::int4 AS i4,
				12.5::numeric AS num, '{a,b}'::text[] AS arr, 'nm'::name AS nm`, int64(42))
			if len(row) != len(s.forms) {
				t.Errorf("row has %d columns, want %d: %v", len(row), len(s.forms), row)
			}
			for col, want := range s.forms {
				got, ok := row[col]
				if !ok {
					t.Errorf("column %s missing", col)
					continue
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("column %s = %T %#v, want %T %#v (did the driver change its value forms?)",
						col, got, got, want, want)
				}
			}
		})
	}
}

func TestQueryNoRowsIsEmptySlice(t *testing.T) {
	eachSetup(t, func(t *testing.T, e env) {
		rows, err := e.exec.Query(e.ctx, "SELECT 1 AS x WHERE false")
		if err != nil {
			t.Fatal(err)
		}
		if rows == nil || len(rows) != 0 {
			t.Fatalf("rows = %#v, want a non-nil empty slice", rows)
		}
		// A statement that produces no rows at all.
		mustExec(t, e.ctx, e.exec, "CREATE TABLE t (id int8)")
		rows, err = e.exec.Query(e.ctx, "INSERT INTO t VALUES ($1)", int64(1))
		if err != nil {
			t.Fatal(err)
		}
		if rows == nil || len(rows) != 0 {
			t.Fatalf("INSERT rows = %#v, want a non-nil empty slice", rows)
		}
	})
}

func TestQueryManyRowsOwnTheirBytes(t *testing.T) {
	eachSetup(t, func(t *testing.T, e env) {
		rows, err := e.exec.Query(e.ctx, `SELECT decode(repeat(to_hex(g), 64), 'hex') AS b, g::int8 AS g
			FROM generate_series(10, 15) g ORDER BY g`)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 6 {
			t.Fatalf("%d rows, want 6", len(rows))
		}
		// Every row keeps its own value after later rows were read.
		for i, r := range rows {
			b, ok := r["b"].([]byte)
			if !ok {
				t.Fatalf("bytea arrived as %T", r["b"])
			}
			want := bytes.Repeat([]byte{byte(0xaa + 0x11*i)}, 32)
			if !bytes.Equal(b, want) {
				t.Errorf("row %d: b = %x, want %x", i, b, want)
			}
			if r["g"] != int64(10+i) {
				t.Errorf("row %d: g = %#v", i, r["g"])
			}
		}
	})
}

func TestParams(t *testing.T) {
	eachSetup(t, func(t *testing.T, e env) {
		t.Run("scalars", func(t *testing.T) {
			row := adaptertest.QueryOne(t, e.ctx, e.exec,
				"SELECT $1::text AS s, $2::int8 AS i, $3::float8 AS f, $4::bool AS b, $5::int8 + 1 AS big",
				"héllo", int64(-7), 2.25, false, int64(1)<<62)
			want := executor.Row{"s": "héllo", "i": int64(-7), "f": 2.25, "b": false, "big": int64(1)<<62 + 1}
			if !reflect.DeepEqual(row, want) {
				t.Fatalf("row = %#v, want %#v", row, want)
			}
		})
		t.Run("nulls", func(t *testing.T) {
			row := adaptertest.QueryOne(t, e.ctx, e.exec,
				`SELECT $1::text IS NULL AS a, $2::int8 IS NULL AS b, $3::jsonb IS NULL AS c,
					$4::text[] IS NULL AS d, coalesce($5::int8, -1) AS e`,
				nil, nil, nil, nil, nil)
			want := executor.Row{"a": true, "b": true, "c": true, "d": true, "e": int64(-1)}
			if !reflect.DeepEqual(row, want) {
				t.Fatalf("row = %#v, want %#v", row, want)
			}
		})
		t.Run("text array literal", func(t *testing.T) {
			lit := `{"a","b,c","d\"e","",NULL,"NULL"}`
			rows, err := e.exec.Query(e.ctx,
				"SELECT x, x IS NULL AS isnull FROM unnest($1::text[]) WITH ORDINALITY AS u(x, n) ORDER BY n", lit)
			if err != nil {
				t.Fatal(err)
			}
			var got []any
			for _, r := range rows {
				got = append(got, r["x"])
			}
			want := []any{"a", "b,c", `d"e`, "", nil, "NULL"}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("unnest = %#v, want %#v", got, want)
			}
			row := adaptertest.QueryOne(t, e.ctx, e.exec,
				"SELECT cardinality($1::text[])::int8 AS n, 'b' = ANY($2::text[]) AS hit", "{}", `{"a","b"}`)
			if row["n"] != int64(0) || row["hit"] != true {
				t.Fatalf("row = %#v", row)
			}
		})
		t.Run("jsonb", func(t *testing.T) {
			row := adaptertest.QueryOne(t, e.ctx, e.exec,
				"SELECT ($1::jsonb)->>'k' AS k, jsonb_typeof($1::jsonb) AS ty, jsonb_array_length($2::jsonb)::int8 AS n",
				`{"k":"v ü","n":[1,2]}`, `[1,"x",null]`)
			want := executor.Row{"k": "v ü", "ty": "object", "n": int64(3)}
			if !reflect.DeepEqual(row, want) {
				t.Fatalf("row = %#v, want %#v", row, want)
			}
		})
	})
}

func TestExecMultiStatement(t *testing.T) {
	eachSetup(t, func(t *testing.T, e env) {
		mustExec(t, e.ctx, e.exec, `
			CREATE TABLE jobs (id int8 PRIMARY KEY, doc jsonb NOT NULL);
			INSERT INTO jobs VALUES (1, '{"x": 1}');
			INSERT INTO jobs VALUES (2, '[]');
			CREATE INDEX jobs_doc ON jobs USING gin (doc);`)
		if n := count(t, e.ctx, e.exec, "jobs"); n != 2 {
			t.Fatalf("count = %d, want 2", n)
		}
		// A failing statement fails the script, and the driver's error is
		// reachable with errors.As.
		err := e.exec.Exec(e.ctx, "INSERT INTO jobs VALUES (3, '{}'); INSERT INTO missing VALUES (1);")
		if err == nil {
			t.Fatal("Exec of a failing script: no error")
		}
		if got := sqlState(err); got != "42P01" {
			t.Fatalf("SQLSTATE = %q (err %v), want 42P01", got, err)
		}
		// A script outside a transaction block runs as one implicit
		// transaction: its first statement is gone too.
		if n := count(t, e.ctx, e.exec, "jobs"); n != 2 {
			t.Fatalf("count = %d after the failed script, want 2", n)
		}
	})
}

func TestQueryErrorKeepsDriverError(t *testing.T) {
	eachSetup(t, func(t *testing.T, e env) {
		_, err := e.exec.Query(e.ctx, "SELECT * FROM missing WHERE id = $1", int64(1))
		if got := sqlState(err); got != "42P01" {
			t.Fatalf("SQLSTATE = %q (err %v), want 42P01", got, err)
		}
	})
}

func sqlState(err error) string {
	var s interface{ SQLState() string }
	if errors.As(err, &s) {
		return s.SQLState()
	}
	return ""
}

var errBoom = errors.New("boom")

func TestTx(t *testing.T) {
	eachSetup(t, func(t *testing.T, e env) {
		mustExec(t, e.ctx, e.exec, "CREATE TABLE t (id int8 PRIMARY KEY)")

		t.Run("commit", func(t *testing.T) {
			err := e.exec.Tx(e.ctx, func(ctx context.Context, s executor.Session) error {
				_, err := s.Query(ctx, "INSERT INTO t VALUES ($1)", int64(1))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if n := count(t, e.ctx, e.exec, "t WHERE id = 1"); n != 1 {
				t.Fatalf("committed row count = %d", n)
			}
		})

		t.Run("rollback on error", func(t *testing.T) {
			err := e.exec.Tx(e.ctx, func(ctx context.Context, s executor.Session) error {
				if _, err := s.Query(ctx, "INSERT INTO t VALUES ($1)", int64(2)); err != nil {
					return err
				}
				return errBoom
			})
			if err != errBoom {
				t.Fatalf("Tx = %v, want fn's error unchanged", err)
			}
			if n := count(t, e.ctx, e.exec, "t WHERE id = 2"); n != 0 {
				t.Fatalf("rolled back row is visible")
			}
		})

		t.Run("rollback on panic", func(t *testing.T) {
			var recovered any
			func() {
				defer func() { recovered = recover() }()
				_ = e.exec.Tx(e.ctx, func(ctx context.Context, s executor.Session) error {
					if _, err := s.Query(ctx, "INSERT INTO t VALUES ($1)", int64(3)); err != nil {
						return err
					}
					panic(errBoom)
				})
			}()
			if recovered != errBoom {
				t.Fatalf("recovered %v, want the panic to continue", recovered)
			}
			if n := count(t, e.ctx, e.exec, "t WHERE id = 3"); n != 0 {
				t.Fatalf("row of a panicked transaction is visible")
			}
			if inUse := e.db.Stats().InUse; inUse != 0 {
				t.Fatalf("%d connections still in use after the panic", inUse)
			}
		})

		t.Run("statement error fails and rolls back", func(t *testing.T) {
			err := e.exec.Tx(e.ctx, func(ctx context.Context, s executor.Session) error {
				if _, err := s.Query(ctx, "INSERT INTO t VALUES ($1)", int64(4)); err != nil {
					return err
				}
				_, err := s.Query(ctx, "INSERT INTO t VALUES ($1)", int64(4))
				return err
			})
			if got := sqlState(err); got != "23505" {
				t.Fatalf("SQLSTATE = %q (err %v), want 23505", got, err)
			}
			if n := count(t, e.ctx, e.exec, "t WHERE id = 4"); n != 0 {
				t.Fatalf("row of a failed transaction is visible")
			}
		})

		t.Run("session sees its uncommitted write, the pool does not", func(t *testing.T) {
			err := e.exec.Tx(e.ctx, func(ctx context.Context, s executor.Session) error {
				mustExec(t, ctx, s, "INSERT INTO t VALUES (5); INSERT INTO t VALUES (6)")
				if n := count(t, ctx, s, "t WHERE id IN (5, 6)"); n != 2 {
					t.Errorf("inside the transaction: %d rows, want 2", n)
				}
				if n := count(t, ctx, e.exec, "t WHERE id IN (5, 6)"); n != 0 {
					t.Errorf("the pool sees %d uncommitted rows", n)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if n := count(t, e.ctx, e.exec, "t WHERE id IN (5, 6)"); n != 2 {
				t.Fatalf("after commit the pool sees %d rows, want 2", n)
			}
		})

		t.Run("native transaction", func(t *testing.T) {
			err := e.exec.Tx(e.ctx, func(ctx context.Context, s executor.Session) error {
				tx, ok := sqlexec.TxOf(s)
				if !ok || tx == nil {
					t.Fatal("TxOf: no *sql.Tx behind the session")
				}
				if n, ok := s.(interface{ Native() any }); !ok || n.Native() != any(tx) {
					t.Error("Native() is not the *sql.Tx")
				}
				// The application writes through its own handle, cairnq reads
				// through the session: one transaction.
				if _, err := tx.ExecContext(ctx, "INSERT INTO t VALUES (7)"); err != nil {
					return err
				}
				if n := count(t, ctx, s, "t WHERE id = 7"); n != 1 {
					t.Errorf("session does not see the app's write in the same tx")
				}
				return errBoom
			})
			if !errors.Is(err, errBoom) {
				t.Fatal(err)
			}
			if n := count(t, e.ctx, e.exec, "t WHERE id = 7"); n != 0 {
				t.Fatalf("rolled back row is visible")
			}
		})

		t.Run("begin error", func(t *testing.T) {
			ctx, cancel := context.WithCancel(e.ctx)
			cancel()
			called := false
			err := e.exec.Tx(ctx, func(context.Context, executor.Session) error { called = true; return nil })
			if err == nil || called || !errors.Is(err, context.Canceled) {
				t.Fatalf("Tx on a canceled context = %v (fn called %v)", err, called)
			}
		})
	})
}

func TestTxSessionOnAppTransaction(t *testing.T) {
	eachSetup(t, func(t *testing.T, e env) {
		mustExec(t, e.ctx, e.exec, "CREATE TABLE t (id int8 PRIMARY KEY, note text)")
		for _, commit := range []bool{true, false} {
			t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
				id := int64(1)
				if !commit {
					id = 2
				}
				tx, err := e.db.BeginTx(e.ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback() }()
				if _, err := tx.ExecContext(e.ctx, "INSERT INTO t VALUES ($1, 'app')", id); err != nil {
					t.Fatal(err)
				}
				s := sqlexec.TxSession(tx)
				if got, ok := sqlexec.TxOf(s); !ok || got != tx {
					t.Fatal("TxOf(TxSession(tx)) is not tx")
				}
				row := adaptertest.QueryOne(t, e.ctx, s, "UPDATE t SET note = note || '+cairnq' WHERE id = $1 RETURNING note", id)
				if row["note"] != "app+cairnq" {
					t.Fatalf("note = %#v", row["note"])
				}
				if n := count(t, e.ctx, e.exec, "t WHERE id = "+fmt.Sprint(id)); n != 0 {
					t.Fatal("the pool sees the app's uncommitted row")
				}
				if commit {
					err = tx.Commit()
				} else {
					err = tx.Rollback()
				}
				if err != nil {
					t.Fatal(err)
				}
				want := int64(0)
				if commit {
					want = 1
				}
				if n := count(t, e.ctx, e.exec, "t WHERE id = "+fmt.Sprint(id)+" AND note = 'app+cairnq'"); n != want {
					t.Fatalf("after the app ended its tx: %d rows, want %d", n, want)
				}
			})
		}
	})
}

func TestConnSession(t *testing.T) {
	eachSetup(t, func(t *testing.T, e env) {
		conn, err := e.db.Conn(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		s := sqlexec.ConnSession(conn)
		if got, ok := sqlexec.ConnOf(s); !ok || got != conn {
			t.Fatal("ConnOf(ConnSession(conn)) is not conn")
		}
		if _, ok := sqlexec.TxOf(s); ok {
			t.Fatal("TxOf reports a transaction behind a conn session")
		}
		// Session state set by Exec is seen by a later Query: one connection.
		mustExec(t, e.ctx, s, "SET application_name = 'cairnq-conn'; CREATE TEMP TABLE scratch (x int8)")
		row := adaptertest.QueryOne(t, e.ctx, s, "SELECT current_setting('application_name') AS a, count(*)::int8 AS n FROM scratch")
		if row["a"] != "cairnq-conn" || row["n"] != int64(0) {
			t.Fatalf("row = %#v", row)
		}
	})
}

func TestExecutorNativeAndTxOf(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			handle, _ := s.open(t, pgtest.DSN(t))
			e := sqlexec.New(handle, nil)
			if e.DB() != handle || e.Native() != any(handle) {
				t.Fatal("DB/Native is not the handle passed to New")
			}
			if _, ok := sqlexec.TxOf(e); ok {
				t.Fatal("TxOf reports a transaction behind the pool")
			}
			if _, ok := sqlexec.ConnOf(e); ok {
				t.Fatal("ConnOf reports a connection behind the pool")
			}
		})
	}
}

func TestCloseLeavesAppDBOpen(t *testing.T) {
	eachSetup(t, func(t *testing.T, e env) {
		if _, err := e.exec.Query(e.ctx, "SELECT 1 AS x"); err != nil {
			t.Fatal(err)
		}
		if err := e.exec.Close(); err != nil {
			t.Fatal(err)
		}
		if err := e.db.PingContext(e.ctx); err != nil {
			t.Fatalf("the app's db after Close: %v", err)
		}
		var x int
		if err := e.db.QueryRowContext(e.ctx, "SELECT 1").Scan(&x); err != nil || x != 1 {
			t.Fatalf("the app's db after Close: %v", err)
		}
	})
}

func TestTxOptions(t *testing.T) {
	ctx := context.Background()
	handle, _ := setupNamed("pgxstdlib").open(t, pgtest.DSN(t))
	opts := &sqlexec.Options{TxOptions: &sql.TxOptions{Isolation: sql.LevelSerializable, ReadOnly: true}}
	e := sqlexec.New(handle, opts)
	opts.TxOptions.ReadOnly = false // New copied the options
	err := e.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		row := adaptertest.QueryOne(t, ctx, s, "SELECT current_setting('transaction_isolation') AS iso, current_setting('transaction_read_only') AS ro")
		if row["iso"] != "serializable" || row["ro"] != "on" {
			t.Errorf("row = %#v, want serializable read-only", row)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestNewRejectsNil(t *testing.T) {
	for name, f := range map[string]func(){
		"New":         func() { sqlexec.New(nil, nil) },
		"TxSession":   func() { sqlexec.TxSession(nil) },
		"ConnSession": func() { sqlexec.ConnSession(nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s(nil) did not panic", name)
				}
			}()
			f()
		}()
	}
}
