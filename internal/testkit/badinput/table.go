package badinput

import (
	"context"
	"fmt"
	"strings"

	cairnq "github.com/cairnq/cairnq-go"
)

// Want is what a row's call must do.
type Want int

const (
	// Argument: refused with an *cairnq.ArgumentError.
	Argument Want = iota
	// Serialization: refused with a *cairnq.SerializationError.
	Serialization
	// TooLarge: refused with a *cairnq.SerializationError that satisfies
	// errors.Is(err, engine.ErrValueTooLarge).
	TooLarge
	// Accepted: a positive control; the call succeeds.
	Accepted
)

func (w Want) String() string {
	switch w {
	case Argument:
		return "*ArgumentError"
	case Serialization:
		return "*SerializationError"
	case TooLarge:
		return "*SerializationError (ErrValueTooLarge)"
	case Accepted:
		return "success"
	}
	return fmt.Sprintf("Want(%d)", int(w))
}

// Env is what a row's call runs against: a client on a fresh database
// holding two witness tasks, one queued and one canceled, each under a
// key. A refused call must leave both exactly as they were.
type Env struct {
	C        *cairnq.Client
	Queued   *cairnq.Task
	Canceled *cairnq.Task
}

// Outcome is what an accepted call reports back to the runner.
type Outcome struct {
	// Task is the task the call created, if any.
	Task *cairnq.Task
	// Sent is the payload the call submitted; when set, the stored payload
	// must read back as the same JSON value.
	Sent any
	// Seen is the task as the handler saw it right after its call (rows
	// that run a worker).
	Seen *cairnq.Task
}

// Case is one row.
type Case struct {
	Name string
	Want Want
	// Arg, for Argument rows, is the ArgumentError.Arg the refusal must
	// name; "" does not check it.
	Arg string
	// Field, for Serialization and TooLarge rows, is the
	// SerializationError.Field the refusal must name.
	Field string
	// Adds is how many tasks the call leaves behind beside the witnesses:
	// a task the row itself submits in order to run its call (worker
	// rows), or the one an accepted submit creates.
	Adds int
	// Call makes the call. An error from the row's own setup, rather than
	// from the call under test, is wrapped with setupErr.
	Call func(ctx context.Context, e *Env) (Outcome, error)
	// Check, when set, checks what the call left, after the common checks.
	Check func(ctx context.Context, e *Env, out Outcome) error
}

// setupError marks an error from a row's setup, not from the call tested.
type setupError struct{ err error }

func (e *setupError) Error() string { return "setup: " + e.err.Error() }
func (e *setupError) Unwrap() error { return e.err }

func setupErr(err error) error { return &setupError{err} }

// Names the rows use. workerTask is what the worker rows run; nothing
// else is named so.
const (
	taskName   = "bi.task"
	witness    = "bi.witness"
	workerTask = "bi.worker"
)

// Values more than one family of rows uses.
var (
	nilCtx  context.Context            // a nil context, as a careless caller passes it
	key1024 = strings.Repeat("𝄞", 256) // 1024 bytes, 256 characters
)

// long is an ASCII string of n bytes.
func long(n int) string { return strings.Repeat("i", n) }

// call is a row whose call returns no task.
func call(fn func(ctx context.Context, e *Env) error) func(context.Context, *Env) (Outcome, error) {
	return func(ctx context.Context, e *Env) (Outcome, error) { return Outcome{}, fn(ctx, e) }
}

// Cases returns the table, built afresh (its closures hold no large value):
// the rows of each family of calls, the families in this order.
func Cases() []Case {
	var cases []Case
	for _, family := range []func() []Case{submitCases, submitManyCases, readCases, writeCases, waitCases, workerCases} {
		cases = append(cases, family()...)
	}
	return cases
}
