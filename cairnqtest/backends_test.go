package cairnqtest_test

import (
	"context"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/cairnqtest"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// pgExecutor returns a pgx executor on a fresh database of the test
// server, closed when t ends (the database is dropped after).
func pgExecutor(t *testing.T) *cairnqpgx.Executor {
	t.Helper()
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ex, err := cairnqpgx.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return ex
}

// forEachBackend runs fn as a parallel subtest on each backend, on a
// client of its own: a SQLite file, and a schema of its own on one
// Postgres executor shared by the subtests of t.
func forEachBackend(t *testing.T, fn func(t *testing.T, c *cairnq.Client)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, cairnqtest.NewClient(t, nil))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, cairnqtest.NewPostgresClient(t, pgExecutor(t), nil))
	})
}
