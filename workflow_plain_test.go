package cairnq_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
)

// Workflows meeting plain task operations, from this SDK or another
// (issue 46): a retry of a step's task, a cancel of the record, a purge,
// and what a record's row says once it ended. Another SDK is the
// protocol alone, through Client.Store().

// failSwitch makes the steps it names fail for good until turned off.
type failSwitch struct {
	mu      sync.Mutex
	failing map[string]bool
}

func (f *failSwitch) set(steps ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing = map[string]bool{}
	for _, s := range steps {
		f.failing[s] = true
	}
}

func (f *failSwitch) err(step string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failing[step] {
		return &cairnq.TaskError{Type: "Bad", Code: "bad", Message: "not yet", Retryable: false}
	}
	return nil
}

// stepTask is the task of step of workflow rec.
func stepTask(t *testing.T, c *cairnq.Client, rec, step string) *cairnq.Task {
	t.Helper()
	task, err := c.GetByKey(context.Background(), cairnq.StepKey(rec, step))
	if err != nil {
		t.Fatalf("step %s: %v", step, err)
	}
	return task
}

// waitStatus waits for task id to be in status (a workflow's record
// already ended, say, and expected to end again otherwise).
func waitStatus(t *testing.T, c *cairnq.Client, id string, status cairnq.Status, what string) {
	t.Helper()
	var last *cairnq.Task
	deadline := time.Now().Add(15 * time.Second)
	for {
		task, err := c.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if last = task; last.Status == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s %+v, want %s", what, last.Status, last.Error, status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Client.Retry of a failed step's task resumes its failed workflow at
// once: under the default policy as RetryWorkflow does, so that the step
// the failure canceled runs again too, and the steps after both run.
func TestWorkflowStepRetriedResumesWorkflow(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		var runs stepRuns
		var fail failSwitch
		fail.set("b")
		var holdOnce sync.Once
		cStarted := make(chan struct{})
		release := make(chan struct{}) // b's second run: after the check that the workflow runs again
		w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 4, HeartbeatInterval: 50 * time.Millisecond, WorkflowSweep: cairnq.NoWorkflowSweep})
		if err := w.Handle("wf.step", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			var in stepIn
			if err := tc.Decode(&in); err != nil {
				return nil, err
			}
			runs.add(in.Step)
			switch in.Step {
			case "b":
				if runs.get("b") == 1 {
					<-cStarted // c runs when b fails, and is stopped by it
				} else {
					<-release // else the workflow may end before GetWorkflow looks
				}
			case "c":
				stopped := false
				holdOnce.Do(func() { close(cStarted); <-ctx.Done(); stopped = true })
				if stopped {
					return nil, ctx.Err()
				}
			}
			return in.Step, fail.err(in.Step)
		}, nil); err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
			{Step: "a", Task: "wf.step", Payload: stepIn{"a"}},
			{Step: "b", Task: "wf.step", Payload: stepIn{"b"}, After: []string{"a"}},
			{Step: "c", Task: "wf.step", Payload: stepIn{"c"}, After: []string{"a"}},
			{Step: "d", Task: "wf.step", Payload: stepIn{"d"}, After: []string{"b", "c"}},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if final := waitWorkflow(t, c, rec.ID); final.Status != cairnq.StatusFailed {
			t.Fatalf("workflow %s, want failed", final.Status)
		}
		waitFor(t, "the step b's failure stopped to end", func() bool {
			return stepStates(t, c, rec.ID)["c"] == cairnq.StepState(cairnq.StatusCanceled)
		})
		fail.set()
		b := stepTask(t, c, rec.ID, "b")
		retried, err := c.Retry(ctx, b.ID, nil)
		if err != nil || retried == nil || retried.Status != cairnq.StatusQueued {
			t.Fatalf("Retry of the failed step: %+v %v, want it queued", retried, err)
		}
		wf, err := c.GetWorkflow(ctx, rec.ID)
		close(release)
		if err != nil || wf.Status != cairnq.StatusRunning {
			t.Fatalf("the workflow after its step's retry: %+v %v, want running again at once", wf, err)
		}
		final := waitWorkflow(t, c, rec.ID)
		if final.Status != cairnq.StatusSucceeded {
			t.Fatalf("the workflow after its failed step's retry: %s %+v, want succeeded", final.Status, final.Error)
		}
		if runs.get("a") != 1 || runs.get("b") != 2 || runs.get("c") != 2 || runs.get("d") != 1 {
			t.Errorf("runs %v, want a once, b and c twice, d once", runs.n)
		}

		// A step of a canceled workflow stays canceled: the cancel stands.
		later, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
			{Step: "later", Task: "wf.step", Payload: stepIn{"later"}, Options: &cairnq.SubmitOptions{Delay: time.Hour}},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CancelWorkflow(ctx, later.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.RetryByKey(ctx, cairnq.StepKey(later.ID, "later"), nil); !errors.As(err, new(*cairnq.ArgumentError)) {
			t.Errorf("RetryByKey of a canceled workflow's step: %v, want an *ArgumentError", err)
		}
		if st := stepStates(t, c, later.ID)["later"]; st != cairnq.StepState(cairnq.StatusCanceled) {
			t.Errorf("the canceled workflow's step is %s after a refused retry", st)
		}
	})
}

// Under ContinueOnFailure a plain retry of a failed step resumes only
// its branch: the other failed step is not run again, and the workflow
// fails again with that step's dependant skipped.
func TestWorkflowStepRetriedContinueOnFailure(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		var runs stepRuns
		var fail failSwitch
		fail.set("bad1", "bad2")
		w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 2, WorkflowSweep: cairnq.NoWorkflowSweep})
		if err := w.Handle("wf.step", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			var in stepIn
			if err := tc.Decode(&in); err != nil {
				return nil, err
			}
			runs.add(in.Step)
			return nil, fail.err(in.Step)
		}, nil); err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
			{Step: "bad1", Task: "wf.step", Payload: stepIn{"bad1"}},
			{Step: "after1", Task: "wf.step", Payload: stepIn{"after1"}, After: []string{"bad1"}},
			{Step: "bad2", Task: "wf.step", Payload: stepIn{"bad2"}},
			{Step: "after2", Task: "wf.step", Payload: stepIn{"after2"}, After: []string{"bad2"}},
		}, &cairnq.WorkflowOptions{ContinueOnFailure: true})
		if err != nil {
			t.Fatal(err)
		}
		if final := waitWorkflow(t, c, rec.ID); final.Status != cairnq.StatusFailed {
			t.Fatalf("workflow %s, want failed", final.Status)
		}
		fail.set("bad2")
		if _, err := c.Retry(ctx, stepTask(t, c, rec.ID, "bad1").ID, nil); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the retried branch to run", func() bool {
			return stepStates(t, c, rec.ID)["after1"] == cairnq.StepState(cairnq.StatusSucceeded)
		})
		final := waitWorkflow(t, c, rec.ID)
		if final.Status != cairnq.StatusFailed {
			t.Fatalf("workflow %s, want failed again for bad2", final.Status)
		}
		st := stepStates(t, c, rec.ID)
		want := map[string]cairnq.StepState{"bad1": "succeeded", "after1": "succeeded", "bad2": "failed", "after2": cairnq.StepSkipped}
		for k, v := range want {
			if st[k] != v {
				t.Errorf("step %s %s, want %s", k, st[k], v)
			}
		}
		if runs.get("bad1") != 2 || runs.get("after1") != 1 || runs.get("bad2") != 1 || runs.get("after2") != 0 {
			t.Errorf("runs %v, want bad1 twice, after1 and bad2 once, after2 never", runs.n)
		}
	})
}

// goSteps registers wf.go on w: it returns its step's name, or fails for
// good while fail says so.
func goSteps(t *testing.T, w *cairnq.Worker, fail *failSwitch) {
	t.Helper()
	if err := w.Handle("wf.go", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var in stepIn
		if err := tc.Decode(&in); err != nil {
			return nil, err
		}
		return in.Step, fail.err(in.Step)
	}, nil); err != nil {
		t.Fatal(err)
	}
}

// A failed step retried by another SDK (the protocol's retry) and run by
// a Go worker resumes its workflow at its settlement.
func TestWorkflowStepRetriedByAnotherSDK(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		var fail failSwitch
		fail.set("b")
		w := newWorker(t, c, &cairnq.WorkerOptions{WorkflowSweep: cairnq.NoWorkflowSweep})
		goSteps(t, w, &fail)
		startWorker(t, w)
		rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
			{Step: "b", Task: "wf.go", Payload: stepIn{"b"}},
			{Step: "c", Task: "wf.go", Payload: stepIn{"c"}, After: []string{"b"}},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if final := waitWorkflow(t, c, rec.ID); final.Status != cairnq.StatusFailed {
			t.Fatalf("workflow %s, want failed", final.Status)
		}
		fail.set()
		if _, err := c.Store().Retry(ctx, stepTask(t, c, rec.ID, "b").ID, false); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, c, rec.ID, cairnq.StatusSucceeded, "the workflow after another SDK retried its Go step")
	})
}

// A failed step another SDK retries and runs again, with no Go
// settlement, resumes its workflow at a Go worker's look over the ended
// workflows: here the one a worker takes when it starts.
func TestWorkflowStepRetriedAndRunByAnotherSDK(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		var fail failSwitch
		rec := failedThenRunByAnotherSDK(t, c, &fail)
		w2 := newWorker(t, c, &cairnq.WorkerOptions{WorkflowSweep: 20 * time.Millisecond})
		goSteps(t, w2, &fail)
		startWorker(t, w2)
		waitStatus(t, c, rec.ID, cairnq.StatusSucceeded, "the workflow after another SDK retried and ran its step")
		if st := stepStates(t, c, rec.ID); st["ts"] != "succeeded" || st["go"] != "succeeded" {
			t.Errorf("steps %v, want both succeeded", st)
		}
	})
}

// A record canceled by another SDK's plain cancel (the protocol's
// cancel, which reaches no step) has its steps stopped by a Go worker's
// sweep: the queued ones canceled, a running one asked to stop, and
// nothing after them submitted.
func TestWorkflowCanceledByAnotherSDK(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		started := make(chan struct{})
		stopped := make(chan error, 1)
		w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 2, HeartbeatInterval: 50 * time.Millisecond, WorkflowSweep: 20 * time.Millisecond})
		if err := w.Handle("wf.slow", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			close(started)
			select {
			case <-ctx.Done(): // the stop the sweep asks for
				stopped <- ctx.Err()
				return nil, ctx.Err()
			case <-time.After(time.Minute):
				stopped <- errors.New("not asked to stop")
				return nil, nil
			}
		}, nil); err != nil {
			t.Fatal(err)
		}
		if err := w.Handle("wf.never", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			t.Error("a step of the canceled workflow ran")
			return nil, nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
			{Step: "slow", Task: "wf.slow"},
			{Step: "later", Task: "wf.never", Options: &cairnq.SubmitOptions{Delay: 2 * time.Second}},
			{Step: "after", Task: "wf.never", After: []string{"slow"}},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		<-started
		canceled, err := c.Store().Cancel(ctx, rec.ID)
		if err != nil || canceled == nil || canceled.Status != cairnqtype.StatusCanceled {
			t.Fatalf("the plain cancel of the record: %+v %v", canceled, err)
		}
		select {
		case err := <-stopped:
			if err == nil || err.Error() == "not asked to stop" {
				t.Fatalf("the running step: %v, want its context canceled", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("the running step of the canceled workflow was not asked to stop")
		}
		waitFor(t, "every step of the canceled workflow to end", func() bool {
			st := stepStates(t, c, rec.ID)
			return st["slow"] == cairnq.StepState(cairnq.StatusCanceled) && st["later"] == cairnq.StepState(cairnq.StatusCanceled)
		})
		if st := stepStates(t, c, rec.ID); st["after"] != cairnq.StepSkipped || st["later"] != cairnq.StepState(cairnq.StatusCanceled) {
			t.Errorf("steps %v, want later canceled and after skipped", st)
		}
		if final, err := c.Get(ctx, rec.ID); err != nil || final.Status != cairnq.StatusCanceled {
			t.Errorf("the record: %+v %v, want canceled", final, err)
		}
	})
}

// The SDK's retention and Client.Purge keep every task of a workflow that
// has not ended, so that a step still to run reads the results of the
// steps it waits for; once the workflow ended they go. Another SDK's
// purge (the protocol's) knows nothing of workflows: a finished step it
// purges is gone for StepResult (ErrNotFound), though the ledger still
// says it succeeded.
func TestWorkflowRetentionKeepsLiveSteps(t *testing.T) {
	opts := &cairnq.Options{Retention: &cairnq.RetentionOptions{Rules: []cairnq.RetentionRule{{}}, Interval: time.Hour}}
	onBothBackends(t, opts, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		started := make(chan string, 1)
		release := make(chan struct{})
		read := make(chan error, 1)
		w := newWorker(t, c, &cairnq.WorkerOptions{WorkflowSweep: cairnq.NoWorkflowSweep})
		if err := w.Handle("wf.first", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			return "first's result", nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		if err := w.Handle("wf.reader", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			started <- tc.Task().ID
			<-release
			r, err := cairnq.StepResult[string](ctx, tc, "first")
			read <- err
			if err != nil {
				return nil, &cairnq.TaskError{Type: "Gone", Message: err.Error(), Retryable: false}
			}
			return r, nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		steps := []cairnq.WorkflowStep{
			{Step: "first", Task: "wf.first"},
			{Step: "reader", Task: "wf.reader", After: []string{"first"}},
		}
		rec, err := c.SubmitWorkflow(ctx, steps, nil)
		if err != nil {
			t.Fatal(err)
		}
		reader := <-started
		first := stepTask(t, c, rec.ID, "first")
		time.Sleep(10 * time.Millisecond) // first finished more than OlderThan (0) ago
		if _, err := c.SweepNow(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Purge(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(ctx, first.ID); err != nil {
			t.Fatalf("the finished step of a running workflow after retention and Purge: %v, want kept", err)
		}
		release <- struct{}{}
		if err := <-read; err != nil {
			t.Errorf("StepResult after retention: %v", err)
		}
		if final := waitWorkflow(t, c, rec.ID); final.Status != cairnq.StatusSucceeded {
			t.Fatalf("workflow %s %+v", final.Status, final.Error)
		}
		time.Sleep(10 * time.Millisecond)
		if n, err := c.SweepNow(ctx); err != nil || n != 3 {
			t.Errorf("retention once the workflow ended purged %d tasks (%v), want its record and both steps", n, err)
		}
		for _, id := range []string{rec.ID, first.ID, reader} {
			if _, err := c.Get(ctx, id); !errors.Is(err, cairnq.ErrNotFound) {
				t.Errorf("task %s after retention: %v, want purged", id, err)
			}
		}

		// Another SDK's purge: the step is gone for the step reading it.
		rec, err = c.SubmitWorkflow(ctx, steps, nil)
		if err != nil {
			t.Fatal(err)
		}
		<-started
		time.Sleep(10 * time.Millisecond)
		if ids, err := c.Store().Purge(ctx, nil); err != nil || len(ids) != 1 {
			t.Fatalf("another SDK's purge: %v %v, want the finished step purged", ids, err)
		}
		release <- struct{}{}
		if err := <-read; !errors.Is(err, cairnq.ErrNotFound) {
			t.Errorf("StepResult of a step another SDK purged: %v, want ErrNotFound", err)
		}
		if final := waitWorkflow(t, c, rec.ID); final.Status != cairnq.StatusFailed {
			t.Errorf("workflow %s, want failed by its reader", final.Status)
		}
		if st := stepStates(t, c, rec.ID); st["first"] != cairnq.StepState(cairnq.StatusSucceeded) {
			t.Errorf("the purged step is %s, want succeeded from the ledger", st["first"])
		}
	})
}

// A record ends with its run_at_ms no later than its completed_at_ms,
// also when a step's settlement finishes it before the record's next
// sweep was due.
func TestWorkflowRecordNotDueAfterItEnded(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		w := newWorker(t, c, &cairnq.WorkerOptions{WorkflowSweep: cairnq.NoWorkflowSweep})
		if err := w.Handle("wf.step", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			var in stepIn
			if err := tc.Decode(&in); err != nil {
				return nil, err
			}
			if in.Step == "bad" {
				return nil, &cairnq.TaskError{Type: "Bad", Message: "no", Retryable: false}
			}
			return nil, nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		for _, step := range []string{"good", "bad"} {
			rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{{Step: step, Task: "wf.step", Payload: stepIn{step}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			final := waitWorkflow(t, c, rec.ID)
			if !final.IsTerminal() || final.RunAt.After(final.CompletedAt) {
				t.Errorf("workflow with a %s step: %s, run_at %v after completed_at %v", step, final.Status,
					final.RunAt.Format(time.StampMilli), final.CompletedAt.Format(time.StampMilli))
			}
		}
	})
}

// failedThenRunByAnotherSDK submits a workflow whose first step ("ts",
// queue ts) another SDK claims and fails for good, waits until a Go
// worker's sweep fails the workflow and stops that worker, then has the
// other SDK retry the step and run it to success: no Go settlement
// follows, so only a Go look over the ended workflows can revive it.
// The second step ("go") is a Go step driven by fail.
func failedThenRunByAnotherSDK(t *testing.T, c *cairnq.Client, fail *failSwitch) *cairnq.Task {
	t.Helper()
	ctx := context.Background()
	w := newWorker(t, c, &cairnq.WorkerOptions{WorkflowSweep: 20 * time.Millisecond})
	goSteps(t, w, fail)
	stop := startWorker(t, w)
	rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
		{Step: "ts", Task: "wf.ts", Options: &cairnq.SubmitOptions{Queue: "ts"}},
		{Step: "go", Task: "wf.go", Payload: stepIn{"go"}, After: []string{"ts"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := c.Store().Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"ts"}, WorkerID: "ts-worker", Lease: time.Minute, Limit: 1})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("the plain claim: %v, %d tasks", err, len(claimed))
	}
	if _, err := c.Store().Fail(ctx, claimed[0].ID, "ts-worker", cairnqtype.ErrorEnvelope{Type: "Bad", Message: "no"}, false, 0); err != nil {
		t.Fatal(err)
	}
	if final := waitWorkflow(t, c, rec.ID); final.Status != cairnq.StatusFailed {
		t.Fatalf("workflow %s, want failed by the sweep", final.Status)
	}
	stop()
	if _, err := c.Store().Retry(ctx, claimed[0].ID, true); err != nil {
		t.Fatal(err)
	}
	settleAsAnotherSDK(t, c, "ts", "wf.ts", "from ts")
	return rec
}
