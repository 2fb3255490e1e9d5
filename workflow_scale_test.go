package cairnq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
)

// The advance from a settled step (issue 49): a step's success reads
// only what waits for it, through each process's cache of the
// definition, and leaves the whole workflow to a full advance only at
// its end, on a failure, or when the record changed.

// onBothBackendsTwice runs test on both backends with two clients on one
// database, as two processes: each has its own cache of the workflows it
// advances.
func onBothBackendsTwice(t *testing.T, test func(t *testing.T, a, b *cairnq.Client)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "tasks.db")
		open := func() *cairnq.Client {
			c, err := cairnq.Open(context.Background(), path, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}
		test(t, open(), open())
	})
	t.Run("postgres", func(t *testing.T) {
		a, dsn := openPostgresDSN(t, nil)
		ex, err := cairnqpgx.Open(context.Background(), dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := cairnq.OpenPostgres(context.Background(), ex, &cairnq.PostgresOptions{CloseExecutor: true})
		if err != nil {
			ex.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		test(t, a, b)
	})
}

// runStepsOn runs a worker on c for the steps of these tests: wf.noop
// counts each step's run by the step named in its payload, wf.fan adds
// n leaves and a join that waits for them all; the join checks that
// every leaf ran before it.
func runStepsOn(t *testing.T, c *cairnq.Client, runs *stepRuns, n int, joinEarly chan<- string) {
	t.Helper()
	w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 4, WorkflowSweep: cairnq.NoWorkflowSweep})
	if err := w.Handle("wf.noop", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var in stepIn
		if err := json.Unmarshal(tc.Payload(), &in); err != nil {
			return nil, err
		}
		if in.Step == "join" {
			for i := range n {
				if runs.get(fmt.Sprint("leaf-", i)) == 0 {
					joinEarly <- fmt.Sprint("leaf-", i)
					break
				}
			}
		}
		runs.add(in.Step)
		return nil, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("wf.fan", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		steps := make([]cairnq.WorkflowStep, 0, n+1)
		names := make([]string, 0, n)
		for i := range n {
			name := fmt.Sprint("leaf-", i)
			names = append(names, name)
			steps = append(steps, cairnq.WorkflowStep{Step: name, Task: "wf.noop", Payload: stepIn{name}})
		}
		steps = append(steps, cairnq.WorkflowStep{Step: "join", Task: "wf.noop", Payload: stepIn{"join"}, After: names})
		return nil, tc.AddSteps(steps...)
	}, nil); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
}

// TestWorkflowWideAdvancesFromSteps runs a fan-out of 300 leaves and a
// join on two processes' workers, whose caches each go stale as the
// other's settlements and the fan's added steps move the record: every
// step runs once, the join after every leaf.
func TestWorkflowWideAdvancesFromSteps(t *testing.T) {
	const n = 300
	onBothBackendsTwice(t, func(t *testing.T, a, b *cairnq.Client) {
		ctx := context.Background()
		runs := &stepRuns{}
		joinEarly := make(chan string, 2)
		runStepsOn(t, a, runs, n, joinEarly)
		runStepsOn(t, b, runs, n, joinEarly)
		rec, err := a.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
			{Step: "first", Task: "wf.noop", Payload: stepIn{"first"}},
			{Step: "fan", Task: "wf.fan", After: []string{"first"}},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if final := waitWorkflow(t, a, rec.ID); final.Status != cairnq.StatusSucceeded {
			t.Fatalf("workflow %s %+v", final.Status, final.Error)
		}
		select {
		case leaf := <-joinEarly:
			t.Fatalf("the join ran before %s", leaf)
		default:
		}
		for _, step := range []string{"first", "join", "leaf-0", fmt.Sprint("leaf-", n-1)} {
			if got := runs.get(step); got != 1 {
				t.Errorf("step %s ran %d times, want once", step, got)
			}
		}
		states := stepStates(t, b, rec.ID)
		for i := range n {
			name := fmt.Sprint("leaf-", i)
			if runs.get(name) != 1 || states[name] != cairnq.StepState(cairnq.StatusSucceeded) {
				t.Fatalf("leaf %s ran %d times, state %s", name, runs.get(name), states[name])
			}
		}
	})
}

// TestWorkflowWideReadsItsStepsRarely pins the cost that issue 49
// measured as quadratic: a workflow of 300 leaves and a join read every
// step's row in a handful of advances (the fan's, which adds them, and
// the end's), not once per settled step.
func TestWorkflowWideReadsItsStepsRarely(t *testing.T) {
	const n = 300
	ctx := context.Background()
	_, dsn := openPostgresDSN(t, nil)
	c, counted := openCounted(ctx, t, dsn)
	runs := &stepRuns{}
	joinEarly := make(chan string, 1)
	runStepsOn(t, c, runs, n, joinEarly)
	rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{{Step: "fan", Task: "wf.fan"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if final := waitWorkflow(t, c, rec.ID); final.Status != cairnq.StatusSucceeded {
		t.Fatalf("workflow %s %+v", final.Status, final.Error)
	}
	got := counted.readSteps()
	t.Logf("%d reads of every step for %d settled steps", got, n+2)
	if got > 5 {
		t.Errorf("%d reads of every step for %d settled steps, want at most 5", got, n+2)
	}
}

// TestWorkflowLeafPurgedAfterItsAdvance: a step nothing waits for,
// advanced from its settlement and then purged by another SDK before
// any full advance read it, still counts as succeeded at the end
// (its succeeded key), not as lost.
func TestWorkflowLeafPurgedAfterItsAdvance(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		release := startQuickAndHeld(t, c, cairnq.NoWorkflowSweep)
		purgeThenRelease(t, c, []cairnq.WorkflowStep{
			{Step: "leaf", Task: "wf.quick"},
			{Step: "held", Task: "wf.held"},
		}, "leaf", release)
	})
}

// A settlement that adds 256 steps or more writes them by COPY through a
// pgx executor: each added step is the row a smaller settlement's
// insert_many writes (its queue, payload, parent and root the record),
// under its key, and runs.
func TestWorkflowAddedStepsByCopyPostgres(t *testing.T) {
	const n = 300
	c, ex := openCopyCounting(t)
	ctx := context.Background()
	w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 4, WorkflowSweep: cairnq.NoWorkflowSweep})
	if err := w.Handle("wf.fan", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		steps := make([]cairnq.WorkflowStep, n)
		for i := range steps {
			name := fmt.Sprint("leaf-", i)
			steps[i] = cairnq.WorkflowStep{Step: name, Task: "wf.leaf", Payload: stepIn{name},
				Options: &cairnq.SubmitOptions{Queue: "copied", Priority: 3}}
		}
		return nil, tc.AddSteps(steps...)
	}, nil); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w) // serves the default queue only: the leaves wait
	rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{{Step: "fan", Task: "wf.fan"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wf *cairnq.Workflow
	waitFor(t, "the fan's added steps", func() bool {
		wf, err = c.GetWorkflow(ctx, rec.ID)
		return err == nil && len(wf.Steps) == n+1 && wf.Steps[n].TaskID != ""
	})
	for _, st := range wf.Steps[1:] {
		task, err := c.Get(ctx, st.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		var in stepIn
		if err := json.Unmarshal(task.Payload, &in); err != nil || in.Step != st.Step {
			t.Fatalf("step %s: payload %s (%v)", st.Step, task.Payload, err)
		}
		if task.Name != "wf.leaf" || task.Queue != "copied" || task.Priority != 3 || task.Status != cairnq.StatusQueued ||
			task.ParentID != rec.ID || task.RootID != rec.ID || task.CreatedAt.IsZero() {
			t.Fatalf("step %s: %+v, want a queued wf.leaf on copied at priority 3 under the record", st.Step, task)
		}
		checkStepKeys(t, c, rec.ID, st.Step, task.ID)
	}
	// The steps' keys, which the look found free; their ledger keys,
	// which a full advance does not look up, are upserted.
	if got := ex.keyRows.Load(); got != n {
		t.Fatalf("%d keys copied, want the %d steps' keys", got, n)
	}
	runCopiedLeaves(t, c, rec.ID)
}

// checkStepKeys fails t unless step's key points at its task and its
// ledger key at the record.
func checkStepKeys(t *testing.T, c *cairnq.Client, record, step, taskID string) {
	t.Helper()
	ctx := context.Background()
	if key, err := c.GetByKey(ctx, "cairnq:workflow:"+record+":"+step); err != nil || key.ID != taskID {
		t.Fatalf("step %s's key: %+v %v, want %s", step, key, err, taskID)
	}
	if ledger, err := c.GetByKey(ctx, "cairnq:workflow-ledger:"+record+":"+step); err != nil || ledger.ID != record {
		t.Fatalf("step %s's ledger key: %+v %v, want the record %s", step, ledger, err, record)
	}
}

// A settled step that leaves hundreds of steps ready at once writes
// them, their keys and their ledger keys by COPY (the keys the look found
// free), and the workflow runs on as when they were upserted.
func TestWorkflowStepsReadyTogetherByCopyPostgres(t *testing.T) {
	const n = 300
	c, ex := openCopyCounting(t)
	rec := submitFanOut(t, c, n)
	startRoot(t, c)
	wf := waitForLeaves(t, c, rec.ID, n)
	if got := ex.keyRows.Load(); got != 2*n {
		t.Fatalf("%d keys copied, want the %d steps' keys and ledger keys", got, 2*n)
	}
	for _, st := range wf.Steps[1 : n+1] {
		if st.State != cairnq.StepState(cairnq.StatusQueued) {
			t.Fatalf("step %s is %s, want queued", st.Step, st.State)
		}
		checkStepKeys(t, c, rec.ID, st.Step, st.TaskID)
	}
	runCopiedLeaves(t, c, rec.ID)
}

// A key the look found free that is taken before the COPY (here by a
// write outside the workflow's lock, gone again right after) fails the
// advance's transaction; its retry looks again and writes the steps.
func TestWorkflowStepKeyTakenDuringCopyPostgres(t *testing.T) {
	const n = 300
	c, ex := openCopyCounting(t)
	rec := submitFanOut(t, c, n)
	taken := "cairnq:workflow:" + rec.ID + ":leaf-7"
	var conflicts atomic.Int64
	ex.onKeys = func(ctx context.Context, copyKeys func() (int64, error)) (int64, error) {
		if conflicts.Load() > 0 {
			return copyKeys()
		}
		ctx = context.WithoutCancel(ctx)
		if _, err := ex.Executor.Query(ctx, "INSERT INTO cairnq_task_keys (key, task_id, created_at_ms, updated_at_ms) VALUES ($1, $2, 0, 0)", taken, rec.ID); err != nil {
			return 0, err
		}
		n, err := copyKeys()
		conflicts.Add(1)
		if _, derr := ex.Executor.Query(ctx, "DELETE FROM cairnq_task_keys WHERE key = $1", taken); derr != nil {
			return n, errors.Join(err, derr)
		}
		return n, err
	}
	startRoot(t, c)
	wf := waitForLeaves(t, c, rec.ID, n)
	if conflicts.Load() != 1 || ex.keyRows.Load() != 2*n {
		t.Fatalf("%d conflicts, %d keys copied; want 1 and the %d of the retry", conflicts.Load(), ex.keyRows.Load(), 2*n)
	}
	for _, st := range wf.Steps[1 : n+1] {
		checkStepKeys(t, c, rec.ID, st.Step, st.TaskID)
	}
	runCopiedLeaves(t, c, rec.ID)
}

// submitFanOut submits a workflow of a root, n leaves on the queue
// "copied" waiting for it, and a join waiting for them.
func submitFanOut(t *testing.T, c *cairnq.Client, n int) *cairnq.Task {
	t.Helper()
	steps := []cairnq.WorkflowStep{{Step: "root", Task: "wf.root"}}
	var names []string
	for i := range n {
		name := fmt.Sprint("leaf-", i)
		names = append(names, name)
		steps = append(steps, cairnq.WorkflowStep{Step: name, Task: "wf.leaf", After: []string{"root"},
			Options: &cairnq.SubmitOptions{Queue: "copied"}})
	}
	steps = append(steps, cairnq.WorkflowStep{Step: "join", Task: "wf.leaf", After: names, Options: &cairnq.SubmitOptions{Queue: "copied"}})
	rec, err := c.SubmitWorkflow(context.Background(), steps, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// startRoot starts a worker for the default queue, where a fan-out's
// root runs; its leaves wait on "copied".
func startRoot(t *testing.T, c *cairnq.Client) {
	t.Helper()
	w := newWorker(t, c, &cairnq.WorkerOptions{WorkflowSweep: cairnq.NoWorkflowSweep})
	if err := w.Handle("wf.root", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return nil, nil }, nil); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
}

// waitForLeaves waits until the root's advance has inserted the n leaves
// of the workflow whose record is record, and returns the workflow then.
func waitForLeaves(t *testing.T, c *cairnq.Client, record string, n int) *cairnq.Workflow {
	t.Helper()
	var wf *cairnq.Workflow
	var err error
	waitFor(t, "the root's dependents", func() bool {
		wf, err = c.GetWorkflow(context.Background(), record)
		return err == nil && wf.Steps[n].TaskID != ""
	})
	return wf
}

// runCopiedLeaves starts a worker for the leaves waiting on the queue
// "copied" and waits for the workflow whose record is record to succeed.
func runCopiedLeaves(t *testing.T, c *cairnq.Client, record string) {
	t.Helper()
	w := newWorker(t, c, &cairnq.WorkerOptions{Queues: []string{"copied"}, WorkflowSweep: cairnq.NoWorkflowSweep})
	if err := w.Handle("wf.leaf", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return nil, nil }, nil); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	if final := waitWorkflow(t, c, record); final.Status != cairnq.StatusSucceeded {
		t.Fatalf("workflow %s %+v", final.Status, final.Error)
	}
}
