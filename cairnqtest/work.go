package cairnqtest

import (
	"context"
	"fmt"
	"strings"

	cairnq "github.com/cairnq/cairnq-go"
)

// Work runs one handler call on w, in the test's goroutine, and returns
// its task as stored once the call settled it: succeeded, failed, canceled,
// or queued again for a retry (with the attempt's error) when the handler
// failed and attempts remain.
//
// The call goes through the worker's real path: the claim Worker.Run makes
// (w's queues and registered names, highest priority first), a
// TaskContext, w's middleware, MaxRun, and the worker's settlement, with
// the lease renewed by the heartbeat while the handler runs. w must not be
// running (Worker.Run) and is not started by Work: it may Work again, and
// Handle may register more names between calls.
//
// Work fails the test when nothing is claimable. A task is claimable when
// it is queued, in one of w's queues, named by one of its handlers, and
// due: a task submitted with SubmitOptions.Delay, or queued again after a
// failure with the worker's retry backoff (WorkerOptions.RetryBackoff;
// NoRetryBackoff makes retries due at once), is not, until its run_at.
// Work does not wait for it; neither does it run it early.
//
// It also fails the test when ctx ends first (the call is then abandoned
// as Run abandons one at shutdown: the handler's context is canceled, and
// the task is left running to its lease), when the claim fails, when the
// task is still running after its call (the settlement failed, or the
// lease was lost: WorkerOptions.OnError has the cause), and when the call
// delivered several tasks, which only a HandleBatch name does: use
// WorkCall for those.
func Work(ctx context.Context, tb TB, w *cairnq.Worker) *cairnq.Task {
	tb.Helper()
	ts := workCall(ctx, tb, "Work", w)
	switch len(ts) {
	case 0:
		return nil
	case 1:
		return ts[0]
	default:
		tb.Fatalf("cairnqtest: Work: the call delivered %d tasks of the batch name %q (%s); use WorkCall",
			len(ts), ts[0].Name, ids(ts))
		return nil
	}
}

// WorkCall is Work for any handler call, a batch call included: it returns
// every task the call delivered, in the order the handler received them,
// as stored once they settled.
func WorkCall(ctx context.Context, tb TB, w *cairnq.Worker) []*cairnq.Task {
	tb.Helper()
	return workCall(ctx, tb, "WorkCall", w)
}

// Drain runs handler calls on w, one at a time as Work does, until nothing
// is claimable, and returns every task they settled, in the order they
// ran; a task that ran twice (a retry due at once, under NoRetryBackoff)
// appears twice, in the state each call left it. Nothing claimable at the
// start is not a failure: Drain returns none.
//
// A handler that keeps submitting work for itself keeps Drain running:
// ctx bounds it, and its end fails the test, naming the tasks settled so
// far. Drain fails the test for the reasons Work does besides.
func Drain(ctx context.Context, tb TB, w *cairnq.Worker) []*cairnq.Task {
	tb.Helper()
	var out []*cairnq.Task
	for n := 0; ; n++ {
		ts, err := workOne(ctx, w)
		if err != nil {
			tb.Fatalf("cairnqtest: Drain, after %d call(s) settling %d task(s)%s: %v", n, len(out), briefIDs(out), err)
			return nil
		}
		if len(ts) == 0 {
			return out
		}
		if msg := stillRunning(ts); msg != "" {
			tb.Fatalf("cairnqtest: Drain: %s", msg)
			return nil
		}
		out = append(out, ts...)
	}
}

func workCall(ctx context.Context, tb TB, op string, w *cairnq.Worker) []*cairnq.Task {
	tb.Helper()
	ts, err := workOne(ctx, w)
	if err != nil {
		tb.Fatalf("cairnqtest: %s: %v", op, err)
		return nil
	}
	if len(ts) == 0 {
		tb.Fatalf("cairnqtest: %s: nothing claimable for worker %s: no queued task in its queues "+
			"that one of its handlers is registered for is due (a task submitted with a Delay, or "+
			"waiting out a retry's backoff, is due only at its run_at)", op, w.ID())
		return nil
	}
	if msg := stillRunning(ts); msg != "" {
		tb.Fatalf("cairnqtest: %s: %s", op, msg)
		return nil
	}
	return ts
}

// workOne runs one call through the worker's own path.
func workOne(ctx context.Context, w *cairnq.Worker) ([]*cairnq.Task, error) {
	if w == nil {
		return nil, fmt.Errorf("the worker is nil")
	}
	if ctx == nil {
		return nil, fmt.Errorf("the context is nil")
	}
	return w.WorkOne(ctx)
}

// stillRunning describes the tasks a call left running, or "".
func stillRunning(ts []*cairnq.Task) string {
	var left []*cairnq.Task
	for _, t := range ts {
		if t.Status == cairnq.StatusRunning {
			left = append(left, t)
		}
	}
	if len(left) == 0 {
		return ""
	}
	return fmt.Sprintf("task(s) %s still running after their call: the settlement failed or the lease was lost "+
		"(the worker's OnError says which)", ids(left))
}

func ids(ts []*cairnq.Task) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.ID
	}
	return strings.Join(s, ", ")
}

// briefIDs names up to ten tasks for a message.
func briefIDs(ts []*cairnq.Task) string {
	if len(ts) == 0 {
		return ""
	}
	if len(ts) > 10 {
		return " (the last ten: " + ids(ts[len(ts)-10:]) + ")"
	}
	return " (" + ids(ts) + ")"
}
