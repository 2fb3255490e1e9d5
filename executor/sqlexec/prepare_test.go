package sqlexec_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cairnq/cairnq-go/executor/sqlexec"
	"github.com/cairnq/cairnq-go/internal/pgtest"
)

// preparedOnConn counts the named prepared statements of the one
// connection db holds (MaxOpenConns 1), read without arguments, so never
// prepared itself.
func preparedOnConn(t *testing.T, e env) int64 {
	t.Helper()
	var n int64
	if err := e.db.QueryRowContext(e.ctx, "SELECT count(*) FROM pg_prepared_statements").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// With Prepare, a statement with arguments is prepared once on a
// connection and reused there; without, nothing is; Close closes what was
// prepared. On lib/pq, which prepares nothing itself (pgx's stdlib keeps
// a statement cache of its own on every connection).
func TestPrepareOncePerConnection(t *testing.T) {
	eachSetupOf(t, []string{"libpq", "libpq-prepared"}, func(t *testing.T, s setup, e env) {
		e.db.SetMaxOpenConns(1)
		var want int64
		if s.prepare {
			want = 1
		}
		for i := range 3 {
			row := queryOne(t, e.ctx, e.exec, "SELECT $1::int8 AS x", int64(i))
			if row["x"] != int64(i) {
				t.Fatalf("run %d: x = %#v", i, row["x"])
			}
			if _, err := e.exec.QueryPositional(e.ctx, "SELECT $1::int8 AS x", int64(i)); err != nil {
				t.Fatal(err)
			}
		}
		if got := preparedOnConn(t, e); got != want {
			t.Errorf("after 6 runs of one statement: %d statements prepared on the connection, want %d", got, want)
		}
		if err := e.exec.Close(); err != nil {
			t.Fatal(err)
		}
		if got := preparedOnConn(t, e); got != 0 {
			t.Errorf("after Close: %d statements prepared on the connection, want 0", got)
		}
		// A closed executor's pool is the application's: it still runs, unprepared.
		if row := queryOne(t, e.ctx, e.exec, "SELECT $1::int8 AS x", int64(7)); row["x"] != int64(7) {
			t.Errorf("after Close: x = %#v", row["x"])
		}
		if got := preparedOnConn(t, e); got != 0 {
			t.Errorf("a run after Close prepared %d statements, want 0", got)
		}
	})
}

// A prepared statement reading a table with * is refused by the server
// once a column is added (cached plan must not change result type): the
// run falls back to an unprepared one, which sees the new column, and the
// statement is prepared afresh after.
func TestPreparedStatementSurvivesANewColumn(t *testing.T) {
	eachSetupOf(t, []string{"libpq-prepared", "pgxstdlib-prepared"}, func(t *testing.T, _ setup, e env) {
		mustExec(t, e.ctx, e.exec, "CREATE TABLE t (id int8, a text); INSERT INTO t VALUES (1, 'a')")
		const q = "SELECT * FROM t WHERE id = $1"
		if row := queryOne(t, e.ctx, e.exec, q, int64(1)); len(row) != 2 {
			t.Fatalf("before: %v, want 2 columns", row)
		}
		mustExec(t, e.ctx, e.exec, "ALTER TABLE t ADD COLUMN b text DEFAULT 'b'")
		for i := range 3 {
			row := queryOne(t, e.ctx, e.exec, q, int64(1))
			if len(row) != 3 || row["b"] != "b" {
				t.Fatalf("run %d after the new column: %v, want 3 columns, b = b", i, row)
			}
		}
	})
}

// The cache keeps at most MaxPrepared statements; the rest run unprepared.
func TestPreparedStatementsAreBounded(t *testing.T) {
	s := setupNamed("libpq-prepared")
	handle, db := s.open(t, pgtest.DSN(t))
	e := sqlexec.New(handle, s.options())
	defer e.Close()
	db.SetMaxOpenConns(2)
	ctx := t.Context()
	for i := range sqlexec.MaxPrepared + 10 {
		row := queryOne(t, ctx, e, fmt.Sprintf("SELECT $1::int8 + %d AS x", i), int64(1))
		if row["x"] != int64(1+i) {
			t.Fatalf("statement %d: x = %#v", i, row["x"])
		}
	}
	if got := sqlexec.Prepared(e); got != sqlexec.MaxPrepared {
		t.Errorf("%d statements prepared, want the bound, %d", got, sqlexec.MaxPrepared)
	}
}

// A statement that cannot be prepared reports the server's error, and
// nothing of it is kept.
func TestStatementThatFailsToPrepare(t *testing.T) {
	eachSetup(t, func(t *testing.T, e env) {
		_, err := e.exec.Query(e.ctx, "SELECT * FROM no_such_table WHERE id = $1", int64(1))
		var s interface{ SQLState() string }
		if !errors.As(err, &s) || s.SQLState() != "42P01" {
			t.Fatalf("err = %v, want the driver's undefined_table (42P01)", err)
		}
		if got := sqlexec.Prepared(e.exec); got != 0 {
			t.Errorf("%d statements kept after a failed prepare, want 0", got)
		}
	})
}
