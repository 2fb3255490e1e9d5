//go:build nogorm

package main

import (
	"context"

	"github.com/cairnq/cairnq-go/executor"
)

var openGorm func(ctx context.Context, dsn string, pool int) (executor.Executor, func() error, error)
