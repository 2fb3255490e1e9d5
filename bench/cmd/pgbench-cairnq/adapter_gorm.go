//go:build !nogorm

package main

import (
	"context"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	cairnqgorm "github.com/cairnq/cairnq-go/adapters/gorm"
	"github.com/cairnq/cairnq-go/executor"
)

// openGorm runs cairnq on a *gorm.DB as an application would open it
// (gorm.io/driver/postgres, which is pgx's stdlib underneath).
var openGorm = func(ctx context.Context, dsn string, pool int) (executor.Executor, func() error, error) {
	gdb, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return nil, nil, err
	}
	db, err := gdb.DB()
	if err != nil {
		return nil, nil, err
	}
	sizePool(db, pool)
	return cairnqgorm.New(gdb, nil), db.Close, nil
}
