// Package storetest opens the engine's stores for the tests of the
// runtime's packages, which run without a Worker: one on a fresh SQLite
// file and one on a fresh Postgres database (internal/testkit/pgtest).
package storetest

import (
	"database/sql"
	"path/filepath"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver the Postgres store runs on

	"github.com/cairnq/cairnq-go/executor/sqlexec"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// Both runs fn as subtests "sqlite" and "postgres", each on a fresh
// store closed when the subtest ends. The test binary's TestMain must
// call pgtest.Main.
func Both(t *testing.T, fn func(t *testing.T, s *engine.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		s, err := engine.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "tasks.db"), engine.SQLiteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		fn(t, s)
	})
	t.Run("postgres", func(t *testing.T) {
		db, err := sql.Open("pgx", pgtest.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		s, err := engine.OpenPostgres(t.Context(), sqlexec.New(db, nil), engine.PostgresOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		fn(t, s)
	})
}
