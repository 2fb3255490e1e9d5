package cairnq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/testkit/syncbuf"
	"github.com/ncruces/go-sqlite3"
)

func TestWorkerRunsAndCallReturnsResult(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	w := newWorker(t, c, &cairnq.WorkerOptions{PollInterval: time.Minute})
	if err := w.Handle("double", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var in struct{ N int }
		if err := tc.Decode(&in); err != nil {
			return nil, err
		}
		return map[string]int{"n": in.N * 2}, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	// With a one-minute poll, only the in-process submit wakeup lets the
	// worker see the task in time for the five-second wait.
	got, err := c.Call(context.Background(), "double", map[string]int{"N": 21}, &cairnq.CallOptions{WaitOptions: cairnq.WaitOptions{Timeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Result) != `{"n":42}` || got.WorkerID != w.ID() || got.Attempt != 1 {
		t.Errorf("result %s by %s attempt %d", got.Result, got.WorkerID, got.Attempt)
	}
}

func TestTypedTaskDef(t *testing.T) {
	t.Parallel()
	type in struct{ A, B int }
	type out struct{ Sum int }
	add := cairnq.Define[in, out]("add")
	c := openTemp(t, nil)
	w := newWorker(t, c, nil)
	if err := add.Handle(w, func(ctx context.Context, tc *cairnq.TaskContext, p in) (out, error) {
		return out{Sum: p.A + p.B}, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	ctx := context.Background()
	sum, err := add.Call(ctx, c, in{A: 2, B: 3}, nil)
	if err != nil || sum.Sum != 5 {
		t.Fatalf("typed call: %+v %v", sum, err)
	}
	// A caller in another language only has the string; the payload there
	// may not fit P, which fails the task for good.
	_, err = c.Call(ctx, "add", []int{1, 2}, nil)
	var tf *cairnq.TaskFailedError
	if !errors.As(err, &tf) || tf.Envelope.Code != "bad_payload" || tf.Task.Attempt != 1 {
		t.Errorf("bad payload: %v", err)
	}
}

func TestCancelWinsOverCompleteAndFail(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	w := newWorker(t, c, &cairnq.WorkerOptions{HeartbeatInterval: 10 * time.Millisecond, LeaseDuration: 5 * time.Second, Concurrency: 2})
	started := make(chan string, 2)
	handler := func(fail bool) cairnq.Handler {
		return func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			started <- tc.ID()
			<-ctx.Done() // the heartbeat sees the cancel request and cancels us
			if !errors.Is(context.Cause(ctx), cairnq.ErrTaskCanceled) {
				return nil, fmt.Errorf("context ended for another reason: %v", context.Cause(ctx))
			}
			if ok, err := tc.Canceled(context.Background()); !ok || err != nil {
				return nil, fmt.Errorf("Canceled() = %v, %v", ok, err)
			}
			if fail {
				return nil, errors.New("gave up")
			}
			return "a result nobody will see", nil
		}
	}
	w.Handle("returns", handler(false), nil)
	w.Handle("raises", handler(true), nil)
	startWorker(t, w)
	ctx := context.Background()
	for _, name := range []string{"returns", "raises"} {
		task, err := c.Submit(ctx, name, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if id := <-started; id != task.ID {
			t.Fatalf("started %s, want %s", id, task.ID)
		}
		if _, err := c.Cancel(ctx, task.ID); err != nil {
			t.Fatal(err)
		}
		final := waitTask(t, c, task.ID)
		if final.Status != cairnq.StatusCanceled || final.Result != nil || !final.LeaseUntil.IsZero() {
			t.Errorf("%s: %s result %s lease %v", name, final.Status, final.Result, final.LeaseUntil)
		}
	}
}

func TestCancelWinsOverLeaseExpiry(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	ctx := context.Background()
	task, _ := c.Submit(ctx, "job", nil, nil)
	// A worker claims it and dies; the task is canceled while it is dead.
	if got, err := cairnq.StoreOf(c).Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "dead", Lease: 50 * time.Millisecond}); err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	c.Cancel(ctx, task.ID)
	w := newWorker(t, c, nil)
	var ran atomic.Bool
	w.Handle("job", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { ran.Store(true); return nil, nil }, nil)
	startWorker(t, w)
	final := waitTask(t, c, task.ID)
	if final.Status != cairnq.StatusCanceled || final.Error != nil || ran.Load() {
		t.Errorf("canceled task whose worker died: %s error %v ran %v", final.Status, final.Error, ran.Load())
	}
}

func TestSecondWorkerRecoversAbandonedClaim(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	ctx := context.Background()
	task, _ := c.Submit(ctx, "job", map[string]int{"n": 1}, nil)
	if got, _ := cairnq.StoreOf(c).Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "crashed", Lease: 100 * time.Millisecond}); len(got) != 1 {
		t.Fatal("claim failed")
	}
	w := newWorker(t, c, nil)
	w.Handle("job", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return tc.Attempt(), nil }, nil)
	startWorker(t, w)
	final := waitTask(t, c, task.ID)
	if final.Status != cairnq.StatusSucceeded || final.Attempt != 2 || string(final.Result) != "2" || final.WorkerID != w.ID() {
		t.Errorf("recovered task: %s attempt %d result %s worker %s", final.Status, final.Attempt, final.Result, final.WorkerID)
	}
}

// A worker that always finds work skips the probe and recovers leases
// only once per poll interval, not on every claim; it must still recover
// them while busy rather than only when its backlog runs dry.
func TestBusyWorkerStillRecoversExpiredLeases(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	ctx := context.Background()
	const fillers = 3000
	for i := range fillers {
		if _, err := c.Submit(ctx, "filler", i, nil); err != nil {
			t.Fatal(err)
		}
	}
	task, _ := c.Submit(ctx, "job", nil, &cairnq.SubmitOptions{Priority: 10})
	if got, _ := cairnq.StoreOf(c).Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, Names: []string{"job"}, WorkerID: "crashed", Lease: 100 * time.Millisecond}); len(got) != 1 {
		t.Fatal("claim failed")
	}
	var ran atomic.Int64
	remaining := make(chan int64, 1)
	w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 1})
	w.Handle("filler", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { ran.Add(1); return nil, nil }, nil)
	w.Handle("job", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		remaining <- fillers - ran.Load()
		return tc.Attempt(), nil
	}, nil)
	startWorker(t, w)
	final := waitTask(t, c, task.ID)
	if final.Status != cairnq.StatusSucceeded || final.Attempt != 2 {
		t.Fatalf("recovered task: %s attempt %d", final.Status, final.Attempt)
	}
	if left := <-remaining; left <= 0 {
		t.Errorf("the expired lease was recovered only after the backlog ran dry")
	}
}

func TestLostLeaseFlagsOnlyItsOwnContext(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/tasks.db"
	c, err := cairnq.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() }) // after the worker's own cleanup stops it
	w := newWorker(t, c, &cairnq.WorkerOptions{HeartbeatInterval: 10 * time.Millisecond})
	type seen struct{ stolen, neighbour bool }
	result := make(chan seen, 1)
	w.HandleBatch("pair", 2, func(ctx context.Context, tcs []*cairnq.TaskContext) (map[string]any, error) {
		if len(tcs) != 2 {
			return nil, fmt.Errorf("batch of %d", len(tcs))
		}
		// Another worker takes the first task over (as after an expiry).
		if err := execSQLErr(path, fmt.Sprintf("UPDATE cairnq_tasks SET worker_id = 'thief' WHERE id = '%s'", tcs[0].ID())); err != nil {
			return nil, err
		}
		deadline := time.Now().Add(10 * time.Second)
		for !tcs[0].LostLease() && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		err := tcs[0].Progress(ctx, 0.5)
		result <- seen{tcs[0].LostLease() && errors.Is(err, cairnq.ErrLostLease), tcs[1].LostLease() || ctx.Err() != nil}
		return nil, nil
	}, nil)
	ctx := context.Background()
	a, _ := c.Submit(ctx, "pair", nil, &cairnq.SubmitOptions{Priority: 1})
	b, _ := c.Submit(ctx, "pair", nil, nil)
	startWorker(t, w)
	got := <-result
	if !got.stolen || got.neighbour {
		t.Fatalf("stolen task flagged %v, neighbour affected %v", got.stolen, got.neighbour)
	}
	if final := waitTask(t, c, b.ID); final.Status != cairnq.StatusSucceeded {
		t.Errorf("neighbour ended %s", final.Status)
	}
	if stolen, _ := c.Get(ctx, a.ID); stolen.Status != cairnq.StatusRunning || stolen.WorkerID != "thief" {
		t.Errorf("the stolen task was written by the old worker: %s %s", stolen.Status, stolen.WorkerID)
	}
}

func TestMaxRunAbandonsAttempt(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	w := newWorker(t, c, &cairnq.WorkerOptions{MaxRun: 50 * time.Millisecond, RetryBackoff: cairnq.NoRetryBackoff})
	causes := make(chan error, 2)
	w.Handle("hang", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		// A zombie's write must not land.
		return nil, tc.Succeed(context.Background(), "late")
	}, nil)
	startWorker(t, w)
	task, _ := c.Submit(context.Background(), "hang", nil, &cairnq.SubmitOptions{MaxAttempts: 2})
	final := waitTask(t, c, task.ID)
	if final.Status != cairnq.StatusFailed || final.Attempt != 2 || final.Error == nil ||
		final.Error.Code != "handler_timeout" || !final.Error.Retryable {
		t.Fatalf("after MaxRun twice: %s attempt %d error %+v", final.Status, final.Attempt, final.Error)
	}
	if cause := <-causes; !errors.Is(cause, cairnq.ErrLostLease) {
		t.Errorf("handler context ended with %v, want a lost lease", cause)
	}
}

func TestBatchLeftoversSettleByHowTheCallEnded(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	w := newWorker(t, c, &cairnq.WorkerOptions{RetryBackoff: time.Hour, RetryBackoffMax: 2 * time.Hour})
	batch := func(mode string) cairnq.BatchHandler {
		return func(ctx context.Context, tcs []*cairnq.TaskContext) (map[string]any, error) {
			if len(tcs) != 3 {
				return nil, fmt.Errorf("batch of %d, want 3", len(tcs))
			}
			// The first task settles itself, twice: the second is a no-op.
			if err := tcs[0].Fail(ctx, &cairnq.TaskError{Code: "mine", Message: "own failure"}); err != nil {
				return nil, err
			}
			if err := tcs[0].Succeed(ctx, "ignored"); err != nil {
				return nil, err
			}
			switch mode {
			case "return":
				return map[string]any{tcs[1].ID(): "one", "task_elsewhere": "ignored"}, nil
			case "error":
				return nil, errors.New("transient")
			}
			return nil, &cairnq.TaskError{Code: "fatal", Message: "bad batch"}
		}
	}
	modes := []string{"return", "error", "permanent"}
	for _, m := range modes {
		if err := w.HandleBatch("b-"+m, 3, batch(m), nil); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	groups := map[string][]*cairnq.Task{}
	for _, m := range modes {
		for i := range 3 {
			task, err := c.Submit(ctx, "b-"+m, nil, &cairnq.SubmitOptions{Priority: 3 - i})
			if err != nil {
				t.Fatal(err)
			}
			groups[m] = append(groups[m], task)
		}
	}
	startWorker(t, w)
	settledOrRequeued := func(id string) *cairnq.Task {
		var got *cairnq.Task
		waitFor(t, "task "+id+" to leave running", func() bool {
			got, _ = c.Get(ctx, id)
			return got != nil && got.Status != cairnq.StatusRunning && got.Attempt > 0
		})
		return got
	}
	for _, m := range modes {
		first := settledOrRequeued(groups[m][0].ID)
		// A TaskError is permanent unless it says Retryable.
		if first.Status != cairnq.StatusFailed || first.Error == nil || first.Error.Code != "mine" {
			t.Errorf("%s: self-settled task %s %+v", m, first.Status, first.Error)
		}
		for i, task := range groups[m][1:] {
			got := settledOrRequeued(task.ID)
			switch m {
			case "return":
				want := "null"
				if i == 0 {
					want = `"one"`
				}
				if got.Status != cairnq.StatusSucceeded || string(orNull(got.Result)) != want {
					t.Errorf("return leftover %d: %s %s", i, got.Status, got.Result)
				}
			case "error":
				if got.Status != cairnq.StatusQueued || got.Error.Code != "handler_error" || !got.RunAt.After(time.Now().Add(20*time.Minute)) {
					t.Errorf("error leftover %d: %s %+v run at %v", i, got.Status, got.Error, got.RunAt)
				}
			case "permanent":
				if got.Status != cairnq.StatusFailed || got.Error.Code != "fatal" || got.Error.Retryable {
					t.Errorf("permanent leftover %d: %s %+v", i, got.Status, got.Error)
				}
			}
		}
	}
}

func orNull(b json.RawMessage) json.RawMessage {
	if b == nil {
		return json.RawMessage("null")
	}
	return b
}

func TestResourceCapacityNeverExceeded(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 8, Resources: map[string]int{"gpu": 2}})
	var now, peak, perName, peakName atomic.Int32
	track := func(cur, top *atomic.Int32) func() {
		n := cur.Add(1)
		for {
			old := top.Load()
			if n <= old || top.CompareAndSwap(old, n) {
				break
			}
		}
		return func() { cur.Add(-1) }
	}
	slow := func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		defer track(&now, &peak)()
		if tc.Name() == "embed" {
			defer track(&perName, &peakName)()
		}
		time.Sleep(5 * time.Millisecond) // holds the slot long enough to overlap
		return nil, nil
	}
	w.Handle("render", slow, &cairnq.HandlerOptions{Resource: "gpu"})
	w.Handle("embed", slow, &cairnq.HandlerOptions{Resource: "gpu", Concurrency: 1})
	if err := w.Handle("other", slow, &cairnq.HandlerOptions{Resource: "tpu"}); !errors.Is(err, cairnq.ErrInvalidArgument) {
		t.Errorf("undeclared resource accepted: %v", err)
	}
	ctx := context.Background()
	var ids []string
	for i := range 40 {
		name := "render"
		if i%2 == 0 {
			name = "embed"
		}
		task, _ := c.Submit(ctx, name, nil, nil)
		ids = append(ids, task.ID)
	}
	startWorker(t, w)
	for _, id := range ids {
		if got := waitTask(t, c, id); got.Status != cairnq.StatusSucceeded {
			t.Fatalf("%s ended %s", id, got.Status)
		}
	}
	if p := peak.Load(); p > 2 || p < 1 {
		t.Errorf("gpu calls at once peaked at %d, capacity 2", p)
	}
	if p := peakName.Load(); p != 1 {
		t.Errorf("embed calls at once peaked at %d, its own concurrency is 1", p)
	}
}

func TestDisjointWorkersOnOneQueue(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	ok := func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return tc.WorkerID(), nil }
	wa := newWorker(t, c, &cairnq.WorkerOptions{ID: "wa", Concurrency: 4})
	wa.Handle("a", ok, nil)
	wb := newWorker(t, c, &cairnq.WorkerOptions{ID: "wb", Concurrency: 4})
	wb.Handle("b", ok, nil)
	startWorker(t, wa)
	startWorker(t, wb)
	ctx := context.Background()
	var tasks []*cairnq.Task
	for i := range 60 {
		name := []string{"a", "b"}[i%2]
		task, _ := c.Submit(ctx, name, nil, nil)
		tasks = append(tasks, task)
	}
	for _, task := range tasks {
		got := waitTask(t, c, task.ID)
		want := `"w` + task.Name + `"`
		if got.Status != cairnq.StatusSucceeded || string(got.Result) != want || got.Attempt != 1 {
			t.Errorf("%s (%s): %s by %s, attempt %d", task.ID, task.Name, got.Status, got.Result, got.Attempt)
		}
	}
}

// On Postgres the drained calls' completions go through the completer,
// whose writes Run waits for too.
func TestGracefulDrainAndNoGoroutineOutlivesRun(t *testing.T) {
	t.Parallel()
	onBothBackends(t, nil, testGracefulDrain)
}

func testGracefulDrain(t *testing.T, c *cairnq.Client) {
	w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 4, ShutdownTimeout: 10 * time.Second, MaxRun: time.Minute})
	started := make(chan struct{}, 4)
	release := make(chan struct{})
	w.Handle("job", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		started <- struct{}{}
		<-release
		return "drained", nil
	}, nil)
	ctx := context.Background()
	var ids []string
	for range 4 {
		task, _ := c.Submit(ctx, "job", nil, nil)
		ids = append(ids, task.ID)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	for range 4 {
		<-started
	}
	cancel() // stop claiming; the four calls in flight may finish
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) while calls were still running", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if got, _ := c.Get(ctx, id); got.Status != cairnq.StatusSucceeded {
			t.Errorf("%s: %s after drain", id, got.Status)
		}
	}
	if leaked := workerGoroutines(w); leaked != "" {
		t.Errorf("goroutines outlived Run:\n%s", leaked)
	}
	if err := w.Run(ctx); !errors.Is(err, cairnq.ErrWorkerStarted) {
		t.Errorf("second Run: %v", err)
	}
}

func TestShutdownPastDeadlineCancelsHandlers(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	w := newWorker(t, c, &cairnq.WorkerOptions{ShutdownTimeout: 30 * time.Millisecond})
	started := make(chan struct{})
	w.Handle("stubborn", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}, nil)
	task, _ := c.Submit(context.Background(), "stubborn", nil, nil)
	stop := startWorker(t, w)
	<-started
	stop() // returns only once the handler has returned
	got, _ := c.Get(context.Background(), task.ID)
	// The abandoned attempt writes nothing; its lease lapses and another
	// worker will redeliver it.
	if got.Status != cairnq.StatusRunning {
		t.Errorf("abandoned task is %s, want still running until its lease lapses", got.Status)
	}
}

// A batch's tasks share one call context, which no task's cancel owns:
// a shutdown past its deadline must still end it, with its cause.
func TestShutdownPastDeadlineCancelsBatchHandlers(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	w := newWorker(t, c, &cairnq.WorkerOptions{ShutdownTimeout: 30 * time.Millisecond})
	started := make(chan struct{})
	cause := make(chan error, 1)
	if err := w.HandleBatch("stubborn", 2, func(ctx context.Context, tcs []*cairnq.TaskContext) (map[string]any, error) {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil, ctx.Err()
	}, nil); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := c.Submit(context.Background(), "stubborn", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	stop := startWorker(t, w)
	<-started
	stop()
	select {
	case err := <-cause:
		if err == nil || !strings.Contains(err.Error(), "shut down past its deadline") {
			t.Errorf("the batch's context ended with %v", err)
		}
	default:
		t.Fatal("the batch handler's context was not canceled by the shutdown")
	}
}

func TestPanicIsRecordedAndWorkerContinues(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	w := newWorker(t, c, nil)
	w.Handle("boom", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { panic("kaboom") }, nil)
	w.Handle("fine", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return "ok", nil }, nil)
	startWorker(t, w)
	ctx := context.Background()
	boom, _ := c.Submit(ctx, "boom", nil, &cairnq.SubmitOptions{MaxAttempts: 1})
	fine, _ := c.Submit(ctx, "fine", nil, nil)
	got := waitTask(t, c, boom.ID)
	if got.Status != cairnq.StatusFailed || got.Error.Code != "handler_panic" || got.Error.Message != "kaboom" ||
		!got.Error.Retryable || !strings.Contains(fmt.Sprint(got.Error.Details["stack"]), "worker_test.go") {
		t.Errorf("panicking task: %s %+v", got.Status, got.Error)
	}
	if got := waitTask(t, c, fine.ID); got.Status != cairnq.StatusSucceeded {
		t.Errorf("next task after a panic: %s", got.Status)
	}
}

// A handler that calls runtime.Goexit (t.FailNow in a test's handler)
// returns nothing: the worker reports it, settles nothing, and leaves the
// task to its lease, whether the handler runs on the call's goroutine (no
// MaxRun) or on one of its own. It used to read as a success with no
// result.
func TestHandlerThatCallsGoexitIsLeftToItsLease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		maxRun time.Duration
	}{{"no MaxRun", 0}, {"MaxRun", time.Hour}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := openTemp(t, nil)
			var mu sync.Mutex
			var reported []string
			w := newWorker(t, c, &cairnq.WorkerOptions{
				// One slot: a call that kept it would hold up the task after.
				Concurrency:   1,
				LeaseDuration: cairnq.MinLeaseDuration,
				MaxRun:        tc.maxRun,
				RetryBackoff:  cairnq.NoRetryBackoff,
				OnError: func(err error, phase cairnq.ErrorPhase, taskID string) {
					mu.Lock()
					reported = append(reported, fmt.Sprintf("%s %s: %v", phase, taskID, err))
					mu.Unlock()
				},
			})
			w.Handle("exits", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
				if tc.Attempt() == 1 {
					runtime.Goexit()
				}
				return "second", nil
			}, nil)
			w.Handle("fine", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return "ok", nil }, nil)
			startWorker(t, w)
			ctx := context.Background()
			exits, err := c.Submit(ctx, "exits", nil, &cairnq.SubmitOptions{MaxAttempts: 3})
			if err != nil {
				t.Fatal(err)
			}
			got := waitTask(t, c, exits.ID)
			if got.Status != cairnq.StatusSucceeded || got.Attempt != 2 || string(got.Result) != `"second"` {
				t.Errorf("task whose first attempt called Goexit: %s on attempt %d with %s, want succeeded on attempt 2 with \"second\"",
					got.Status, got.Attempt, got.Result)
			}
			fine, err := c.Submit(ctx, "fine", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := waitTask(t, c, fine.ID); got.Status != cairnq.StatusSucceeded {
				t.Errorf("a task after the Goexit: %s, want succeeded", got.Status)
			}
			want := fmt.Sprintf("%s %s: ", cairnq.PhaseExecute, exits.ID)
			mu.Lock()
			defer mu.Unlock()
			if !slices.ContainsFunc(reported, func(r string) bool {
				return strings.HasPrefix(r, want) && strings.Contains(r, "runtime.Goexit")
			}) {
				t.Errorf("reported %q, want the Goexit of %s's handler", reported, exits.ID)
			}
		})
	}
}

func TestUnserializableResultFailsForGood(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	w := newWorker(t, c, nil)
	w.Handle("nan", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return math.NaN(), nil }, nil)
	startWorker(t, w)
	task, _ := c.Submit(context.Background(), "nan", nil, nil)
	got := waitTask(t, c, task.ID)
	if got.Status != cairnq.StatusFailed || got.Attempt != 1 || got.Error.Code != "unserializable_result" || got.Error.Retryable {
		t.Errorf("NaN result: %s attempt %d %+v", got.Status, got.Attempt, got.Error)
	}
}

func TestRetryBackoffAndTaskErrors(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	w := newWorker(t, c, &cairnq.WorkerOptions{RetryBackoff: 200 * time.Millisecond})
	w.Handle("flaky", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return nil, fmt.Errorf("attempt %d failed", tc.Attempt())
	}, nil)
	w.Handle("fatal", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return nil, cairnq.Permanent(errors.New("no point retrying"))
	}, nil)
	startWorker(t, w)
	ctx := context.Background()
	flaky, _ := c.Submit(ctx, "flaky", nil, nil)
	fatal, _ := c.Submit(ctx, "fatal", nil, nil)
	var got *cairnq.Task
	waitFor(t, "a failure's retry to be queued", func() bool {
		got, _ = c.Get(ctx, flaky.ID)
		return got.Error != nil && got.Status == cairnq.StatusQueued
	})
	// Equal jitter: a retry waits between half its base and the base,
	// which doubles with each attempt (a loaded machine may read the
	// task after its second failure).
	base := 200 * time.Millisecond << max(got.Attempt-1, 0)
	if wait := got.RunAt.Sub(got.UpdatedAt); got.Status != cairnq.StatusQueued || wait < base/2 || wait > base {
		t.Errorf("retry after attempt %d: %s, due %v after the failure, want between %v and %v", got.Attempt, got.Status, wait, base/2, base)
	}
	final := waitTask(t, c, flaky.ID)
	if final.Status != cairnq.StatusFailed || final.Attempt != 3 || final.Error.Message != "attempt 3 failed" || final.Error.Type != "Error" {
		t.Errorf("after three attempts: %s %d %+v", final.Status, final.Attempt, final.Error)
	}
	if got := waitTask(t, c, fatal.ID); got.Status != cairnq.StatusFailed || got.Attempt != 1 || got.Error.Retryable {
		t.Errorf("permanent error: %s attempt %d %+v", got.Status, got.Attempt, got.Error)
	}
}

func TestTaskContextWritesAndChildren(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 2})
	w.Handle("parent", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		if err := tc.Report(ctx, 0.25, "starting"); err != nil {
			return nil, err
		}
		if err := tc.Progress(ctx, 0.5); err != nil { // the message is kept
			return nil, err
		}
		if err := tc.Heartbeat(ctx); err != nil {
			return nil, err
		}
		child, err := tc.Submit(ctx, "child", map[string]string{"from": tc.ID()}, nil)
		if err != nil {
			return nil, err
		}
		done, err := tc.Wait(ctx, child.ID, nil)
		if err != nil {
			return nil, err
		}
		t, _ := c.Get(ctx, tc.ID())
		return map[string]any{"child": child, "done": done.Status, "progress": *t.Progress, "message": *t.Message}, nil
	}, nil)
	w.Handle("child", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return "kid", nil }, nil)
	startWorker(t, w)
	parent, _ := c.Submit(context.Background(), "parent", nil, &cairnq.SubmitOptions{CorrelationID: "corr-1"})
	got := waitTask(t, c, parent.ID)
	var res struct {
		Child struct {
			ParentID      string `json:"parent_id"`
			RootID        string `json:"root_id"`
			CorrelationID string `json:"correlation_id"`
		}
		Done     string
		Progress float64
		Message  string
	}
	if err := got.DecodeResult(&res); err != nil {
		t.Fatalf("%s: %v (%+v)", got.Result, err, got.Error)
	}
	if res.Child.ParentID != parent.ID || res.Child.RootID != parent.ID || res.Child.CorrelationID != "corr-1" ||
		res.Done != "succeeded" || res.Progress != 0.5 || res.Message != "starting" {
		t.Errorf("parent saw %+v", res)
	}
}

func TestWorkerOptionsValidated(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	for _, o := range []cairnq.WorkerOptions{
		{Concurrency: -1}, {LeaseDuration: -time.Second}, {Resources: map[string]int{"gpu": 0}},
		{Queues: []string{""}}, {RetryBackoff: -5 * time.Second},
	} {
		if _, err := cairnq.NewWorker(c, &o); !errors.Is(err, cairnq.ErrInvalidArgument) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	w := newWorker(t, c, nil)
	if err := w.HandleBatch("b", 0, nil, nil); !errors.Is(err, cairnq.ErrInvalidArgument) {
		t.Errorf("nil batch handler: %v", err)
	}
	noop := func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return nil, nil }
	w.Handle("x", noop, nil)
	if err := w.Handle("x", noop, nil); !errors.Is(err, cairnq.ErrInvalidArgument) {
		t.Errorf("duplicate handler: %v", err)
	}
	empty := newWorker(t, c, nil)
	if err := empty.Run(context.Background()); !errors.Is(err, cairnq.ErrInvalidArgument) {
		t.Errorf("Run without handlers: %v", err)
	}
}

func TestRunEndsWhenTheStoreCloses(t *testing.T) {
	t.Parallel()
	c, err := cairnq.Open(context.Background(), t.TempDir()+"/tasks.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(t, c, nil)
	w.Handle("x", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return nil, nil }, nil)
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	c.Close()
	if err := <-done; !errors.Is(err, cairnq.ErrClosed) {
		t.Errorf("Run after the store closed: %v, want ErrClosed", err)
	}
}

// Another process holding the write lock past the busy timeout must not
// cost a completion (and with it a second run of the task): the worker
// retries the settlement while its lease holds.
func TestSettlementSurvivesALongLockFromAnotherProcess(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/tasks.db"
	c, err := cairnq.Open(context.Background(), path, &cairnq.SQLiteOptions{BusyTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	w := newWorker(t, c, &cairnq.WorkerOptions{HeartbeatInterval: time.Second})
	entered, release := make(chan struct{}), make(chan struct{})
	w.Handle("x", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		close(entered)
		<-release
		return "done", nil
	}, nil)
	task, _ := c.Submit(context.Background(), "x", nil, nil)
	startWorker(t, w)
	<-entered

	other, err := sqlite3.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Exec("BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	close(release)
	time.Sleep(200 * time.Millisecond) // ten busy timeouts with the lock held
	if err := other.Exec("COMMIT"); err != nil {
		t.Fatal(err)
	}
	got := waitTask(t, c, task.ID)
	if got.Status != cairnq.StatusSucceeded || got.Attempt != 1 {
		t.Errorf("after a long foreign lock: %s attempt %d", got.Status, got.Attempt)
	}
}

// MaxInFlightBytes stops claiming while running payloads fill it; a payload
// larger than the whole budget still runs, alone.
func TestMaxInFlightBytesBoundsRunningPayloads(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 8, MaxInFlightBytes: 100, ClaimBatch: 1})
	var now, peak atomic.Int32
	w.Handle("big", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		n := now.Add(1)
		defer now.Add(-1)
		for {
			old := peak.Load()
			if n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond) // long enough for the loop to try another claim
		return nil, nil
	}, nil)
	ctx := context.Background()
	payload := map[string]string{"blob": strings.Repeat("x", 120)} // over the whole budget
	var ids []string
	for range 6 {
		task, _ := c.Submit(ctx, "big", payload, nil)
		ids = append(ids, task.ID)
	}
	startWorker(t, w)
	for _, id := range ids {
		if got := waitTask(t, c, id); got.Status != cairnq.StatusSucceeded {
			t.Fatalf("%s: %s", id, got.Status)
		}
	}
	if p := peak.Load(); p != 1 {
		t.Errorf("%d calls with 120-byte payloads ran at once under a 100-byte budget, want 1", p)
	}
}

// A worker whose last claim drew tasks claims again without subscribing
// to wakeups; when that claim comes back empty it must subscribe before
// it sleeps, or a submit then would wait for its poll (a minute here).
// The first claim's handlers hold their slots meanwhile, so no call
// finishing wakes the worker instead.
func TestWorkerWakesAfterBusyPollWithoutPolling(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tasks.db")
	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// A second client on the file has a store of its own: only the watch
	// of the database's WAL carries its submits to the worker.
	other, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	const held = 4
	for range held {
		if _, err := c.Submit(ctx, "hold", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	w := newWorker(t, c, &cairnq.WorkerOptions{PollInterval: time.Minute, Concurrency: 8})
	release := make(chan struct{})
	var holding atomic.Int64
	if err := w.Handle("hold", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		holding.Add(1)
		<-release
		return nil, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("quick", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return nil, nil }, nil); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	defer close(release)
	waitFor(t, "the held calls to start", func() bool { return holding.Load() == held })
	for _, from := range []struct {
		name string
		c    *cairnq.Client
	}{{"this client", c}, {"another client", other}} {
		got, err := from.c.Call(ctx, "quick", nil, &cairnq.CallOptions{WaitOptions: cairnq.WaitOptions{Timeout: 20 * time.Second}})
		if err != nil || got.Status != cairnq.StatusSucceeded {
			t.Fatalf("call from %s: %+v %v", from.name, got, err)
		}
	}
}

// TestNoLeaseLostWarningForASettledTask: a heartbeat whose reply arrives
// after a settlement committed and before the worker saw the
// settlement's own answer finds the task no longer running. That is the
// settlement, not a lost lease: the worker must not warn "task lease
// lost" for a task it settled. Heartbeats every 10ms beside 16 slots of
// short calls make the window wide open.
func TestNoLeaseLostWarningForASettledTask(t *testing.T) {
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	onBothBackends(t, &cairnq.Options{Logger: log}, func(t *testing.T, c *cairnq.Client) {
		const n = 1500
		var ran atomic.Int64
		w := newWorker(t, c, &cairnq.WorkerOptions{
			Concurrency: 16, LeaseDuration: 2 * time.Second, HeartbeatInterval: cairnq.MinHeartbeatInterval,
			Logger: log,
		})
		if err := w.Handle("short", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			ran.Add(1)
			time.Sleep(time.Millisecond) // the call's own work
			return "ok", nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		for i := range n {
			if _, err := c.Submit(ctx, "short", i, nil); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "every task to succeed", func() bool {
			st, err := c.Stats(ctx, "")
			return err == nil && st["default"].Succeeded == n
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := ran.Load(); got != n {
			t.Errorf("%d calls for %d tasks: a lease was really lost", got, n)
		}
		if strings.Contains(logs.String(), "lease lost") {
			t.Errorf("a settled task was reported as having lost its lease:\n%s", logs.String())
		}
	})
}
