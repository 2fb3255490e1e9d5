package conformance_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/conformance"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
	"github.com/cairnq/cairnq-go/internal/testkit/syncbuf"
	"github.com/cairnq/cairnq-go/protocol"
)

// faultyExecutor is a real pgx executor whose statements fail, as a dropped
// connection fails them (io.ErrUnexpectedEOF, no SQLSTATE), while the
// test says so: every statement while down is set, and the next failNext
// statements whose SQL is match.
type faultyExecutor struct {
	executor.Executor
	match    string
	failNext atomic.Int32
	down     atomic.Bool
	failed   atomic.Int32 // statements failed so far
}

func (f *faultyExecutor) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	if f.down.Load() || (sql == f.match && f.failNext.Add(-1) >= 0) {
		f.failed.Add(1)
		return nil, io.ErrUnexpectedEOF
	}
	return f.Executor.Query(ctx, sql, args...)
}

// faultyClient opens a client over a fresh database through f, which wraps
// a pgx executor; both are closed with the test.
func faultyClient(t *testing.T, f *faultyExecutor) *cairnq.Client {
	t.Helper()
	ctx := context.Background()
	ex, err := cairnqpgx.Open(ctx, pgtest.DSN(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	f.Executor = ex
	c, err := cairnq.OpenPostgres(ctx, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A settlement that fails on a connection error is tried again while the
// lease holds: the task succeeds on its first and only run. Before, only
// ErrBusy was retried, and the task ran again once its lease expired.
func TestPostgresSettlementRetriedAfterConnectionError(t *testing.T) {
	t.Parallel()
	f := &faultyExecutor{match: protocol.Statements(protocol.Postgres).Get("complete_many").SQL}
	f.failNext.Store(3)
	c := faultyClient(t, f)
	var runs atomic.Int32
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("once", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		runs.Add(1)
		return "done", nil
	}, nil)
	runWorker(t, w)
	task, err := c.Submit(context.Background(), "once", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := pgWaitTask(t, c, task.ID)
	if got.Status != cairnq.StatusSucceeded || got.Attempt != 1 || runs.Load() != 1 {
		t.Fatalf("task %s at attempt %d after %d runs, want succeeded on its one run", got.Status, got.Attempt, runs.Load())
	}
	if n := f.failed.Load(); n != 3 {
		t.Fatalf("%d settlements failed, want the 3 injected", n)
	}
}

// A Wait whose polls meet an outage keeps waiting while its timeout lasts,
// and returns the task once it finishes. Before, the first failed poll
// ended the wait with most of its timeout left.
func TestPostgresWaitRidesOutAnOutage(t *testing.T) {
	t.Parallel()
	f := &faultyExecutor{}
	c := faultyClient(t, f)
	ctx := context.Background()
	task, err := c.Submit(ctx, "later", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var final *cairnq.Task
	go func() {
		var err error
		final, err = c.Wait(ctx, task.ID, &cairnq.WaitOptions{Timeout: time.Minute, PollInterval: 10 * time.Millisecond, MaxPollInterval: 20 * time.Millisecond})
		done <- err
	}()
	f.down.Store(true)
	for f.failed.Load() < 3 { // the wait's polls fail for a while
		select {
		case err := <-done:
			t.Fatalf("Wait ended during the outage: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	f.down.Store(false)
	// The task finishes, settled through the store directly.
	st := conformance.StoreOf(c)
	claimed, err := st.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{cairnq.DefaultQueue}, WorkerID: "w"})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %d tasks, %v", len(claimed), err)
	}
	if _, err := st.Complete(ctx, task.ID, "w", 7); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Wait after the outage: %v", err)
	}
	if final.Status != cairnq.StatusSucceeded {
		t.Fatalf("Wait returned %s", final.Status)
	}
}

// After Close, every call on a Postgres client fails with ErrClosed, as on
// SQLite, and a worker's Run returns instead of logging failed claims.
func TestPostgresClosedClientSaysClosed(t *testing.T) {
	t.Parallel()
	c := faultyClient(t, &faultyExecutor{})
	ctx := context.Background()
	task, err := c.Submit(ctx, "x", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("y", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return nil, nil }, nil)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, task.ID); !errors.Is(err, cairnq.ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
	if _, err := c.Wait(ctx, task.ID, nil); !errors.Is(err, cairnq.ErrClosed) {
		t.Errorf("Wait after Close: %v, want ErrClosed", err)
	}
	if _, err := c.Submit(ctx, "x", nil, nil); !errors.Is(err, cairnq.ErrClosed) {
		t.Errorf("Submit after Close: %v, want ErrClosed", err)
	}
	select {
	case err := <-ran:
		if !errors.Is(err, cairnq.ErrClosed) {
			t.Errorf("Run on a closed client: %v, want ErrClosed", err)
		}
	case <-time.After(time.Minute): // a hang detector
		t.Fatal("Run did not return after its client closed")
	}
}

// A result or an error message holding a NUL character is recorded the
// same on Postgres as on SQLite: the result fails the task for good as
// unserializable_result, the message is stored cleaned. Before, Postgres
// refused both writes (22P05) and the task ran until its attempts ran out.
func TestPostgresNULInResultAndErrorIsRecorded(t *testing.T) {
	t.Parallel()
	c := pgClient(t, pgtest.DSN(t), "")
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("nul-result", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return map[string]string{"s": "a\x00b"}, nil
	}, nil)
	w.Handle("nul-error", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return nil, cairnq.Permanent(errors.New("a\x00b"))
	}, nil)
	runWorker(t, w)
	ctx := context.Background()
	r, _ := c.Submit(ctx, "nul-result", nil, nil)
	e, _ := c.Submit(ctx, "nul-error", nil, nil)
	if got := pgWaitTask(t, c, r.ID); got.Status != cairnq.StatusFailed || got.Attempt != 1 ||
		got.Error == nil || got.Error.Code != "unserializable_result" || !strings.Contains(got.Error.Message, "NUL") {
		t.Errorf("NUL in a result: %s attempt %d %+v", got.Status, got.Attempt, got.Error)
	}
	if got := pgWaitTask(t, c, e.ID); got.Status != cairnq.StatusFailed || got.Attempt != 1 ||
		got.Error == nil || got.Error.Message != "a\uFFFDb" {
		t.Errorf("NUL in an error message: %s attempt %d %+v", got.Status, got.Attempt, got.Error)
	}
}

// A database whose schema_version is newer than this SDK's opens (same
// protocol major) with a warning in the log, as on SQLite.
func TestPostgresNewerSchemaVersionIsWarnedAbout(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	pgClient(t, dsn, "").Close()
	adminExec(t, dsn, "UPDATE cairnq_meta SET value = '99' WHERE key = 'schema_version'")
	var log syncbuf.Buffer
	ctx := context.Background()
	ex, err := cairnqpgx.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cairnq.OpenPostgres(ctx, ex, &cairnq.PostgresOptions{CloseExecutor: true, Options: cairnq.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))}})
	if err != nil {
		ex.Close()
		t.Fatalf("opening a newer schema of the same protocol: %v", err)
	}
	c.Close()
	if s := log.String(); !strings.Contains(s, "schema_version=99") {
		t.Errorf("log %q, want a warning naming schema_version 99", s)
	}
}

// The connection-cutting burn-down: every connection of a worker's client
// (its pool, its LISTEN connection, each Call's wait) goes through a proxy
// that cuts it at a random moment 0.5-2 s after it opened, whatever is in
// flight. 2,000 tasks, submitted around the proxy, must all succeed, none
// run more often than its attempts allow, and a Call made through the
// proxy mid-way, and one after, must get their results: the worker and
// the waiters recover from every cut by themselves. It is bounded in time
// by a watchdog, not timed.
func TestPostgresBurnDownThroughConnectionCuts(t *testing.T) {
	t.Parallel()
	const tasks = 2000
	dsn := pgtest.DSN(t)
	direct := pgClient(t, dsn, "")
	proxy, cut := pgtest.StartCutProxy(t, dsn, 500*time.Millisecond, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	ex, err := cairnqpgx.Open(ctx, cut, &cairnqpgx.Options{ConnectTimeout: 5 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cairnq.OpenPostgres(ctx, ex, &cairnq.PostgresOptions{CloseExecutor: true, Options: cairnq.Options{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	var (
		mu   sync.Mutex
		runs = map[string]int{}
	)
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{
		Concurrency: 16, LeaseDuration: 5 * time.Second, PollInterval: 50 * time.Millisecond,
		OnError: func(error, cairnq.ErrorPhase, string) {}, // the cuts are expected; what counts is the outcome
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("cut", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		mu.Lock()
		runs[tc.Task().ID]++
		mu.Unlock()
		// Long enough for the burn-down to outlast many cuts: 2,000 calls
		// of 40ms on 16 slots take 5 s.
		time.Sleep(40 * time.Millisecond)
		return tc.Task().ID, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()

	ids := make([]string, 0, tasks)
	for range tasks {
		task, err := direct.Submit(ctx, "cut", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	// A cut can fail the Call's submit itself, which may or may not have
	// committed: the caller tries again under the same key, as an
	// application would, and gets the one task either way. The wait
	// rides out cuts by itself.
	call := func(when string) {
		t.Helper()
		opts := &cairnq.CallOptions{
			SubmitOptions: cairnq.SubmitOptions{Key: "call " + when},
			WaitOptions:   cairnq.WaitOptions{Timeout: 2 * time.Minute},
		}
		for try := 1; ; try++ {
			task, err := c.Call(ctx, "cut", nil, opts)
			var failed *cairnq.TaskFailedError
			var timeout *cairnq.TaskTimeoutError
			outcome := errors.As(err, &failed) || errors.As(err, &timeout) || errors.Is(err, cairnq.ErrTaskCanceled)
			if err != nil && !outcome && ctx.Err() == nil && try < 20 {
				continue // the submit met a cut
			}
			if err != nil || task.Status != cairnq.StatusSucceeded || string(task.Result) != `"`+task.ID+`"` {
				t.Fatalf("a Call through the cuts %s, try %d: %+v, %v", when, try, task, err)
			}
			return
		}
	}
	call("during the burn-down")
	for {
		st, err := direct.Stats(ctx, "default")
		if err != nil {
			t.Fatal(err)
		}
		if st["default"].Succeeded >= tasks+1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("unfinished after the watchdog: %+v", st["default"])
		}
		time.Sleep(50 * time.Millisecond)
	}
	call("after the burn-down")
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("worker: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	reruns := 0
	for _, id := range ids {
		task, err := direct.Get(ctx, id)
		if err != nil || task.Status != cairnq.StatusSucceeded {
			t.Fatalf("task %s: %+v, %v", id, task, err)
		}
		if runs[id] > task.MaxAttempts || runs[id] < 1 {
			t.Errorf("task %s ran %d times, allowed %d", id, runs[id], task.MaxAttempts)
		}
		reruns += runs[id] - 1
	}
	t.Logf("%d tasks through %d cut connections: all succeeded, %d runs beyond the first", tasks, proxy.Cut.Load(), reruns)
	if proxy.Cut.Load() < 10 {
		t.Fatalf("only %d connections were cut: the test proves nothing", proxy.Cut.Load())
	}
}
