package cairnq_test

// Fault tests on the embedded SQLite default: the suite of
// internal/testkit/faulttest (a worker process and a submitting process killed
// with SIGKILL in the middle of their work, poisoned values among good
// ones) run on a database file, and a handler that never returns. The
// Postgres versions, and a server crash, are in conformance/fault_test.go.
//
// The process tests re-execute this test binary as their child processes,
// which run TestFaultChild.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/internal/testkit/faulttest"
)

// sqliteFault runs the fault suite on a database file that every process
// of a test opens by its path.
var sqliteFault = faulttest.Backend{
	ChildTest: "TestFaultChild",
	NewDB: func(t *testing.T) string {
		return filepath.Join(t.TempDir(), "tasks.db")
	},
	Open: func(t *testing.T, path string) *cairnq.Client {
		t.Helper()
		// Up to ten processes write the one file here, on a machine the
		// rest of the suite loads too: a child opening among them waited
		// out the default 5 s busy timeout once (TestWorkflowKillSQLite).
		// What these tests check is what a kill leaves, not how long a
		// lock may be waited for.
		c, err := cairnq.Open(context.Background(), path, &cairnq.SQLiteOptions{BusyTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	},
	ErrDetail:          mpErrDetail,
	AfterSubmitterKill: checkIntegrity,
}

// TestFaultKillWorkerSQLite runs faulttest.KillWorker: three worker
// processes on one database file, one of them killed mid-work.
func TestFaultKillWorkerSQLite(t *testing.T) { faulttest.KillWorker(t, sqliteFault) }

// TestFaultKillSubmitterSQLite runs faulttest.KillSubmitter: the kill lands
// in the middle of the group commits the submitter's writer runs, and
// checkIntegrity then finds the file whole.
func TestFaultKillSubmitterSQLite(t *testing.T) { faulttest.KillSubmitter(t, sqliteFault) }

// TestFaultPoisonedValuesSQLite runs faulttest.PoisonedValues; its fresh
// client reopens the file.
func TestFaultPoisonedValuesSQLite(t *testing.T) { faulttest.PoisonedValues(t, sqliteFault) }

// TestWorkflowMultiprocessSQLite runs faulttest.WorkflowMultiprocess:
// three worker processes on one file advance the same 200 workflows.
func TestWorkflowMultiprocessSQLite(t *testing.T) { faulttest.WorkflowMultiprocess(t, sqliteFault) }

// TestWorkflowKillSQLite runs faulttest.WorkflowKill: the workers
// advancing them are killed at random points and replaced.
func TestWorkflowKillSQLite(t *testing.T) { faulttest.WorkflowKill(t, sqliteFault) }

// TestGlobalLimitProcessesSQLite runs faulttest.GlobalLimit: three
// worker processes on one file under a global limit, and per tenant.
func TestGlobalLimitProcessesSQLite(t *testing.T) { faulttest.GlobalLimit(t, sqliteFault) }

// TestFleetPauseProcessesSQLite runs faulttest.FleetPause: a queue
// paused from this process stops two worker processes on the file.
func TestFleetPauseProcessesSQLite(t *testing.T) { faulttest.FleetPause(t, sqliteFault) }

// TestDurableKillSQLite runs faulttest.DurableKill: worker processes
// running a ten-step durable handler on one file, killed at random points
// and replaced.
func TestDurableKillSQLite(t *testing.T) {
	faulttest.DurableKill(t, sqliteFault, faulttest.DurableOptions{})
}

// TestFaultChild is what this binary runs as a child process of the tests
// above (sqliteFault.ChildTest); in a normal run it returns at once.
func TestFaultChild(t *testing.T) { faulttest.Child(t, sqliteFault) }

// checkIntegrity checks that the file at path is whole after a kill: the
// killed writer's transaction rolled back.
func checkIntegrity(t *testing.T, path string) {
	t.Helper()
	var check string
	db, err := sqlite3.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.BusyTimeout(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	stmt, _, err := db.Prepare("PRAGMA integrity_check")
	if err != nil {
		t.Fatal(err)
	}
	if stmt.Step() {
		check = stmt.ColumnText(0)
	}
	if err := errors.Join(stmt.Err(), stmt.Close(), db.Close()); err != nil {
		t.Fatal(err)
	}
	if check != "ok" {
		t.Errorf("integrity_check after the kill: %s", check)
	}
}

// TestFaultHandlerIgnoresContext runs a handler that never returns and
// ignores its context. Run must still return once its context ends, after
// ShutdownTimeout and a short grace, with or without MaxRun, and the
// process must not panic when the handler finally returns; the task is not
// lost: once its lease lapses another worker runs it. With a MaxRun
// shorter than the test, the hung attempt is abandoned at MaxRun as a
// handler_timeout and the task's next attempt succeeds.
func TestFaultHandlerIgnoresContext(t *testing.T) {
	faulttest.SkipInChild(t)
	t.Parallel()
	for _, tc := range []struct {
		name   string
		maxRun time.Duration
	}{
		{"no MaxRun", 0},
		{"MaxRun past the shutdown", time.Hour},
		{"MaxRun hit first", 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testHandlerIgnoresContext(t, openTemp(t, nil), tc.maxRun)
		})
	}
}

// hungHandler is a handler that ignores its context: it returns only when
// the test releases it, then tries to settle its task itself too.
type hungHandler struct {
	release  chan struct{}
	started  chan string // each hung call's task id
	returned sync.WaitGroup
	late     atomic.Value // error: what the late Succeed returned
}

// errLateNoop stands for a nil error from the hung handler's Succeed.
var errLateNoop = errors.New("no error (a no-op)")

func (h *hungHandler) run(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
	h.returned.Add(1)
	defer h.returned.Done()
	h.started <- tc.ID()
	<-h.release // not ctx.Done()
	// The worker gave up on this call long ago: a write now must be
	// refused, not panic, and not touch the task.
	err := tc.Succeed(context.Background(), "late")
	if err == nil {
		err = errLateNoop
	}
	h.late.Store(err)
	return "late", nil
}

func testHandlerIgnoresContext(t *testing.T, c *cairnq.Client, maxRun time.Duration) {
	ctx := context.Background()
	h := &hungHandler{release: make(chan struct{}), started: make(chan string, 4)}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(h.release) }) }
	t.Cleanup(func() { // stop the hung goroutine even when the test fails
		release()
		h.returned.Wait()
	})
	hitFirst := maxRun > 0 && maxRun < time.Minute
	var mu sync.Mutex
	var reported []string
	w := newWorker(t, c, &cairnq.WorkerOptions{
		ID:          "hung-worker",
		Concurrency: 2,
		// A short lease: once Run is gone, another worker gets the task
		// soon after.
		LeaseDuration:   cairnq.MinLeaseDuration,
		ShutdownTimeout: 500 * time.Millisecond,
		MaxRun:          maxRun,
		RetryBackoff:    cairnq.NoRetryBackoff,
		OnError: func(err error, phase cairnq.ErrorPhase, taskID string) {
			mu.Lock()
			reported = append(reported, fmt.Sprintf("%s %s: %v", phase, taskID, err))
			mu.Unlock()
		},
	})
	if err := w.Handle("hang", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		if tc.Attempt() == 1 {
			return h.run(ctx, tc)
		}
		return "second", nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("ok", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return tc.Payload(), nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	hung, err := c.Submit(ctx, "hang", nil, &cairnq.SubmitOptions{MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	runDone := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				runDone <- fmt.Errorf("Run panicked: %v", p)
			}
		}()
		runDone <- w.Run(runCtx)
	}()
	select {
	case id := <-h.started:
		if id != hung.ID {
			t.Fatalf("hung handler got %s, want %s", id, hung.ID)
		}
	case <-time.After(faulttest.Watchdog):
		cancel()
		t.Fatalf("the hung task never started\n%s", faulttest.AllGoroutines())
	}
	// The worker goes on with its other slot meanwhile.
	okTask, err := c.Submit(ctx, "ok", json.RawMessage(`{"ok":1}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := waitTask(t, c, okTask.ID); got.Status != cairnq.StatusSucceeded {
		t.Errorf("a task beside the hung one: %s, want succeeded", got.Status)
	}
	if hitFirst {
		// Abandoned at MaxRun, recorded as a retryable handler_timeout;
		// the second attempt, on the same worker, succeeds.
		got := waitTask(t, c, hung.ID)
		if got.Status != cairnq.StatusSucceeded || string(got.Result) != `"second"` || got.Attempt != 2 ||
			got.Error == nil || got.Error.Code != "handler_timeout" {
			t.Errorf("hung task after MaxRun: %s attempt %d result %s error %+v, want succeeded on attempt 2 after a handler_timeout",
				got.Status, got.Attempt, got.Result, got.Error)
		}
	}

	began := time.Now()
	cancel()
	select {
	case err := <-runDone:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(faulttest.Watchdog):
		t.Fatalf("Run did not return %v after its context ended (ShutdownTimeout 500ms): hung\n%s", faulttest.Watchdog, faulttest.AllGoroutines())
	}
	t.Logf("Run returned %v after its context ended", time.Since(began).Round(time.Millisecond))
	// At once, with no grace for goroutines on their way out: a call ends
	// its runCall before it counts itself ended, so none may be in one now
	// but the hung handler's own.
	if stacks := workerStacks(w, "(*hungHandler).run"); strings.Contains(stacks, "(*Worker).runCall") {
		t.Errorf("a call was still running when Run returned:\n%s", stacks)
	}
	// Run leaves the hung handler behind, and with no MaxRun that handler
	// runs on its call's goroutine: every other goroutine has ended.
	if leaked := workerGoroutinesBut(w, "(*hungHandler).run"); leaked != "" {
		t.Errorf("worker goroutines outlived Run:\n%s", leaked)
	}
	if maxRun == 0 && !strings.Contains(workerStacks(w, ""), "(*hungHandler).run") {
		t.Errorf("no worker goroutine runs the hung handler: want it on its call's goroutine, past Run")
	}

	if !hitFirst {
		// Not lost: the lease lapses and another worker runs it.
		w2 := newWorker(t, c, &cairnq.WorkerOptions{ID: "second-worker"})
		if err := w2.Handle("hang", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			return "second", nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		stop2 := startWorker(t, w2)
		got := waitTask(t, c, hung.ID)
		stop2()
		if got.Status != cairnq.StatusSucceeded || string(got.Result) != `"second"` || got.WorkerID != "second-worker" || got.Attempt != 2 {
			t.Errorf("hung task: %s attempt %d by %s with %s, want succeeded on attempt 2 by second-worker", got.Status, got.Attempt, got.WorkerID, got.Result)
		}
	}

	// Now the hung handler returns, and its own late settlement is refused.
	release()
	h.returned.Wait()
	// Refused (ErrLostLease), or a no-op where the worker settled the
	// attempt itself (the handler_timeout): either way nothing is written.
	if err, _ := h.late.Load().(error); err != errLateNoop && !errors.Is(err, cairnq.ErrLostLease) {
		t.Errorf("the abandoned handler's Succeed: %v, want ErrLostLease or a no-op", err)
	} else {
		t.Logf("the abandoned handler's Succeed: %v", err)
	}
	got, err := c.Get(ctx, hung.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != cairnq.StatusSucceeded || string(got.Result) != `"second"` {
		t.Errorf("after the abandoned handler returned: %s with %s, want still succeeded with \"second\"", got.Status, got.Result)
	}
	mu.Lock()
	t.Logf("worker reported: %q", reported)
	mu.Unlock()
}
