package sqlexec_test

import (
	"database/sql"
	"testing"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/executor/sqlexec"
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// database/sql over lib/pq on its defaults sends a statement with
// arguments as a parse in one round trip and a bind in the next, which a
// transaction-mode pooler may route to different server connections.
func TestLibpqBehindPoolers(t *testing.T) {
	t.Parallel()
	adaptertest.BehindPoolers(t, func(t *testing.T, dsn string) executor.Executor {
		db, err := sql.Open("postgres", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return sqlexec.New(db, nil)
	})
}

// database/sql over pgx's stdlib on its defaults prepares every statement
// under a name, which a transaction-mode pooler binds on server
// connections that never prepared it.
func TestPgxStdlibBehindPoolers(t *testing.T) {
	t.Parallel()
	adaptertest.BehindPoolers(t, func(t *testing.T, dsn string) executor.Executor {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return sqlexec.New(db, nil)
	})
}

// On pgx's stdlib the statements stay prepared where the pool's
// connections keep one server session each, and only there: directly, and
// not behind a pooler (in session mode pg_prepared_statements is the
// connection's own, so it shows what was left there).
func TestPgxStdlibPreparesOnlyWhereTheSessionIsKept(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	for _, c := range []struct {
		name  string
		dsn   string
		named bool
	}{
		{"direct", dsn, true},
		{"session pooler", pgtest.Pooler(t, dsn, pgtest.PoolSession), false},
	} {
		db, err := sql.Open("pgx", c.dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		db.SetMaxOpenConns(1)
		e := sqlexec.New(db, nil)
		for range 2 {
			adaptertest.Query(t, e, "SELECT $1::int8 AS n", int64(1))
		}
		rows := adaptertest.Query(t, e, "SELECT count(*) AS n FROM pg_prepared_statements WHERE name LIKE 'stmtcache_%'")
		if got := rows[0]["n"].(int64) > 0; got != c.named {
			t.Errorf("%s: statements prepared = %v, want %v", c.name, got, c.named)
		}
	}
}
