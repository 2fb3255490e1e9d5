package cairnq

import (
	"context"
	"encoding/json"
	"fmt"
)

// TaskDef is a task name bound to its payload type P and result type R,
// defined once and used on both ends: the worker registers a typed handler
// with it, the client submits and calls through it. Across languages only
// the name travels; a caller in another SDK uses the same string.
type TaskDef[P, R any] struct {
	Name string
}

// Define returns the TaskDef for name.
func Define[P, R any](name string) TaskDef[P, R] { return TaskDef[P, R]{Name: name} }

// Submit submits a task with payload p.
func (d TaskDef[P, R]) Submit(ctx context.Context, c *Client, p P, opts *SubmitOptions) (*Task, error) {
	return c.Submit(ctx, d.Name, p, opts)
}

// Call submits a task and waits for its result, decoded as R. Errors are
// those of Client.Call, plus a decoding error if the stored result is not
// an R.
func (d TaskDef[P, R]) Call(ctx context.Context, c *Client, p P, opts *CallOptions) (R, error) {
	var r R
	t, err := c.Call(ctx, d.Name, p, opts)
	if err != nil {
		return r, err
	}
	if err := t.DecodeResult(&r); err != nil {
		return r, fmt.Errorf("cairnq: decoding the result of task %s as %T: %w", t.ID, r, err)
	}
	return r, nil
}

// Handle registers fn on w for this task: the payload is decoded into a P
// (a payload that is not a P fails the task for good, since every attempt
// would fail the same way) and fn's R becomes the result.
func (d TaskDef[P, R]) Handle(w *Worker, fn func(ctx context.Context, tc *TaskContext, p P) (R, error), opts *HandlerOptions) error {
	return w.Handle(d.Name, func(ctx context.Context, tc *TaskContext) (any, error) {
		var p P
		if err := json.Unmarshal(tc.Payload(), &p); err != nil {
			return nil, &TaskError{
				Type: "PayloadError", Code: "bad_payload", Retryable: false, Err: err,
				Message: fmt.Sprintf("payload of %s is not a %T: %v", tc.Name(), p, err),
			}
		}
		return fn(ctx, tc, p)
	}, opts)
}
