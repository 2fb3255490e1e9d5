package cairnq_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// A handler that returns Snooze puts its task back in the queue with the
// attempt given back: a task allowed one attempt snoozes twice and still
// runs to success on attempt 1.
func TestSnoozeReturnedByHandler(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		w := newWorker(t, c, nil)
		var calls atomic.Int32
		if err := w.Handle("poll", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			if calls.Add(1) <= 2 {
				if err := tc.Report(ctx, 0.5, "upstream not ready"); err != nil {
					return nil, err
				}
				return nil, fmt.Errorf("not yet: %w", cairnq.Snooze(0)) // wrapped: errors.As finds it
			}
			return tc.Attempt(), nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		task, err := c.Submit(t.Context(), "poll", nil, &cairnq.SubmitOptions{MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		got := waitTask(t, c, task.ID)
		if got.Status != cairnq.StatusSucceeded || got.Attempt != 1 || string(got.Result) != "1" || got.Error != nil || calls.Load() != 3 {
			t.Fatalf("after two snoozes: %s at attempt %d, result %s, error %+v, %d calls; want succeeded at attempt 1 with result 1 after 3 calls",
				got.Status, got.Attempt, got.Result, got.Error, calls.Load())
		}
	})
}

// A delayed snooze leaves an ordinary queued task: due at now + d, the
// attempt given back, worker, lease, progress and message cleared.
func TestSnoozeDelayedLeavesAQueuedTask(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		w := newWorker(t, c, nil)
		if err := w.Handle("poll", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			if err := tc.Report(ctx, 0.5, "upstream not ready"); err != nil {
				return nil, err
			}
			return nil, cairnq.Snooze(time.Hour)
		}, nil); err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		task, err := c.Submit(ctx, "poll", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		var got *cairnq.Task
		waitFor(t, "the task to be snoozed", func() bool {
			got, err = c.Get(ctx, task.ID)
			return err == nil && got.Status == cairnq.StatusQueued && got.UpdatedAt.After(task.UpdatedAt)
		})
		if got.Attempt != 0 || got.WorkerID != "" || !got.LeaseUntil.IsZero() || got.Progress != nil || got.Message != nil ||
			got.Error != nil || !got.CompletedAt.IsZero() || !got.RunAt.After(time.Now().Add(50*time.Minute)) {
			t.Fatalf("snoozed task: %+v; want queued at attempt 0, due in an hour, nothing of the attempt left", got)
		}
	})
}

// A batch handler's Snooze snoozes every task of the call it did not
// settle itself.
func TestSnoozeFromABatchHandler(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	w := newWorker(t, c, nil)
	if err := w.HandleBatch("sync", 3, func(ctx context.Context, tcs []*cairnq.TaskContext) (map[string]any, error) {
		if len(tcs) != 3 {
			return nil, fmt.Errorf("batch of %d, want 3", len(tcs))
		}
		if err := tcs[0].Succeed(ctx, "mine"); err != nil {
			return nil, err
		}
		return nil, cairnq.Snooze(time.Hour)
	}, nil); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var ids []string
	for i := range 3 {
		task, err := c.Submit(ctx, "sync", nil, &cairnq.SubmitOptions{Priority: 3 - i})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	startWorker(t, w)
	if got := waitTask(t, c, ids[0]); got.Status != cairnq.StatusSucceeded {
		t.Fatalf("self-settled task: %s", got.Status)
	}
	for _, id := range ids[1:] {
		var got *cairnq.Task
		waitFor(t, "task "+id+" to be snoozed", func() bool {
			got, _ = c.Get(ctx, id)
			return got != nil && got.Status == cairnq.StatusQueued && !got.RunAt.Before(time.Now().Add(50*time.Minute))
		})
		if got.Attempt != 0 || got.Error != nil {
			t.Errorf("batch leftover %s: attempt %d, error %+v; want attempt 0, no error", id, got.Attempt, got.Error)
		}
	}
}

// TaskContext.Snooze settles from inside the handler; what the handler
// returns afterwards is not recorded. Settling again is a no-op, and a
// negative delay is an ArgumentError that writes nothing.
func TestTaskContextSnooze(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		w := newWorker(t, c, nil)
		var calls atomic.Int32
		checks := make(chan error, 4)
		if err := w.Handle("poll", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			if calls.Add(1) > 1 {
				return "ran", nil
			}
			err := tc.Snooze(ctx, -time.Second)
			var ae *cairnq.ArgumentError
			if !errors.As(err, &ae) || !errors.Is(err, cairnq.ErrInvalidArgument) {
				checks <- fmt.Errorf("tc.Snooze(negative) = %v, want an *ArgumentError", err)
			}
			if err := tc.Snooze(ctx, 0); err != nil {
				checks <- fmt.Errorf("tc.Snooze: %v", err)
			}
			if err := tc.Snooze(ctx, 0); err != nil {
				checks <- fmt.Errorf("second tc.Snooze: %v, want nil (settled already)", err)
			}
			if err := tc.Succeed(ctx, "too late"); err != nil {
				checks <- fmt.Errorf("Succeed after Snooze: %v, want nil (settled already)", err)
			}
			return nil, errors.New("ignored: the task settled already")
		}, nil); err != nil {
			t.Fatal(err)
		}
		task, err := c.Submit(t.Context(), "poll", nil, &cairnq.SubmitOptions{MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		got := waitTask(t, c, task.ID)
		close(checks)
		for err := range checks {
			t.Error(err)
		}
		if got.Status != cairnq.StatusSucceeded || got.Attempt != 1 || string(got.Result) != `"ran"` || got.Error != nil || calls.Load() != 2 {
			t.Fatalf("after tc.Snooze: %s at attempt %d, result %s, error %+v, %d calls; want succeeded at attempt 1 after 2 calls",
				got.Status, got.Attempt, got.Result, got.Error, calls.Load())
		}
	})
}

// Snooze with a negative delay is a typed error, and a handler returning
// it fails its task for good with an ArgumentError envelope.
func TestSnoozeNegativeIsAnArgumentError(t *testing.T) {
	t.Parallel()
	err := cairnq.Snooze(-time.Millisecond)
	var ae *cairnq.ArgumentError
	var te *cairnq.TaskError
	var se *cairnq.SnoozeError
	if !errors.As(err, &ae) || ae.Op != "snooze" || ae.Arg != "delay" || !errors.Is(err, cairnq.ErrInvalidArgument) ||
		!errors.As(err, &te) || te.Retryable || errors.As(err, &se) {
		t.Fatalf("Snooze(-1ms) = %#v, want a non-retryable *TaskError wrapping an *ArgumentError, no *SnoozeError", err)
	}
	if err := cairnq.Snooze(0); !errors.As(err, &se) || se.Delay != 0 {
		t.Fatalf("Snooze(0) = %#v, want *SnoozeError{0}", err)
	}

	c := openTemp(t, nil)
	w := newWorker(t, c, nil)
	if err := w.Handle("poll", func(context.Context, *cairnq.TaskContext) (any, error) {
		return nil, cairnq.Snooze(-time.Second)
	}, nil); err != nil {
		t.Fatal(err)
	}
	task, err := c.Submit(t.Context(), "poll", nil, &cairnq.SubmitOptions{MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	got := waitTask(t, c, task.ID)
	if got.Status != cairnq.StatusFailed || got.Attempt != 1 || got.Error == nil ||
		got.Error.Type != "ArgumentError" || got.Error.Code != "invalid_argument" || got.Error.Retryable {
		t.Fatalf("negative snooze: %s at attempt %d, error %+v; want failed for good at attempt 1 with an ArgumentError envelope",
			got.Status, got.Attempt, got.Error)
	}
}

// A handler that is not ready yet snoozes: the task goes back to the
// queue, due again after the delay, and the attempt it used is given
// back, so snoozing never uses up MaxAttempts.
func ExampleSnooze() {
	path, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()
	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{PollInterval: 10 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	var checks atomic.Int32
	err = w.Handle("await-report", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		if checks.Add(1) < 3 { // the report is not ready yet
			return nil, cairnq.Snooze(20 * time.Millisecond)
		}
		return fmt.Sprintf("ready after %d checks, on attempt %d", checks.Load(), tc.Attempt()), nil
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()

	t, err := c.Call(ctx, "await-report", nil, &cairnq.CallOptions{
		SubmitOptions: cairnq.SubmitOptions{MaxAttempts: 1},
		WaitOptions:   cairnq.WaitOptions{Timeout: time.Minute},
	})
	if err != nil {
		log.Fatal(err)
	}
	var out string
	if err := t.DecodeResult(&out); err != nil {
		log.Fatal(err)
	}
	fmt.Println(out)

	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output: ready after 3 checks, on attempt 1
}
