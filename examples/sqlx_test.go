package examples_test

import (
	"context"
	"database/sql"
	"log"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // database/sql driver "postgres"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/conformance"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/executor/sqlexec"
)

// sqlx is shown and certified here rather than beside executor/sqlexec, so
// that jmoiron/sqlx stays out of the root module's go.mod, and so out of the
// module graph of every program that imports cairnq.

// An application on sqlx hands cairnq its own pool: a *sqlx.DB embeds
// *sql.DB, so it is a sqlexec.DB as it is.
func Example_sqlx() {
	db, err := sqlx.Open("postgres", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	ctx := context.Background()
	client, err := cairnq.OpenPostgres(ctx, sqlexec.New(db, nil), nil) // leaves db open
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	if _, err := client.Submit(ctx, "render", map[string]int{"page": 1}, nil); err != nil {
		log.Fatal(err)
	}
}

// sqlexec over a *sqlx.DB passes the executor certification.
func TestCertifySQLExecSqlx(t *testing.T) {
	conformance.CertifyExecutor(t, conformance.Factory{
		Name: "sqlexec over *sqlx.DB",
		Open: func(t testing.TB, dsn string) executor.Executor {
			db, err := sql.Open("pgx", dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			return sqlexec.New(sqlx.NewDb(db, "pgx"), nil)
		},
		AppPoolAlive: func(ctx context.Context, ex executor.Executor) error {
			return ex.(*sqlexec.Executor).DB().(*sqlx.DB).PingContext(ctx)
		},
	})
}
