// Package workeraccess hands package cairnqtest the one piece of a
// cairnq.Worker it needs and the root package does not export: running a
// single handler call synchronously, through the worker's own claim,
// TaskContext, middleware and settlement.
//
// The hand-over is one function value, set by the root package at
// initialisation (as internal/storeaccess does for the store). Its
// signature cannot name *cairnq.Worker, since the root package imports
// this one, so it takes the worker as any.
package workeraccess

import (
	"context"

	"github.com/cairnq/cairnq-go/internal/engine"
)

// WorkOne claims at most one handler call's tasks for worker (a
// *cairnq.Worker that is not running), runs the call to its settlement
// and returns its tasks as read back after it; none and a nil error when
// nothing was claimable. Set by the root package.
var WorkOne func(ctx context.Context, worker any) ([]*engine.Task, error)
