package cairnq_test

import (
	"context"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go"
)

// handleQuick registers wf.quick, which returns at once, counting its
// runs in runs when runs is not nil.
func handleQuick(t *testing.T, w *cairnq.Worker, runs *stepRuns) {
	t.Helper()
	if err := w.Handle("wf.quick", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		if runs != nil {
			runs.add("quick")
		}
		return nil, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
}

// handleHeld registers name, which returns when release is closed.
func handleHeld(t *testing.T, w *cairnq.Worker, name string, release <-chan struct{}) {
	t.Helper()
	if err := w.Handle(name, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		<-release
		return nil, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
}

// startQuickAndHeld starts a worker on c, its workflow sweep every sweep,
// running wf.quick and wf.held, and returns the channel whose close
// releases wf.held.
func startQuickAndHeld(t *testing.T, c *cairnq.Client, sweep time.Duration) chan struct{} {
	t.Helper()
	release := make(chan struct{})
	w := newWorker(t, c, &cairnq.WorkerOptions{WorkflowSweep: sweep})
	handleQuick(t, w, nil)
	handleHeld(t, w, "wf.held", release)
	startWorker(t, w)
	return release
}

// waitSettled waits for task id to leave running and returns its status.
func waitSettled(t *testing.T, c *cairnq.Client, id, what string) cairnq.Status {
	t.Helper()
	var got *cairnq.Task
	waitFor(t, what, func() bool {
		var err error
		got, err = c.Get(context.Background(), id)
		return err == nil && got.IsTerminal()
	})
	return got.Status
}

// CancelRest: a queued step canceled by hand (Client.Cancel) is a failure
// that stops the workflow; a later success of another step must not
// insert the steps after it.
func TestWorkflowStepCanceledByHandStopsTheRest(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		release := make(chan struct{})
		runs := &stepRuns{}
		w := newWorker(t, c, &cairnq.WorkerOptions{WorkflowSweep: cairnq.NoWorkflowSweep})
		handleQuick(t, w, runs)
		handleHeld(t, w, "wf.held", release)
		startWorker(t, w)
		rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
			{Step: "a", Task: "wf.never", Options: &cairnq.SubmitOptions{Queue: "idle"}},
			{Step: "b", Task: "wf.held"},
			{Step: "c", Task: "wf.quick", After: []string{"b"}},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := stepTask(t, c, rec.ID, "b")
		waitStatus(t, c, b.ID, cairnq.StatusRunning, "b running")
		a := stepTask(t, c, rec.ID, "a")
		if _, err := c.Cancel(ctx, a.ID); err != nil {
			t.Fatal(err)
		}
		close(release)
		if final := waitWorkflow(t, c, rec.ID); final.Status != cairnq.StatusFailed {
			t.Fatalf("workflow %s, want failed: its step a was canceled", final.Status)
		}
		waitSettled(t, c, b.ID, "b to settle")
		if got, err := c.GetByKey(ctx, cairnq.StepKey(rec.ID, "c")); err == nil && got != nil {
			t.Errorf("step c inserted (status %s, ran %d times) after step a was canceled under CancelRest", got.Status, runs.get("quick"))
		}
	})
}

// A step others wait for, succeeded, then purged by another SDK before
// all the prerequisites of its dependent succeeded: the dependent must
// still be inserted and the workflow succeed (before this change the
// ledger said the step succeeded).
func TestWorkflowStepPurgedBeforeItsDependentIsReady(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		release := startQuickAndHeld(t, c, 50*time.Millisecond)
		purgeThenRelease(t, c, xHeldD(""), "x", release)
	})
}

// As above with two processes: x settles in a's, held in b's, so b's
// cache never saw x succeed.
func TestWorkflowStepPurgedBeforeItsDependentIsReadyTwoProcesses(t *testing.T) {
	onBothBackendsTwice(t, func(t *testing.T, a, b *cairnq.Client) {
		release := make(chan struct{})
		wa := newWorker(t, a, &cairnq.WorkerOptions{WorkflowSweep: 50 * time.Millisecond})
		handleQuick(t, wa, nil)
		startWorker(t, wa)
		wb := newWorker(t, b, &cairnq.WorkerOptions{Queues: []string{"b"}, WorkflowSweep: cairnq.NoWorkflowSweep})
		handleHeld(t, wb, "wf.held", release)
		startWorker(t, wb)
		purgeThenRelease(t, a, xHeldD("b"), "x", release)
	})
}

// purgeThenRelease submits steps, waits for step purged to succeed,
// purges it as another SDK would (it must be the only ended task), then
// closes release; the workflow must succeed.
func purgeThenRelease(t *testing.T, c *cairnq.Client, steps []cairnq.WorkflowStep, purged string, release chan struct{}) {
	t.Helper()
	ctx := context.Background()
	rec, err := c.SubmitWorkflow(ctx, steps, nil)
	if err != nil {
		t.Fatal(err)
	}
	task := stepTask(t, c, rec.ID, purged)
	waitStatus(t, c, task.ID, cairnq.StatusSucceeded, purged+" to succeed")
	if ids, err := c.Store().Purge(ctx, nil); err != nil || len(ids) != 1 || ids[0] != task.ID {
		t.Fatalf("another SDK's purge: %v %v, want %s", ids, err, purged)
	}
	close(release)
	if final := waitWorkflow(t, c, rec.ID); final.Status != cairnq.StatusSucceeded {
		t.Fatalf("workflow %s %+v, want succeeded", final.Status, final.Error)
	}
}

// xHeldD is the workflow x, held (in queue) -> d.
func xHeldD(queue string) []cairnq.WorkflowStep {
	held := cairnq.WorkflowStep{Step: "held", Task: "wf.held"}
	if queue != "" {
		held.Options = &cairnq.SubmitOptions{Queue: queue}
	}
	return []cairnq.WorkflowStep{
		{Step: "x", Task: "wf.quick"},
		held,
		{Step: "d", Task: "wf.quick", After: []string{"x", "held"}},
	}
}

// A step asked to stop that returns success anyway settles canceled
// (complete_many: the cancel request wins) through the group of
// successes, which must advance it as the failure it is: the workflow
// ends without a sweep.
func TestWorkflowGroupedSuccessTurnedCanceledEndsIt(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		release := startQuickAndHeld(t, c, cairnq.NoWorkflowSweep)
		rec := cancelRunningA(t, c, []cairnq.WorkflowStep{
			{Step: "a", Task: "wf.held"},
			{Step: "c", Task: "wf.quick", After: []string{"a"}},
		}, release)
		if final := waitWorkflow(t, c, rec.ID); final.Status != cairnq.StatusFailed {
			t.Fatalf("workflow %s, want failed by its canceled step, without a sweep", final.Status)
		}
	})
}

// cancelRunningA submits steps, cancels step a while it runs, then
// closes release so that a returns success; a must settle canceled (the
// cancel request wins its success).
func cancelRunningA(t *testing.T, c *cairnq.Client, steps []cairnq.WorkflowStep, release chan struct{}) *cairnq.Task {
	t.Helper()
	ctx := context.Background()
	rec, err := c.SubmitWorkflow(ctx, steps, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := stepTask(t, c, rec.ID, "a")
	waitStatus(t, c, a.ID, cairnq.StatusRunning, "a running")
	if _, err := c.Cancel(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	if st := waitSettled(t, c, a.ID, "a to settle"); st != cairnq.StatusCanceled {
		t.Fatalf("step a %s, want canceled: the cancel wins its success", st)
	}
	return rec
}

// GetWorkflow of a running workflow whose succeeded step another SDK
// purged shows it succeeded (its succeeded key).
func TestWorkflowGetShowsAPurgedSucceededStep(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		release := startQuickAndHeld(t, c, cairnq.NoWorkflowSweep)
		defer close(release)
		rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{{Step: "leaf", Task: "wf.quick"}, {Step: "held", Task: "wf.held"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		leaf := stepTask(t, c, rec.ID, "leaf")
		waitStatus(t, c, leaf.ID, cairnq.StatusSucceeded, "leaf")
		if _, err := c.Store().Purge(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if st := stepStates(t, c, rec.ID)["leaf"]; st != cairnq.StepState(cairnq.StatusSucceeded) {
			t.Fatalf("GetWorkflow says the purged, succeeded leaf is %q", st)
		}
	})
}

// A leaf asked to stop that returns success settles canceled through the
// group, which must not write its succeeded key: purged by another SDK,
// it must not count as succeeded.
func TestWorkflowCanceledLeafIsNotASuccess(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		releaseA, releaseB := make(chan struct{}), make(chan struct{})
		w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 4, WorkflowSweep: 50 * time.Millisecond})
		handleHeld(t, w, "wf.a", releaseA)
		handleHeld(t, w, "wf.b", releaseB)
		startWorker(t, w)
		rec := cancelRunningA(t, c, []cairnq.WorkflowStep{{Step: "a", Task: "wf.a"}, {Step: "b", Task: "wf.b"}}, releaseA)
		if ids, err := c.Store().Purge(context.Background(), nil); err != nil || len(ids) != 1 {
			t.Fatalf("purge %v %v", ids, err)
		}
		close(releaseB)
		if final := waitWorkflow(t, c, rec.ID); final.Status == cairnq.StatusSucceeded {
			t.Fatalf("workflow succeeded although step a was canceled")
		}
	})
}
