package cairnq_test

import (
	"context"
	"testing"

	"github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// TestMain stops the Postgres server pgtest started, if a test asked for one.
func TestMain(m *testing.M) { pgtest.Main(m) }

// openPostgres opens a client through the pgx adapter on a fresh database
// of the test server, with opts (nil for the defaults), closed when the
// test ends. Without a server the test is skipped (failed under
// CAIRNQ_REQUIRE_PG).
func openPostgres(t testing.TB, opts *cairnq.Options) *cairnq.Client {
	t.Helper()
	c, _ := openPostgresDSN(t, opts)
	return c
}

// openPostgresDSN is openPostgres, also returning the database's DSN.
func openPostgresDSN(t testing.TB, opts *cairnq.Options) (*cairnq.Client, string) {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	ex, err := cairnqpgx.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := &cairnq.PostgresOptions{CloseExecutor: true}
	if opts != nil {
		o.Options = *opts
	}
	c, err := cairnq.OpenPostgres(ctx, ex, o)
	if err != nil {
		ex.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, dsn
}

// openPostgresApp is openPostgres with a pool of the application's own on
// the same database, as the transaction-sharing tests need (closed when
// the test ends).
func openPostgresApp(t testing.TB, opts *cairnq.Options) (*cairnq.Client, *cairnqpgx.Executor) {
	t.Helper()
	c, dsn := openPostgresDSN(t, opts)
	app, err := cairnqpgx.Open(context.Background(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	return c, app
}

// onBothBackends runs test once on a fresh SQLite file and once on a fresh
// Postgres database, open with opts.
func onBothBackends(t *testing.T, opts *cairnq.Options, test func(t *testing.T, c *cairnq.Client)) {
	t.Run("sqlite", func(t *testing.T) { test(t, openTemp(t, opts)) })
	t.Run("postgres", func(t *testing.T) { test(t, openPostgres(t, opts)) })
}
