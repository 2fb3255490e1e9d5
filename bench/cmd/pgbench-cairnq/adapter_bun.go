//go:build !nobun

package main

import (
	"context"
	"database/sql"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/driver/pgdriver"

	cairnqbunsql "github.com/cairnq/cairnq-go/adapters/bunsql"
	"github.com/cairnq/cairnq-go/executor"
)

// openBun runs cairnq on a *bun.DB over bun's own pgdriver, as bun's
// documentation opens one.
var openBun = func(ctx context.Context, dsn string, pool int) (executor.Executor, func() error, error) {
	sqldb := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(dsn)))
	sizePool(sqldb, pool)
	if err := sqldb.PingContext(ctx); err != nil {
		_ = sqldb.Close()
		return nil, nil, err
	}
	return cairnqbunsql.New(bun.NewDB(sqldb, pgdialect.New()), nil), sqldb.Close, nil
}
