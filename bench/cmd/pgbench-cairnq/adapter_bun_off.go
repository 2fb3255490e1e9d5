//go:build nobun

package main

import (
	"context"

	"github.com/cairnq/cairnq-go/executor"
)

var openBun func(ctx context.Context, dsn string, pool int) (executor.Executor, func() error, error)
