package cairnq_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
)

// claimHeld holds the worker's first claim statement until release is
// closed, then runs it whatever its context says, and reports the
// context's error if it ended meanwhile: the claim committed on the
// server while the driver reported the cancellation, as pgx does when
// its cancel request loses the race with the statement.
type claimHeld struct {
	executor.Executor
	held    chan struct{} // closed once the claim arrived
	release chan struct{}
	once    sync.Once
}

func (c *claimHeld) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	isClaim := strings.Contains(sql, "SKIP LOCKED") && !strings.Contains(sql, "lease_until_ms <=")
	first := false
	if isClaim {
		c.once.Do(func() { first = true })
	}
	if !first {
		return c.Executor.Query(ctx, sql, args...)
	}
	close(c.held)
	<-c.release
	rows, err := c.Executor.Query(context.WithoutCancel(ctx), sql, args...)
	if err == nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return rows, err
}

// A worker stopped while its claim is in flight runs what the claim drew
// before Run returns, rather than leaving it claimed by nobody until its
// lease expires.
func TestWorkerStoppedMidClaimRunsWhatItDrew(t *testing.T) {
	held := &claimHeld{held: make(chan struct{}), release: make(chan struct{})}
	c := openThrough(t, func(ex executor.Executor) executor.Executor {
		held.Executor = ex
		return held
	})
	task, err := c.Submit(t.Context(), "job", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ran sync.WaitGroup
	ran.Add(1)
	w := newWorker(t, c, nil)
	w.Handle("job", func(context.Context, *cairnq.TaskContext) (any, error) {
		ran.Done()
		return "done", nil
	}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(ctx) }()
	<-held.held
	cancel() // the loop's context ends while the claim is in flight
	close(held.release)
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
	got, err := c.Get(t.Context(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != cairnq.StatusSucceeded {
		t.Fatalf("task %s after Run returned: status %s, worker %q, want succeeded", task.ID, got.Status, got.WorkerID)
	}
	ran.Wait()
}

// WorkOne whose context ends while its claim is in flight hands what the
// claim drew back to its queue, its attempt given back, rather than run
// it for a caller that has gone or leave it to its lease.
func TestWorkOneStoppedMidClaimHandsBack(t *testing.T) {
	held := &claimHeld{held: make(chan struct{}), release: make(chan struct{})}
	c := openThrough(t, func(ex executor.Executor) executor.Executor {
		held.Executor = ex
		return held
	})
	task, err := c.Submit(t.Context(), "job", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	w := newWorker(t, c, nil)
	w.Handle("job", func(context.Context, *cairnq.TaskContext) (any, error) {
		ran = true
		return nil, nil
	}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := w.WorkOne(ctx)
		errc <- err
	}()
	<-held.held
	cancel()
	close(held.release)
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("WorkOne: %v, want context.Canceled", err)
	}
	got, err := c.Get(t.Context(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ran || got.Status != cairnq.StatusQueued || got.Attempt != 0 || got.WorkerID != "" {
		t.Fatalf("after WorkOne: ran %v, task %s attempt %d worker %q; want queued again, attempt 0, not run", ran, got.Status, got.Attempt, got.WorkerID)
	}
}
