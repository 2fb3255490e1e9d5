package cairnqtest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtest"
)

func TestWork(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *cairnq.Client) {
		ctx := testCtx(t)
		var seen []string
		w := cairnqtest.NewWorker(t, c, &cairnq.WorkerOptions{
			ID: "test-worker", RetryBackoff: cairnq.NoRetryBackoff,
			Middleware: []cairnq.Middleware{func(ctx context.Context, call *cairnq.Call, next func(context.Context) (any, error)) (any, error) {
				seen = append(seen, "mw:"+call.Tasks[0].Name())
				return next(ctx)
			}},
		})
		if err := sendEmail.Handle(w, func(ctx context.Context, tc *cairnq.TaskContext, p email) (string, error) {
			seen = append(seen, "handler:"+p.To)
			if err := tc.Report(ctx, 0.5, "half"); err != nil {
				return "", err
			}
			if p.To == "" {
				return "", errors.New("no recipient")
			}
			return "sent to " + p.To, nil
		}, nil); err != nil {
			t.Fatal(err)
		}

		// Nothing claimable fails the test.
		record(t, func(tb cairnqtest.TB) {
			cairnqtest.Work(ctx, tb, w)
			t.Error("Work returned after failing")
		}).mustFail(t, "cairnqtest: Work: nothing claimable for worker test-worker")

		sent, err := sendEmail.Submit(ctx, c, email{To: "ada@example.com"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := cairnqtest.Work(ctx, t, w)
		var result string
		if err := got.DecodeResult(&result); err != nil {
			t.Fatal(err)
		}
		if got.ID != sent.ID || got.Status != cairnq.StatusSucceeded || result != "sent to ada@example.com" ||
			got.Attempt != 1 || got.WorkerID != "test-worker" || got.Message == nil || *got.Message != "half" {
			t.Fatalf("Work = %+v (result %q)", got, result)
		}
		if want := []string{"mw:send_email", "handler:ada@example.com"}; !slices.Equal(seen, want) {
			t.Errorf("calls %q, want %q: Work must run the middleware and the handler", seen, want)
		}
		cairnqtest.RequireSubmitted(ctx, t, c, sendEmail.Name, &cairnqtest.Match{Status: cairnq.StatusSucceeded})

		// A failure with attempts left is settled as a retry: queued again
		// (at once, under NoRetryBackoff), with the attempt's error.
		bad, err := sendEmail.Submit(ctx, c, email{}, &cairnq.SubmitOptions{MaxAttempts: 2})
		if err != nil {
			t.Fatal(err)
		}
		got = cairnqtest.Work(ctx, t, w)
		if got.ID != bad.ID || got.Status != cairnq.StatusQueued || got.Attempt != 1 || got.Error == nil || got.Error.Message != "no recipient" {
			t.Fatalf("after a failed attempt: %+v", got)
		}
		got = cairnqtest.Work(ctx, t, w)
		if got.Status != cairnq.StatusFailed || got.Attempt != 2 {
			t.Fatalf("after the last attempt: %+v", got)
		}

		// A task delayed into the future is not claimable.
		if _, err := sendEmail.Submit(ctx, c, email{To: "later@example.com"}, &cairnq.SubmitOptions{Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
		record(t, func(tb cairnqtest.TB) { cairnqtest.Work(ctx, tb, w) }).
			mustFail(t, "nothing claimable", "run_at")
		// A name without a handler is not either, and registering one
		// between calls is allowed.
		if _, err := c.Submit(ctx, "resize", map[string]int{"w": 10}, nil); err != nil {
			t.Fatal(err)
		}
		record(t, func(tb cairnqtest.TB) { cairnqtest.Work(ctx, tb, w) }).mustFail(t, "nothing claimable")
		if err := w.Handle("resize", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			return nil, cairnq.Permanent(errors.New("cannot resize"))
		}, nil); err != nil {
			t.Fatal(err)
		}
		got = cairnqtest.Work(ctx, t, w)
		if got.Name != "resize" || got.Status != cairnq.StatusFailed || got.Error == nil || got.Error.Retryable {
			t.Fatalf("resize: %+v", got)
		}
	})
}

func TestDrain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *cairnq.Client) {
		ctx := testCtx(t)
		w := cairnqtest.NewWorker(t, c, &cairnq.WorkerOptions{Queues: []string{"default", "low"}})
		// Each "split" submits its halves as children until they are 1.
		if err := w.Handle("split", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			var n int
			if err := tc.Decode(&n); err != nil {
				return nil, err
			}
			if n > 1 {
				for range 2 {
					if _, err := tc.Submit(ctx, "split", n/2, nil); err != nil {
						return nil, err
					}
				}
			}
			return n, nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		if got := cairnqtest.Drain(ctx, t, w); len(got) != 0 {
			t.Fatalf("Drain on nothing = %d tasks", len(got))
		}
		root, err := c.Submit(ctx, "split", 4, &cairnq.SubmitOptions{Queue: "low", Priority: -1})
		if err != nil {
			t.Fatal(err)
		}
		first, err := c.Submit(ctx, "split", 1, &cairnq.SubmitOptions{Priority: 9})
		if err != nil {
			t.Fatal(err)
		}
		got := cairnqtest.Drain(ctx, t, w)
		var order []string
		for _, task := range got {
			if task.Status != cairnq.StatusSucceeded {
				t.Errorf("%s: %s", task.ID, task.Status)
			}
			order = append(order, string(task.Result))
		}
		// Highest priority first, then the tree as it was submitted.
		if want := []string{"1", "4", "2", "2", "1", "1", "1", "1"}; !slices.Equal(order, want) {
			t.Fatalf("Drain ran %q, want %q", order, want)
		}
		if got[0].ID != first.ID || got[1].ID != root.ID || got[2].ParentID != root.ID {
			t.Errorf("Drain order: %s %s (parent %s), want %s %s", got[0].ID, got[1].ID, got[2].ParentID, first.ID, root.ID)
		}
		cairnqtest.RequireNotSubmitted(ctx, t, c, "split", &cairnqtest.Match{Status: cairnq.StatusQueued})

		// A handler that never runs out of work is bounded by ctx.
		if err := w.Handle("forever", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			_, err := tc.Submit(ctx, "forever", nil, nil)
			return nil, err
		}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Submit(ctx, "forever", nil, nil); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		record(t, func(tb cairnqtest.TB) { cairnqtest.Drain(short, tb, w) }).
			mustFail(t, "cairnqtest: Drain, after ", "context deadline exceeded")
	})
}

func TestWorkCallBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *cairnq.Client) {
		ctx := testCtx(t)
		w := cairnqtest.NewWorker(t, c, nil)
		var sizes []int
		if err := w.HandleBatch("index", 3, func(ctx context.Context, tcs []*cairnq.TaskContext) (map[string]any, error) {
			sizes = append(sizes, len(tcs))
			out := map[string]any{}
			for _, tc := range tcs {
				out[tc.ID()] = "ok"
			}
			return out, nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for i := range 4 {
			task, err := c.Submit(ctx, "index", i, nil)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, task.ID)
		}
		got := cairnqtest.WorkCall(ctx, t, w)
		if len(got) != 3 || got[0].ID != ids[0] || got[2].ID != ids[2] || got[1].Status != cairnq.StatusSucceeded {
			t.Fatalf("WorkCall = %d tasks", len(got))
		}
		// Work takes a call of one task, and refuses a call of several.
		if task := cairnqtest.Work(ctx, t, w); task.ID != ids[3] || string(task.Result) != `"ok"` {
			t.Fatalf("Work = %+v", task)
		}
		for i := range 2 {
			if _, err := c.Submit(ctx, "index", i, nil); err != nil {
				t.Fatal(err)
			}
		}
		record(t, func(tb cairnqtest.TB) { cairnqtest.Work(ctx, tb, w) }).
			mustFail(t, `Work: the call delivered 2 tasks of the batch name "index"`, "use WorkCall")
		if want := []int{3, 1, 2}; !slices.Equal(sizes, want) {
			t.Errorf("batch sizes %v, want %v", sizes, want)
		}
	})
}

func TestWorkAbandonsAtContextEnd(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *cairnq.Client) {
		ctx := testCtx(t)
		w := cairnqtest.NewWorker(t, c, nil)
		var sawCancel atomic.Bool
		if err := w.Handle("block", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			<-ctx.Done()
			sawCancel.Store(true)
			return nil, ctx.Err()
		}, nil); err != nil {
			t.Fatal(err)
		}
		task, err := c.Submit(ctx, "block", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		record(t, func(tb cairnqtest.TB) { cairnqtest.Work(short, tb, w) }).
			mustFail(t, "cairnqtest: Work: ", "call on "+task.ID+" abandoned", "context deadline exceeded")
		if !sawCancel.Load() {
			t.Error("the handler's context was not canceled")
		}
		// The abandoned attempt keeps its lease, as at a shutdown.
		got, err := c.Get(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != cairnq.StatusRunning {
			t.Errorf("abandoned task is %s, want running", got.Status)
		}
		// The worker works again afterwards (the task is leased: nothing).
		record(t, func(tb cairnqtest.TB) { cairnqtest.Work(ctx, tb, w) }).mustFail(t, "nothing claimable")
	})
}

func TestWorkSeesCancelThroughHeartbeat(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *cairnq.Client) {
		ctx := testCtx(t)
		w := cairnqtest.NewWorker(t, c, &cairnq.WorkerOptions{LeaseDuration: time.Second, HeartbeatInterval: 20 * time.Millisecond})
		started := make(chan string, 1)
		if err := w.Handle("long", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			started <- tc.ID()
			select {
			case <-ctx.Done(): // the heartbeat saw the cancel request
				return nil, context.Cause(ctx)
			case <-time.After(10 * time.Second):
				return nil, errors.New("cancel not seen")
			}
		}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Submit(ctx, "long", nil, nil); err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			id := <-started
			_, err := c.Cancel(ctx, id)
			errc <- err
		}()
		got := cairnqtest.Work(ctx, t, w)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if got.Status != cairnq.StatusCanceled {
			t.Fatalf("canceled while running: %+v", got)
		}
	})
}

func TestWorkRefusesARunningWorker(t *testing.T) {
	c := cairnqtest.NewClient(t, nil)
	ctx := testCtx(t)
	w := cairnqtest.NewWorker(t, c, &cairnq.WorkerOptions{PollInterval: 10 * time.Millisecond})
	if err := w.Handle("x", func(context.Context, *cairnq.TaskContext) (any, error) { return nil, nil }, nil); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Handle fails once Run started.
		if err := w.Handle(fmt.Sprint("y", time.Now().UnixNano()), func(context.Context, *cairnq.TaskContext) (any, error) { return nil, nil }, nil); errors.Is(err, cairnq.ErrWorkerStarted) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run did not start")
		}
		time.Sleep(time.Millisecond)
	}
	record(t, func(tb cairnqtest.TB) { cairnqtest.Work(ctx, tb, w) }).mustFail(t, "worker already started")
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// A worker with no handler is refused, not run.
	record(t, func(tb cairnqtest.TB) { cairnqtest.Drain(ctx, tb, cairnqtest.NewWorker(t, c, nil)) }).
		mustFail(t, "none registered")
}
