package main

import (
	"context"
	"database/sql"
	"fmt"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	cairnqlibpq "github.com/cairnq/cairnq-go/adapters/libpq"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/executor/sqlexec"
)

// adapter is one way of running cairnq on Postgres. Adding a driver to the
// comparison is one entry in the adapters table below.
type adapter struct {
	// name is what --adapters selects and the reports print.
	name string
	// what says which driver stack it is.
	what string
	// open connects to dsn with a pool of at most pool connections (the
	// LISTEN connection, where there is one, may come on top). closeFn
	// releases everything open made; the executor is handed to cairnq with
	// CloseExecutor false.
	open func(ctx context.Context, dsn string, pool int) (ex executor.Executor, closeFn func() error, err error)
	// todo, when set, means the adapter cannot be benchmarked yet: it is
	// listed in the report with this note instead of a figure. An entry
	// whose open is nil gets a todo by itself.
	todo string
}

func init() {
	for i := range adapters {
		if adapters[i].open == nil && adapters[i].todo == "" {
			adapters[i].todo = "TODO: not built in (build tag no" + adapters[i].name + ", or the adapter does not compile yet)"
		}
	}
}

// adapters is the table of adapters, pgx first: every other adapter's
// burn-down is reported as a ratio to pgx's.
var adapters = []adapter{
	{
		name: "pgx",
		what: "adapters/pgx over a pgxpool.Pool (LISTEN: a hijacked pool connection)",
		open: func(ctx context.Context, dsn string, pool int) (executor.Executor, func() error, error) {
			ex, err := cairnqpgx.Open(ctx, dsn, &cairnqpgx.Options{MaxConns: int32(pool)})
			if err != nil {
				return nil, nil, err
			}
			return ex, ex.Close, nil
		},
	},
	{
		name: "libpq",
		what: "adapters/libpq: database/sql over lib/pq (LISTEN: pq.Listener)",
		open: func(ctx context.Context, dsn string, pool int) (executor.Executor, func() error, error) {
			ex, err := cairnqlibpq.Open(ctx, dsn, nil)
			if err != nil {
				return nil, nil, err
			}
			sizePool(ex.DB(), pool)
			return ex, ex.Close, nil
		},
	},
	{
		name: "sql",
		what: "executor/sqlexec: database/sql over pgx's stdlib (no LISTEN)",
		open: func(ctx context.Context, dsn string, pool int) (executor.Executor, func() error, error) {
			db, err := sql.Open("pgx", dsn)
			if err != nil {
				return nil, nil, err
			}
			sizePool(db, pool)
			if err := db.PingContext(ctx); err != nil {
				_ = db.Close()
				return nil, nil, err
			}
			return sqlexec.New(db, nil), db.Close, nil
		},
	},
	// gorm and bun are built from files of their own (adapter_gorm.go,
	// adapter_bun.go) that the build tags nogorm / nobun leave out, for a
	// tree where those adapters do not compile: the entry then reports
	// "not built" instead of a figure.
	{
		name: "gorm",
		what: "adapters/gorm: cairnqgorm.New(*gorm.DB) over gorm.io/driver/postgres (pgx stdlib)",
		open: openGorm,
	},
	{
		name: "bun",
		what: "adapters/bunsql: cairnqbunsql.New(*bun.DB) over bun's pgdriver",
		open: openBun,
	},
}

// sizePool gives a database/sql pool the same bound as the pgx pools, and
// keeps that many connections idle: database/sql's default of two idle
// connections would close and reopen connections all through a run.
func sizePool(db *sql.DB, pool int) {
	db.SetMaxOpenConns(pool)
	db.SetMaxIdleConns(pool)
}

func findAdapter(name string) (adapter, error) {
	for _, a := range adapters {
		if a.name == name {
			return a, nil
		}
	}
	var names []string
	for _, a := range adapters {
		names = append(names, a.name)
	}
	return adapter{}, fmt.Errorf("unknown adapter %q (have %v)", name, names)
}

// noListen hides the Listener capability of an executor: cairnq then polls
// (PollInterval) instead of waking on NOTIFY.
type noListen struct{ executor.Executor }
