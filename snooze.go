package cairnq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairnq/cairnq-go/internal/engine"
)

// SnoozeError is what Snooze returns: a handler's way of saying "not yet".
// The worker puts the task back in the queue, due again Delay from now,
// and gives back the attempt the claim counted, so the snooze spends none
// of the task's MaxAttempts. It is not a failure: no error is recorded and
// no retry backoff applies.
//
// The worker recognizes it with errors.As, so it may be wrapped. Build it
// with Snooze, which checks the delay; a hand-built one with a negative
// Delay fails the attempt for good, as Snooze does.
type SnoozeError struct {
	Delay time.Duration // from when the worker settles the attempt; 0 is due at once
}

// Error describes the snooze.
func (e *SnoozeError) Error() string {
	return fmt.Sprintf("cairnq: task snoozed for %v", e.Delay)
}

// Snooze returns the error a handler returns to put its task back in the
// queue, due again d from now, as if this attempt had never been claimed:
//
//	if !ready {
//		return nil, cairnq.Snooze(30 * time.Second)
//	}
//
// On the stored row the task is queued with run_at d from now, its
// attempt number back where it was before the claim, and worker, lease,
// progress and message cleared; the error of an earlier failed attempt is
// kept. Another SDK's worker claims it at run_at like any queued task. A
// cancel requested while the handler ran wins: the task ends canceled.
// Snooze is settled under the lease like every outcome: if the lease was
// lost meanwhile the worker records nothing.
//
// Returned by a batch handler, it snoozes every task of the call the
// handler did not settle itself. Zero requeues the task due now.
//
// Nothing limits how often a task may snooze: a handler that always
// snoozes keeps its task forever, as TaskContext.Attempt does not grow.
// Keep count in the payload or elsewhere if that matters.
//
// A negative d is a mistake in the handler, not a snooze: Snooze returns a
// non-retryable *TaskError wrapping an *ArgumentError (errors.As finds
// both), and a handler returning it fails its task for good, recorded with
// the envelope type "ArgumentError", code "invalid_argument".
func Snooze(d time.Duration) error {
	if d < 0 {
		return negativeSnooze(d)
	}
	return &SnoozeError{Delay: d}
}

// negativeSnooze is the failure a negative snooze delay records.
func negativeSnooze(d time.Duration) *TaskError {
	ae := &ArgumentError{Op: "snooze", Arg: "delay", Reason: fmt.Sprintf("must be >= 0, got %v", d)}
	return &TaskError{Type: "ArgumentError", Code: "invalid_argument", Message: ae.Error(), Err: ae}
}

// snoozeOf reports whether a handler's error asks for a snooze, and for
// how long. The error is the handler's own value, whose As or Unwrap
// methods may panic: a panic reads as no snooze (failureOf then records
// it). A typed nil *SnoozeError is no snooze either.
func snoozeOf(err error) (d time.Duration, ok bool) {
	if err == nil {
		return 0, false
	}
	defer func() {
		if recover() != nil {
			d, ok = 0, false
		}
	}()
	var se *SnoozeError
	if errors.As(err, &se) && se != nil {
		return se.Delay, true
	}
	return 0, false
}

// Snooze settles the task now as snoozed for d: queued again, due d from
// now, with this attempt given back (see the package function Snooze).
// The handler then returns whatever it likes; the worker records nothing
// more. A cancel requested meanwhile wins (the task ends canceled).
// Settling twice is a no-op; after a lost lease it is an ErrLostLease
// error. A negative d is an *ArgumentError, and nothing is written.
func (tc *TaskContext) Snooze(ctx context.Context, d time.Duration) error {
	if d < 0 {
		return &ArgumentError{Op: "snooze", Arg: "delay", Reason: fmt.Sprintf("must be >= 0, got %v", d)}
	}
	st := tc.settlement(engine.Snoozed)
	st.Delay = d
	return tc.settleNow(ctx, st)
}
