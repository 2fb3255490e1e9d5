package conformance_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "github.com/lib/pq"              // database/sql driver "postgres"

	cairnqlibpq "github.com/cairnq/cairnq-go/adapters/libpq"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/conformance"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/executor/sqlexec"
)

// Every executor of this module certifies itself through the same public
// call a third party makes, each over a pool opened the way an application
// opens its own. The package's TestMain (postgres_test.go) stops the server.

func TestCertifyPgx(t *testing.T) {
	conformance.CertifyExecutor(t, pgxFactory("pgx", nil))
}

// The simple protocol is what a transaction-mode pooler needs.
func TestCertifyPgxSimpleProtocol(t *testing.T) {
	conformance.CertifyExecutor(t, pgxFactory("pgx, simple protocol", &cairnqpgx.Options{ExecMode: pgx.QueryExecModeSimpleProtocol}))
}

func TestCertifyLibpq(t *testing.T) {
	conformance.CertifyExecutor(t, conformance.Factory{
		Name: "cairnqlibpq over *sql.DB",
		Open: func(t testing.TB, dsn string) executor.Executor {
			return cairnqlibpq.New(openDB(t, "postgres", dsn), dsn, nil)
		},
		AppPoolAlive: func(ctx context.Context, ex executor.Executor) error {
			return ex.(*cairnqlibpq.Executor).DB().PingContext(ctx)
		},
	})
}

// The pool Open makes is configured by cairnq: binary_parameters, and
// statements kept prepared.
func TestCertifyLibpqOpen(t *testing.T) {
	conformance.CertifyExecutor(t, conformance.Factory{
		Name: "cairnqlibpq.Open",
		Open: func(t testing.TB, dsn string) executor.Executor {
			ex, err := cairnqlibpq.Open(context.Background(), dsn, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ex.Close() })
			return ex
		},
	})
}

func TestCertifySQLExecPgxStdlib(t *testing.T) {
	conformance.CertifyExecutor(t, sqlFactory("sqlexec over database/sql, pgx stdlib", "pgx"))
}

func TestCertifySQLExecLibpq(t *testing.T) {
	conformance.CertifyExecutor(t, sqlFactory("sqlexec over database/sql, lib/pq", "postgres"))
}

// pgxFactory certifies cairnqpgx.New over an application's pgxpool.
func pgxFactory(name string, opts *cairnqpgx.Options) conformance.Factory {
	return conformance.Factory{
		Name: name,
		Open: func(t testing.TB, dsn string) executor.Executor {
			pool, err := pgxpool.New(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			return cairnqpgx.New(pool, opts)
		},
		AppPoolAlive: func(ctx context.Context, ex executor.Executor) error {
			return ex.(*cairnqpgx.Executor).Pool().Ping(ctx)
		},
	}
}

// sqlFactory certifies sqlexec.New over an application's *sql.DB.
func sqlFactory(name, driver string) conformance.Factory {
	return conformance.Factory{
		Name: name,
		Open: func(t testing.TB, dsn string) executor.Executor {
			return sqlexec.New(openDB(t, driver, dsn), nil)
		},
		AppPoolAlive: func(ctx context.Context, ex executor.Executor) error {
			return ex.(*sqlexec.Executor).DB().(*sql.DB).PingContext(ctx)
		},
	}
}

// openDB opens a database/sql pool the test owns.
func openDB(t testing.TB, driver, dsn string) *sql.DB {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
