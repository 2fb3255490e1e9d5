package sqlexec_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/executor/sqlexec"
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
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
			row := adaptertest.QueryOne(t, e.ctx, e.exec, "SELECT $1::int8 AS x", int64(i))
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
		if row := adaptertest.QueryOne(t, e.ctx, e.exec, "SELECT $1::int8 AS x", int64(7)); row["x"] != int64(7) {
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
		if row := adaptertest.QueryOne(t, e.ctx, e.exec, q, int64(1)); len(row) != 2 {
			t.Fatalf("before: %v, want 2 columns", row)
		}
		mustExec(t, e.ctx, e.exec, "ALTER TABLE t ADD COLUMN b text DEFAULT 'b'")
		for i := range 3 {
			row := adaptertest.QueryOne(t, e.ctx, e.exec, q, int64(1))
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
		row := adaptertest.QueryOne(t, ctx, e, fmt.Sprintf("SELECT $1::int8 + %d AS x", i), int64(1))
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

// Many callers share the statements while columns are added under them
// and the executor closes mid-run: every query still succeeds and sees
// the table as it is (no closed statement, no refused bind reaches a
// caller). On lib/pq: pgx's stdlib keeps statements of its own besides,
// which it refuses once itself after such a change.
func TestPreparedStatementsUnderConcurrentChangesAndClose(t *testing.T) {
	s := setupNamed("libpq-prepared")
	handle, db := s.open(t, pgtest.DSN(t))
	db.SetMaxOpenConns(8)
	e := sqlexec.New(handle, s.options())
	ctx := t.Context()
	mustExec(t, ctx, e, "CREATE TABLE t (id int8); INSERT INTO t VALUES (1)")
	const q = "SELECT * FROM t WHERE id = $1"
	for round := range 6 {
		if round > 0 {
			mustExec(t, ctx, e, fmt.Sprintf("ALTER TABLE t ADD COLUMN c%d int8", round))
		}
		var wg sync.WaitGroup
		errs := make(chan error, 64*4)
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 4 {
					rows, err := e.Query(ctx, q, int64(1))
					switch {
					case err != nil:
						errs <- err
					case len(rows) != 1 || len(rows[0]) != round+1:
						errs <- fmt.Errorf("round %d: %v, want %d columns", round, rows, round+1)
					}
				}
			}()
		}
		if round == 5 {
			e.Close() // while the callers run
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: %v", round, err)
		}
	}
}

// A caller waiting for another's prepare, or preparing itself, gives up
// when its context ends: with the pool's one connection held, the query
// returns its context's error instead of waiting for the connection.
func TestPrepareHonoursTheCallersContext(t *testing.T) {
	s := setupNamed("libpq-prepared")
	handle, db := s.open(t, pgtest.DSN(t))
	db.SetMaxOpenConns(1)
	e := sqlexec.New(handle, s.options())
	defer e.Close()
	held, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close() // only after the query returned: before, it would wait forever
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := e.Query(ctx, "SELECT $1::int8 AS x", int64(1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
}
