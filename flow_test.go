package cairnq_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go"
)

func TestRateLimitClaimsOnlyWhatMayStart(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		const n, rate, lease = 12, 10.0, 30 * time.Second
		w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: n, LeaseDuration: lease})
		var started atomic.Int32
		release := make(chan struct{})
		var mu sync.Mutex
		var claimedAt []time.Time // the claim's time, from the lease it set
		w.Handle("limited", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			mu.Lock()
			claimedAt = append(claimedAt, tc.Task().LeaseUntil.Add(-lease))
			mu.Unlock()
			started.Add(1)
			<-release
			return nil, nil
		}, &cairnq.HandlerOptions{RateLimit: &cairnq.RateLimit{Rate: rate, Burst: 1}})
		var ids []string
		for range n {
			task, err := c.Submit(ctx, "limited", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, task.ID)
		}
		startWorker(t, w)

		// Every handler blocks, so a worker that claimed past its limit
		// would hold leases on tasks it has not started.
		waitFor(t, "three starts", func() bool { return started.Load() >= 3 })
		stats, err := c.Stats(ctx, cairnq.DefaultQueue)
		if err != nil {
			t.Fatal(err)
		}
		if running, s := stats[cairnq.DefaultQueue].Running, int(started.Load()); running > s+1 {
			t.Errorf("%d tasks running (leased) with %d handlers started: claimed ahead of the limit", running, s)
		}
		close(release)
		for _, id := range ids {
			if got := waitTask(t, c, id); got.Status != cairnq.StatusSucceeded {
				t.Fatalf("%s: %s", id, got.Status)
			}
		}
		// n starts at rate r with a burst of 1 need at least (n-1)/r between
		// the first claim and the last; one token of slack covers the gap
		// between a claim's statement and its spending the token. Slowness
		// only widens the span.
		mu.Lock()
		defer mu.Unlock()
		slices.SortFunc(claimedAt, func(a, b time.Time) int { return a.Compare(b) })
		span := claimedAt[len(claimedAt)-1].Sub(claimedAt[0])
		if min := time.Duration(float64(n-2) / rate * float64(time.Second)); span < min {
			t.Errorf("%d claims within %v, want at least %v at %v/s", n, span, min, rate)
		}
	})
}

func TestRateLimitValidated(t *testing.T) {
	c := openTemp(t, nil)
	w := newWorker(t, c, nil)
	h := func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return nil, nil }
	for _, rl := range []cairnq.RateLimit{{Rate: 0}, {Rate: -1}, {Rate: math.NaN()}, {Rate: math.Inf(1)}, {Rate: 1, Burst: -1}} {
		err := w.Handle("x", h, &cairnq.HandlerOptions{RateLimit: &rl})
		var ae *cairnq.ArgumentError
		if !errors.As(err, &ae) || ae.Op != "handle" {
			t.Errorf("RateLimit %+v: %v, want an *ArgumentError", rl, err)
		}
	}
	if err := w.Handle("x", h, &cairnq.HandlerOptions{RateLimit: &cairnq.RateLimit{Rate: 0.5}}); err != nil {
		t.Errorf("a valid limit: %v", err)
	}
}

func TestPauseAndResumeQueues(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		w := newWorker(t, c, &cairnq.WorkerOptions{Queues: []string{"a", "b"}, Concurrency: 4})
		inFlight := make(chan struct{})
		finish := make(chan struct{})
		w.Handle("job", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			if tc.Queue() == "b" && string(tc.Payload()) == `"hold"` {
				close(inFlight)
				<-finish
			}
			return tc.Queue(), nil
		}, nil)
		if err := w.Pause("a"); err != nil { // before Run
			t.Fatal(err)
		}
		var ae *cairnq.ArgumentError
		if err := w.Pause("nope"); !errors.As(err, &ae) {
			t.Errorf("Pause of a queue the worker does not claim from: %v", err)
		}
		if got := w.Paused(); !slices.Equal(got, []string{"a"}) {
			t.Errorf("Paused() = %q", got)
		}
		submit := func(queue string, payload any) *cairnq.Task {
			t.Helper()
			task, err := c.Submit(ctx, "job", payload, &cairnq.SubmitOptions{Queue: queue})
			if err != nil {
				t.Fatal(err)
			}
			return task
		}
		inA := submit("a", nil)
		startWorker(t, w)
		waitTask(t, c, submit("b", nil).ID)
		waitTask(t, c, submit("b", nil).ID) // the loop has claimed again since
		if got, err := c.Get(ctx, inA.ID); err != nil || got.Status != cairnq.StatusQueued {
			t.Fatalf("task in paused queue a: %v %v", got.Status, err)
		}

		// Pausing everything leaves a call in flight to finish and settle.
		held := submit("b", "hold")
		<-inFlight
		if err := w.Pause(); err != nil {
			t.Fatal(err)
		}
		if got := w.Paused(); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("Paused() = %q", got)
		}
		afterPause := submit("b", nil)
		close(finish)
		if got := waitTask(t, c, held.ID); got.Status != cairnq.StatusSucceeded {
			t.Errorf("the call in flight at Pause: %s", got.Status)
		}
		if got, err := c.Get(ctx, afterPause.ID); err != nil || got.Status != cairnq.StatusQueued {
			t.Errorf("a task submitted to a paused queue: %v %v", got.Status, err)
		}

		if err := w.Resume(); err != nil {
			t.Fatal(err)
		}
		for _, task := range []*cairnq.Task{inA, afterPause} {
			if got := waitTask(t, c, task.ID); got.Status != cairnq.StatusSucceeded {
				t.Errorf("after Resume, %s: %s", task.Queue, got.Status)
			}
		}
		if got := w.Paused(); len(got) != 0 {
			t.Errorf("Paused() after Resume = %q", got)
		}
	})
}

// A call that finishes while the worker cannot claim (here its running
// payloads fill MaxInFlightBytes) settles without waiting for the next
// claim: on SQLite a busy worker's completions otherwise ride on it.
func TestFinishedCallSettlesWhileClaimingWaits(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 2, MaxInFlightBytes: 64})
		release := make(chan struct{})
		w.Handle("job", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			if len(tc.Payload()) > 64 {
				<-release
			}
			return "done", nil
		}, nil)
		big, err := c.Submit(ctx, "job", strings.Repeat("x", 100), nil)
		if err != nil {
			t.Fatal(err)
		}
		small, err := c.Submit(ctx, "job", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer close(release)
		startWorker(t, w) // one claim draws both: the loop is then full
		if got := waitTask(t, c, small.ID); got.Status != cairnq.StatusSucceeded {
			t.Fatalf("the small task: %s", got.Status)
		}
		if got, err := c.Get(ctx, big.ID); err != nil || got.Status != cairnq.StatusRunning {
			t.Fatalf("the big task: %v %v, want still running", got.Status, err)
		}
	})
}
