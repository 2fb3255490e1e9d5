package main

import (
	"context"
	"database/sql"
	"testing"

	"github.com/cairnq/cairnq-go/conformance/pgserver"

	"github.com/cairnq/cairnq-go/conformance"
	"github.com/cairnq/cairnq-go/executor"
)

// The suite provisions Postgres (CAIRNQ_TEST_PG_DSN or the local
// binaries) and stops a server it started.
func TestMain(m *testing.M) { pgserver.Main(m) }

// TestCertify runs cairnq's executor certification on the adapter of
// executor.go: value forms, parameters, scripts, errors, transactions,
// closing, a worker run and every conformance scenario. The listen checks
// are skipped, since this executor does not implement executor.Listener.
func TestCertify(t *testing.T) {
	conformance.CertifyExecutor(t, conformance.Factory{
		Name: "the custom-adapter example (database/sql over pgx stdlib)",
		Open: func(t testing.TB, dsn string) executor.Executor {
			db, err := sql.Open("pgx", dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return New(db)
		},
		AppPoolAlive: func(ctx context.Context, ex executor.Executor) error {
			return ex.(*Executor).DB().PingContext(ctx)
		},
	})
}
