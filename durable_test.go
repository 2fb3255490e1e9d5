package cairnq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// bothClients runs fn on a Client of each backend.
func bothClients(t *testing.T, fn func(t *testing.T, c *cairnq.Client)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, openTemp(t, nil)) })
	t.Run("postgres", func(t *testing.T) { fn(t, openPostgres(t, nil)) })
}

// workUntil runs w's handlers one call at a time until the task with id
// has ended (a retried task waits for its backoff), and returns it.
func workUntil(t *testing.T, c *cairnq.Client, w *cairnq.Worker, id string) *cairnq.Task {
	t.Helper()
	var task *cairnq.Task
	waitFor(t, "task "+id+" to end", func() bool {
		if _, err := w.WorkOne(t.Context()); err != nil {
			t.Fatal(err)
		}
		var err error
		if task, err = c.Get(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		return task.IsTerminal()
	})
	return task
}

type receipt struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// A step that succeeded is not run again by a later attempt: its
// recorded output comes back, typed, and only the steps not recorded
// run.
func TestDurableStepsRunOnceAcrossAttempts(t *testing.T) {
	bothClients(t, func(t *testing.T, c *cairnq.Client) {
		var mu sync.Mutex
		ran := map[string]int{}
		count := func(step string) {
			mu.Lock()
			defer mu.Unlock()
			ran[step]++
		}
		w := newWorker(t, c, &cairnq.WorkerOptions{RetryBackoff: cairnq.NoRetryBackoff})
		w.Handle("checkout", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			r, err := cairnq.Once(ctx, tc, "charge", func(ctx context.Context) (receipt, error) {
				count("charge")
				return receipt{ID: "r-1", Amount: 42}, nil
			})
			if err != nil {
				return nil, err
			}
			label, err := cairnq.Once(ctx, tc, "label", func(ctx context.Context) (string, error) {
				count("label")
				return "label-for-" + r.ID, nil
			})
			if err != nil {
				return nil, err
			}
			if tc.Attempt() == 1 {
				return nil, errors.New("the carrier is down") // retryable: the next attempt resumes
			}
			shipped, err := cairnq.Once(ctx, tc, "ship", func(ctx context.Context) (bool, error) {
				count("ship")
				return true, nil
			})
			return map[string]any{"receipt": r, "label": label, "shipped": shipped}, err
		}, nil)
		task, err := c.Submit(t.Context(), "checkout", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		done := workUntil(t, c, w, task.ID)
		if !done.IsSucceeded() || done.Attempt != 2 {
			t.Fatalf("task %s after %d attempts: %+v", done.Status, done.Attempt, done.Error)
		}
		var res struct {
			Receipt receipt
			Label   string
			Shipped bool
		}
		if err := done.DecodeResult(&res); err != nil || res.Receipt.Amount != 42 || res.Label != "label-for-r-1" || !res.Shipped {
			t.Errorf("result %s, %v", done.Result, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if ran["charge"] != 1 || ran["label"] != 1 || ran["ship"] != 1 {
			t.Errorf("steps ran %v, want each once", ran)
		}
	})
}

// An attempt whose steps differ from those recorded fails the task for
// good, naming the first difference, even when the handler swallows the
// error; a name used twice in one attempt is refused.
func TestDurableStepsRefuseChangedSteps(t *testing.T) {
	bothClients(t, func(t *testing.T, c *cairnq.Client) {
		old := newWorker(t, c, &cairnq.WorkerOptions{RetryBackoff: cairnq.NoRetryBackoff})
		old.Handle("saga", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			for _, step := range []string{"reserve", "charge"} {
				if _, err := cairnq.Once(ctx, tc, step, func(context.Context) (int, error) { return 1, nil }); err != nil {
					return nil, err
				}
			}
			return nil, errors.New("interrupted")
		}, nil)
		task, err := c.Submit(t.Context(), "saga", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := old.WorkOne(t.Context()); err != nil {
			t.Fatal(err)
		}
		var swallowed, twice error
		changed := newWorker(t, c, &cairnq.WorkerOptions{RetryBackoff: cairnq.NoRetryBackoff})
		changed.Handle("saga", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			one := func(context.Context) (int, error) { return 1, nil }
			if _, err := cairnq.Once(ctx, tc, "reserve", one); err != nil {
				return nil, err
			}
			_, twice = cairnq.Once(ctx, tc, "reserve", one)
			_, swallowed = cairnq.Once(ctx, tc, "refund", one) // where "charge" was recorded
			return "done anyway", nil
		}, nil)
		done := workUntil(t, c, changed, task.ID)
		if !errors.Is(twice, cairnq.ErrInvalidArgument) {
			t.Errorf("a name used twice: %v, want ErrInvalidArgument", twice)
		}
		var mismatch *cairnq.DurableMismatchError
		if !errors.As(swallowed, &mismatch) || mismatch.Position != 1 || mismatch.Recorded != "charge" || mismatch.Called != "refund" {
			t.Errorf("the changed step: %v", swallowed)
		}
		if !done.IsFailed() || done.Error == nil || done.Error.Code != "durable_mismatch" ||
			!strings.Contains(done.Error.Message, `"refund"`) || !strings.Contains(done.Error.Message, `"charge"`) {
			t.Errorf("task %s, error %+v; want failed for good with durable_mismatch", done.Status, done.Error)
		}
	})
}

// A step's record survives the end of the context the handler passed
// once fn has returned (a cancel, a deadline); a step whose fn panicked
// records nothing and leaves the next step free to run; a changed step
// fails the task for good even when the handler then settles it itself.
func TestDurableStepsHoldAgainstTheHandler(t *testing.T) {
	bothClients(t, func(t *testing.T, c *cairnq.Client) {
		var mu sync.Mutex
		charged := 0
		w := newWorker(t, c, &cairnq.WorkerOptions{RetryBackoff: cairnq.NoRetryBackoff})
		w.Handle("pay", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			cctx, cancel := context.WithCancel(ctx)
			r, err := cairnq.Once(cctx, tc, "charge", func(context.Context) (receipt, error) {
				mu.Lock()
				charged++
				mu.Unlock()
				cancel() // the caller's context ends after the side effect
				return receipt{ID: "r-9"}, nil
			})
			if err != nil {
				return nil, err
			}
			// A step whose fn panics records nothing; called again, it
			// runs (it is not "started while another step runs").
			panicked := false
			func() {
				defer func() { panicked = recover() != nil }()
				_, _ = cairnq.Once(ctx, tc, "flaky", func(context.Context) (int, error) {
					if tc.Attempt() == 1 {
						panic("boom")
					}
					return 1, nil
				})
			}()
			if panicked {
				if _, err := cairnq.Once(ctx, tc, "flaky", func(context.Context) (int, error) { return 1, nil }); err != nil {
					return nil, err
				}
			}
			if tc.Attempt() == 1 {
				return nil, errors.New("again")
			}
			return r.ID, nil
		}, nil)
		task, err := c.Submit(t.Context(), "pay", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		done := workUntil(t, c, w, task.ID)
		mu.Lock()
		n := charged
		mu.Unlock()
		if !done.IsSucceeded() || string(done.Result) != `"r-9"` || n != 1 {
			t.Fatalf("task %s result %s, charged %d times; want succeeded with r-9, charged once", done.Status, done.Result, n)
		}

		first := newWorker(t, c, &cairnq.WorkerOptions{RetryBackoff: cairnq.NoRetryBackoff})
		first.Handle("swallow", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			if _, err := cairnq.Once(ctx, tc, "a", func(context.Context) (int, error) { return 1, nil }); err != nil {
				return nil, err
			}
			return nil, errors.New("again")
		}, nil)
		task, err = c.Submit(t.Context(), "swallow", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := first.WorkOne(t.Context()); err != nil {
			t.Fatal(err)
		}
		changed := newWorker(t, c, &cairnq.WorkerOptions{RetryBackoff: cairnq.NoRetryBackoff})
		var succeedErr error
		changed.Handle("swallow", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			_, _ = cairnq.Once(ctx, tc, "b", func(context.Context) (int, error) { return 1, nil })
			succeedErr = tc.Succeed(ctx, "settled anyway")
			return nil, nil
		}, nil)
		done = workUntil(t, c, changed, task.ID)
		var mismatch *cairnq.DurableMismatchError
		if !done.IsFailed() || done.Error == nil || done.Error.Code != "durable_mismatch" || !errors.As(succeedErr, &mismatch) {
			t.Errorf("task %s (%+v), Succeed said %v; want failed for good with durable_mismatch", done.Status, done.Error, succeedErr)
		}
	})
}

// A step's policy retries its errors within the attempt: the step runs
// until it succeeds, and is recorded once; a Permanent error is not
// retried; the last error of the runs the policy allows goes to the
// handler, and the task's next attempt runs the step afresh.
func TestDurableStepPolicyRetriesWithinTheAttempt(t *testing.T) {
	bothClients(t, func(t *testing.T, c *cairnq.Client) {
		var mu sync.Mutex
		runs := map[string]int{}
		run := func(name string) int {
			mu.Lock()
			defer mu.Unlock()
			runs[name]++
			return runs[name]
		}
		policy := cairnq.StepPolicy{Attempts: 3, Backoff: time.Millisecond}
		w := newWorker(t, c, &cairnq.WorkerOptions{RetryBackoff: cairnq.NoRetryBackoff})
		w.Handle("flaky", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			v, err := cairnq.Once(ctx, tc, "call", func(context.Context) (int, error) {
				if n := run(tc.Name() + "/call"); n < 3 {
					return 0, fmt.Errorf("timeout %d", n)
				}
				return 7, nil
			}, policy)
			if err != nil {
				return nil, err
			}
			return cairnq.Once(ctx, tc, "never-enough", func(context.Context) (int, error) {
				if n := run(tc.Name() + "/never"); n < 5 {
					return 0, fmt.Errorf("down %d", n)
				}
				return v, nil
			}, policy)
		}, nil)
		w.Handle("permanent", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			return cairnq.Once(ctx, tc, "call", func(context.Context) (int, error) {
				run("permanent")
				return 0, cairnq.Permanent(errors.New("bad input"))
			}, policy)
		}, nil)
		flaky, err := c.Submit(t.Context(), "flaky", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := workUntil(t, c, w, flaky.ID); got.Status != cairnq.StatusSucceeded || string(got.Result) != "7" || got.Attempt != 2 {
			t.Fatalf("flaky: %s %s after %d attempts; want succeeded with 7 on attempt 2", got.Status, got.Result, got.Attempt)
		}
		if runs["flaky/call"] != 3 || runs["flaky/never"] != 5 {
			t.Fatalf("runs %v: want call 3 times (recorded on its third), never-enough 3 on attempt 1 and 2 on attempt 2", runs)
		}
		w.Handle("bad-policy", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			noop := func(context.Context) (int, error) { run("bad-policy"); return 0, nil }
			_, e1 := cairnq.Once(ctx, tc, "a", noop, cairnq.StepPolicy{Attempts: -1})
			_, e2 := cairnq.Once(ctx, tc, "b", noop, cairnq.StepPolicy{Backoff: -time.Second})
			_, e3 := cairnq.Once(ctx, tc, "c", noop, policy, policy)
			for _, err := range []error{e1, e2, e3} {
				if !errors.Is(err, cairnq.ErrInvalidArgument) {
					return nil, cairnq.Permanent(fmt.Errorf("a bad policy: %v, want ErrInvalidArgument", err))
				}
			}
			return "refused", nil
		}, nil)
		bad, err := c.Submit(t.Context(), "bad-policy", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := workUntil(t, c, w, bad.ID); got.Status != cairnq.StatusSucceeded || runs["bad-policy"] != 0 {
			t.Fatalf("bad policies: %s %+v, the step ran %d times; want refused without running", got.Status, got.Error, runs["bad-policy"])
		}
		perm, err := c.Submit(t.Context(), "permanent", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := workUntil(t, c, w, perm.ID); got.Status != cairnq.StatusFailed || runs["permanent"] != 1 {
			t.Fatalf("permanent: %s after %d runs; want failed after 1", got.Status, runs["permanent"])
		}
	})
}

// Many handlers' steps, recorded in shared statements on Postgres,
// beside a heartbeat that renews the same rows every few milliseconds:
// no statement deadlocks with another (a deadlock rolls one back and
// ends an attempt), so every task succeeds on its first attempt.
func TestDurableStepsBesideHeartbeats(t *testing.T) {
	bothClients(t, func(t *testing.T, c *cairnq.Client) {
		const n, steps = 200, 10
		w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 32,
			LeaseDuration: 10 * time.Second, HeartbeatInterval: 20 * time.Millisecond})
		w.Handle("busy", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			for k := range steps {
				if _, err := cairnq.Once(ctx, tc, fmt.Sprint("s", k), func(context.Context) (int, error) { return k, nil }); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}, nil)
		items := make([]cairnq.SubmitItem, n)
		for i := range items {
			items[i] = cairnq.SubmitItem{Name: "busy"}
		}
		tasks, err := c.SubmitMany(t.Context(), items)
		if err != nil {
			t.Fatal(err)
		}
		defer startWorker(t, w)()
		for _, task := range tasks {
			if got := waitTask(t, c, task.ID); got.Status != cairnq.StatusSucceeded || got.Attempt != 1 {
				t.Fatalf("task %s: %s on attempt %d (%+v); want succeeded on the first", task.ID, got.Status, got.Attempt, got.Error)
			}
		}
	})
}
