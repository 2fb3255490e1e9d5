package conformance_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqlibpq "github.com/cairnq/cairnq-go/adapters/libpq"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/conformance"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/executor/sqlexec"
	"github.com/cairnq/cairnq-go/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// pgDrivers opens an executor on dsn whose connections resolve to schema,
// one per way an application reaches Postgres. Each scenario gets a schema
// of its own in its driver's database, which is cheaper than a database
// each and exercises the schema option as a side effect.
var pgDrivers = map[string]func(t *testing.T, dsn, schema string) executor.Executor{
	"pgx": func(t *testing.T, dsn, schema string) executor.Executor {
		ex, err := cairnqpgx.Open(context.Background(), dsn, &cairnqpgx.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		return ex
	},
	"pgx-simple-protocol": func(t *testing.T, dsn, schema string) executor.Executor {
		ex, err := cairnqpgx.Open(context.Background(), dsn, &cairnqpgx.Options{Schema: schema, ExecMode: pgx.QueryExecModeSimpleProtocol})
		if err != nil {
			t.Fatal(err)
		}
		return ex
	},
	"libpq": func(t *testing.T, dsn, schema string) executor.Executor {
		ex, err := cairnqlibpq.Open(context.Background(), dsn, &cairnqlibpq.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		return ex
	},
	"database-sql-pgx-stdlib": func(t *testing.T, dsn, schema string) executor.Executor {
		// An application's own *sql.DB, with search_path set on each
		// connection by the application; cairnq only asserts it.
		ctx := context.Background()
		admin, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		_, err = admin.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize())
		admin.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["search_path"] = schema
		db := stdlib.OpenDB(*cfg)
		t.Cleanup(func() { db.Close() })
		return sqlexec.New(db, nil)
	},
}

var schemaSeq atomic.Int64

func TestScenariosOnPostgres(t *testing.T) {
	sets := scenarioSets(t)
	for driver, open := range pgDrivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.DSN(t)
			for set, scenarios := range sets {
				for _, s := range scenarios {
					t.Run(set+"/"+s.Name, func(t *testing.T) {
						t.Parallel()
						ctx := context.Background()
						schema := fmt.Sprintf("s%d", schemaSeq.Add(1))
						c, err := cairnq.OpenPostgres(ctx, open(t, dsn, schema), &cairnq.Options{Schema: schema, CloseExecutor: true})
						if err != nil {
							t.Fatal(err)
						}
						defer c.Close()
						conformance.Run(t, ctx, conformance.ClientTarget{Client: c}, s)
					})
				}
			}
		})
	}
}
