package cairnq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
)

// The workflow tests run on both backends against real databases; they
// wait on the record's outcome (Wait) or poll GetWorkflow, never on time.

// stepRuns counts each step's handler calls by step name.
type stepRuns struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *stepRuns) add(step string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[step]++
}

func (r *stepRuns) get(step string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[step]
}

// stepOf is the step name a step's task carries in its payload in these
// tests.
type stepIn struct {
	Step string `json:"step"`
}

// waitWorkflow waits for the workflow's record to end.
func waitWorkflow(t *testing.T, c *cairnq.Client, id string) *cairnq.Task {
	t.Helper()
	return waitTask(t, c, id)
}

// stepStates is GetWorkflow's states by step name.
func stepStates(t *testing.T, c *cairnq.Client, id string) map[string]cairnq.StepState {
	t.Helper()
	wf, err := c.GetWorkflow(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]cairnq.StepState{}
	for _, s := range wf.Steps {
		out[s.Step] = s.State
	}
	return out
}

// settleAsAnotherSDK claims one task named name on queue and completes
// it with result through the protocol alone, as a TypeScript or Python
// worker settles a step: no advance runs.
func settleAsAnotherSDK(t *testing.T, c *cairnq.Client, queue, name string, result any) {
	t.Helper()
	ctx := context.Background()
	claimed, err := c.Store().Claim(ctx, cairnqtype.ClaimParams{Queues: []string{queue}, Names: []string{name}, WorkerID: "ts-worker", Lease: time.Minute, Limit: 1})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("the plain claim of %s: %v, %d tasks", name, err, len(claimed))
	}
	if _, err := c.Store().Complete(ctx, claimed[0].ID, "ts-worker", result); err != nil {
		t.Fatal(err)
	}
}

// A diamond: a fans out to b and c, d waits for both and reads their
// results; every step runs once, d only after b and c succeeded, and the
// record succeeds with each step's task.
func TestWorkflowDiamond(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		var runs stepRuns
		word := cairnq.Define[stepIn, string]("wf.word")
		join := cairnq.Define[stepIn, string]("wf.join")
		// No sweep: every step is submitted, and the record settled, in
		// the transaction of a step's settlement.
		w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 4, WorkflowSweep: cairnq.NoWorkflowSweep})
		if err := word.Handle(w, func(ctx context.Context, tc *cairnq.TaskContext, in stepIn) (string, error) {
			runs.add(in.Step)
			return "<" + in.Step + ">", nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		if err := join.Handle(w, func(ctx context.Context, tc *cairnq.TaskContext, in stepIn) (string, error) {
			runs.add(in.Step)
			b, err := cairnq.StepResult[string](ctx, tc, "b")
			if err != nil {
				return "", err
			}
			cr, err := cairnq.StepResult[string](ctx, tc, "c")
			if err != nil {
				return "", err
			}
			return b + cr, nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
			word.Step("a", stepIn{"a"}, nil),
			word.Step("b", stepIn{"b"}, nil, "a"),
			word.Step("c", stepIn{"c"}, nil, "a"),
			join.Step("d", stepIn{"d"}, nil, "b", "c"),
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Name != cairnq.WorkflowName || rec.Status != cairnq.StatusQueued {
			t.Fatalf("record %s %s, want a queued %s", rec.Name, rec.Status, cairnq.WorkflowName)
		}
		final := waitWorkflow(t, c, rec.ID)
		if final.Status != cairnq.StatusSucceeded {
			t.Fatalf("workflow %s: %+v", final.Status, final.Error)
		}
		for _, s := range []string{"a", "b", "c", "d"} {
			if n := runs.get(s); n != 1 {
				t.Errorf("step %s ran %d times, want 1", s, n)
			}
		}
		d, err := c.GetByKey(ctx, cairnq.StepKey(rec.ID, "d"))
		if err != nil {
			t.Fatal(err)
		}
		var out string
		if err := d.DecodeResult(&out); err != nil || out != "<b><c>" {
			t.Errorf("d's result %q (%v), want <b><c>", out, err)
		}
		if d.ParentID != rec.ID || d.RootID != rec.ID {
			t.Errorf("d's parent %s and root %s, want the record %s", d.ParentID, d.RootID, rec.ID)
		}
		var result struct {
			Steps map[string]struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"steps"`
		}
		if err := final.DecodeResult(&result); err != nil {
			t.Fatal(err)
		}
		if len(result.Steps) != 4 || result.Steps["d"].ID != d.ID || result.Steps["d"].Status != "succeeded" {
			t.Errorf("record's result %+v, want the 4 steps with d as %s", result.Steps, d.ID)
		}
		wf, err := c.GetWorkflow(ctx, rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		if wf.Status != cairnq.StatusSucceeded || len(wf.Steps) != 4 {
			t.Fatalf("GetWorkflow: %s with %d steps", wf.Status, len(wf.Steps))
		}
		for _, s := range wf.Steps {
			if s.State != cairnq.StepState(cairnq.StatusSucceeded) || s.TaskID == "" || s.Attempt != 1 {
				t.Errorf("step %+v, want succeeded on its first attempt", s)
			}
		}
	})
}

// Fan-out and fan-in: ten steps after one, one after the ten; nothing of
// the fan-in runs before the last of the ten succeeded.
func TestWorkflowFanOutFanIn(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		var runs stepRuns
		var mu sync.Mutex
		var order []string
		w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 8, WorkflowSweep: cairnq.NoWorkflowSweep})
		if err := w.Handle("wf.step", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			var in stepIn
			if err := tc.Decode(&in); err != nil {
				return nil, err
			}
			runs.add(in.Step)
			mu.Lock()
			order = append(order, in.Step)
			mu.Unlock()
			return nil, nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		steps := []cairnq.WorkflowStep{{Step: "start", Task: "wf.step", Payload: stepIn{"start"}}}
		var fan []string
		for i := range 10 {
			name := fmt.Sprintf("part%d", i)
			fan = append(fan, name)
			steps = append(steps, cairnq.WorkflowStep{Step: name, Task: "wf.step", Payload: stepIn{name}, After: []string{"start"}})
		}
		steps = append(steps, cairnq.WorkflowStep{Step: "end", Task: "wf.step", Payload: stepIn{"end"}, After: fan})
		rec, err := c.SubmitWorkflow(ctx, steps, nil)
		if err != nil {
			t.Fatal(err)
		}
		if final := waitWorkflow(t, c, rec.ID); final.Status != cairnq.StatusSucceeded {
			t.Fatalf("workflow %s: %+v", final.Status, final.Error)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(order) != 12 || order[0] != "start" || order[11] != "end" {
			t.Errorf("ran %v, want start, the ten parts, end", order)
		}
		for _, s := range append(fan, "start", "end") {
			if runs.get(s) != 1 {
				t.Errorf("step %s ran %d times", s, runs.get(s))
			}
		}
	})
}

// A step that fails for good fails the workflow: the steps not started
// are never submitted, a running one is asked to stop, and the record's
// envelope names the step.
func TestWorkflowFailCancels(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 4, HeartbeatInterval: 50 * time.Millisecond})
		slowStarted := make(chan struct{})
		if err := w.Handle("wf.slow", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			close(slowStarted)
			<-ctx.Done() // until the cancel the workflow's failure asks for
			return nil, ctx.Err()
		}, nil); err != nil {
			t.Fatal(err)
		}
		if err := w.Handle("wf.bad", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			<-slowStarted
			return nil, &cairnq.TaskError{Type: "Bad", Code: "bad", Message: "no", Retryable: false}
		}, nil); err != nil {
			t.Fatal(err)
		}
		if err := w.Handle("wf.never", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			t.Error("a step after the failed one ran")
			return nil, nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
			{Step: "slow", Task: "wf.slow"},
			{Step: "bad", Task: "wf.bad"},
			{Step: "after", Task: "wf.never", After: []string{"bad"}},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		final := waitWorkflow(t, c, rec.ID)
		if final.Status != cairnq.StatusFailed || final.Error == nil || final.Error.Type != "WorkflowFailed" {
			t.Fatalf("workflow %s %+v, want failed with WorkflowFailed", final.Status, final.Error)
		}
		waitFor(t, "the slow step to end", func() bool {
			return stepStates(t, c, rec.ID)["slow"] == cairnq.StepState(cairnq.StatusCanceled)
		})
		st := stepStates(t, c, rec.ID)
		if st["bad"] != cairnq.StepState(cairnq.StatusFailed) || st["after"] != cairnq.StepSkipped {
			t.Errorf("steps %v, want bad failed and after skipped", st)
		}
		if _, err := c.GetByKey(ctx, cairnq.StepKey(rec.ID, "after")); !errors.Is(err, cairnq.ErrNotFound) {
			t.Errorf("the step after the failure has a task: %v", err)
		}
	})
}

// With ContinueOnFailure the branches that do not wait on the failed
// step run on; the workflow still fails, the failed step's dependants
// skipped.
func TestWorkflowContinueBranches(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		var runs stepRuns
		w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 2})
		if err := w.Handle("wf.step", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			var in stepIn
			if err := tc.Decode(&in); err != nil {
				return nil, err
			}
			runs.add(in.Step)
			if in.Step == "bad" {
				return nil, &cairnq.TaskError{Type: "Bad", Code: "bad", Message: "no", Retryable: false}
			}
			return nil, nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
			{Step: "bad", Task: "wf.step", Payload: stepIn{"bad"}},
			{Step: "after-bad", Task: "wf.step", Payload: stepIn{"after-bad"}, After: []string{"bad"}},
			{Step: "good", Task: "wf.step", Payload: stepIn{"good"}},
			{Step: "after-good", Task: "wf.step", Payload: stepIn{"after-good"}, After: []string{"good"}},
		}, &cairnq.WorkflowOptions{ContinueOnFailure: true})
		if err != nil {
			t.Fatal(err)
		}
		final := waitWorkflow(t, c, rec.ID)
		if final.Status != cairnq.StatusFailed {
			t.Fatalf("workflow %s, want failed", final.Status)
		}
		st := stepStates(t, c, rec.ID)
		want := map[string]cairnq.StepState{"bad": "failed", "after-bad": cairnq.StepSkipped, "good": "succeeded", "after-good": "succeeded"}
		for k, v := range want {
			if st[k] != v {
				t.Errorf("step %s %s, want %s", k, st[k], v)
			}
		}
		if runs.get("after-bad") != 0 || runs.get("after-good") != 1 {
			t.Errorf("runs %v", runs.n)
		}
	})
}

// A workflow the SDK refuses is an *ArgumentError and writes nothing.
func TestWorkflowSubmitRefuses(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		for _, tc := range []struct {
			what  string
			steps []cairnq.WorkflowStep
		}{
			{"no steps", nil},
			{"a step with no name", []cairnq.WorkflowStep{{Task: "x"}}},
			{"a step with no task", []cairnq.WorkflowStep{{Step: "a"}}},
			{"a name twice", []cairnq.WorkflowStep{{Step: "a", Task: "x"}, {Step: "a", Task: "x"}}},
			{"a colon in a name", []cairnq.WorkflowStep{{Step: "a:b", Task: "x"}}},
			{"after an unknown step", []cairnq.WorkflowStep{{Step: "a", Task: "x", After: []string{"b"}}}},
			{"a cycle", []cairnq.WorkflowStep{{Step: "a", Task: "x", After: []string{"b"}}, {Step: "b", Task: "x", After: []string{"a"}}}},
			{"a key", []cairnq.WorkflowStep{{Step: "a", Task: "x", Options: &cairnq.SubmitOptions{Key: "k"}}}},
			{"a parent", []cairnq.WorkflowStep{{Step: "a", Task: "x", Options: &cairnq.SubmitOptions{ParentID: "task_x"}}}},
			{"a bad priority", []cairnq.WorkflowStep{{Step: "a", Task: "x", Options: &cairnq.SubmitOptions{Priority: 1 << 40}}}},
			{"the reserved metadata", []cairnq.WorkflowStep{{Step: "a", Task: "x", Options: &cairnq.SubmitOptions{Metadata: map[string]any{"cairnq_workflow": 1}}}}},
		} {
			_, err := c.SubmitWorkflow(ctx, tc.steps, nil)
			var ae *cairnq.ArgumentError
			if !errors.As(err, &ae) {
				t.Errorf("%s: %v, want an *ArgumentError", tc.what, err)
			}
		}
		if _, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{{Step: "a", Task: "x", Payload: func() {}}}, nil); !errors.As(err, new(*cairnq.SerializationError)) {
			t.Errorf("an unencodable payload: %v, want a *SerializationError", err)
		}
		if n := countTasks(t, c); n != 0 {
			t.Errorf("%d tasks written by refused workflows", n)
		}
		w := newWorker(t, c, nil)
		if err := w.Handle(cairnq.WorkflowName, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return nil, nil }, nil); !errors.As(err, new(*cairnq.ArgumentError)) {
			t.Errorf("Handle(%q): %v, want an *ArgumentError", cairnq.WorkflowName, err)
		}
	})
}

// A step settled the way another SDK's worker settles it (the protocol's
// claim and complete, no advance) is advanced by a Go worker's sweep:
// the next step is submitted and the workflow ends.
func TestWorkflowPlainProtocolWorker(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
			{Step: "plain", Task: "wf.plain", Options: &cairnq.SubmitOptions{Queue: "elsewhere"}},
			{Step: "go", Task: "wf.go", After: []string{"plain"}},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		settleAsAnotherSDK(t, c, "elsewhere", "wf.plain", map[string]any{"from": "ts"})
		if s := stepStates(t, c, rec.ID); s["go"] != cairnq.StepWaiting {
			t.Fatalf("the plain settlement advanced the workflow: %v", s)
		}
		ran := make(chan json.RawMessage, 1)
		w := newWorker(t, c, &cairnq.WorkerOptions{WorkflowSweep: 50 * time.Millisecond})
		if err := w.Handle("wf.go", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			r, err := tc.StepResult(ctx, "plain")
			ran <- r
			return nil, err
		}, nil); err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		if final := waitWorkflow(t, c, rec.ID); final.Status != cairnq.StatusSucceeded {
			t.Fatalf("workflow %s %+v", final.Status, final.Error)
		}
		var got struct{ From string }
		if r := <-ran; json.Unmarshal(r, &got) != nil || got.From != "ts" {
			t.Errorf("the go step read %s of the plain one", r)
		}
	})
}

// SubmitWorkflowTx writes the whole workflow in the application's
// transaction: nothing of it after a rollback, all of it after a commit.
func TestWorkflowSubmitTx(t *testing.T) {
	c, ex := openPostgresApp(t, nil)
	ctx := context.Background()
	steps := []cairnq.WorkflowStep{{Step: "a", Task: "x"}, {Step: "b", Task: "x", After: []string{"a"}}}
	errRollback := errors.New("roll back")
	for _, commit := range []bool{false, true} {
		var recID string
		err := ex.Tx(ctx, func(ctx context.Context, sess executor.Session) error {
			rec, err := c.SubmitWorkflowTx(ctx, sess, steps, nil)
			if err != nil {
				return err
			}
			recID = rec.ID
			if _, err := c.GetWorkflow(ctx, recID); !errors.Is(err, cairnq.ErrNotFound) {
				t.Errorf("an uncommitted workflow is visible outside its transaction: %v", err)
			}
			if !commit {
				return errRollback
			}
			return nil
		})
		if err != nil && !errors.Is(err, errRollback) {
			t.Fatal(err)
		}
		_, err = c.GetWorkflow(ctx, recID)
		switch {
		case !commit && !errors.Is(err, cairnq.ErrNotFound):
			t.Errorf("after a rollback: %v, want ErrNotFound", err)
		case commit && err != nil:
			t.Errorf("after a commit: %v", err)
		}
	}
	if n := countTasks(t, c); n != 2 {
		t.Errorf("%d tasks, want the committed record and its first step", n)
	}
	if _, err := openTemp(t, nil).SubmitWorkflowTx(ctx, nil, steps, nil); !errors.Is(err, cairnq.ErrUnsupported) {
		t.Errorf("SubmitWorkflowTx on SQLite: %v, want ErrUnsupported", err)
	}
}

// A step adds one step per item of its result, and a step that waits for
// all of them; they run after it, the fan-in last, and the workflow
// succeeds. An attempt that failed after adding adds nothing.
func TestWorkflowDynamicSteps(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		var runs stepRuns
		var mu sync.Mutex
		var sum int
		w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 4, RetryBackoff: cairnq.NoRetryBackoff})
		item := cairnq.Define[int, int]("wf.item")
		if err := w.Handle("wf.split", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			runs.add("split")
			var parts []string
			for i := range 5 {
				name := fmt.Sprintf("item%d", i)
				parts = append(parts, name)
				if err := tc.AddSteps(item.Step(name, i+1, nil)); err != nil {
					return nil, err
				}
			}
			if err := tc.AddSteps(cairnq.WorkflowStep{Step: "total", Task: "wf.total", After: parts}); err != nil {
				return nil, err
			}
			if tc.Attempt() == 1 {
				return nil, errors.New("the first attempt fails after adding")
			}
			return nil, nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		if err := item.Handle(w, func(ctx context.Context, tc *cairnq.TaskContext, n int) (int, error) {
			runs.add(fmt.Sprintf("item%d", n-1))
			return n * 10, nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		if err := w.Handle("wf.total", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			runs.add("total")
			total := 0
			for i := range 5 {
				v, err := cairnq.StepResult[int](ctx, tc, fmt.Sprintf("item%d", i))
				if err != nil {
					return nil, err
				}
				total += v
			}
			mu.Lock()
			sum = total
			mu.Unlock()
			return total, nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{{Step: "split", Task: "wf.split"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if final := waitWorkflow(t, c, rec.ID); final.Status != cairnq.StatusSucceeded {
			t.Fatalf("workflow %s %+v", final.Status, final.Error)
		}
		mu.Lock()
		if sum != 150 {
			t.Errorf("total %d, want 150", sum)
		}
		mu.Unlock()
		if runs.get("split") != 2 || runs.get("total") != 1 {
			t.Errorf("runs %v, want split twice (a failed attempt), total once", runs.n)
		}
		for i := range 5 {
			if n := runs.get(fmt.Sprintf("item%d", i)); n != 1 {
				t.Errorf("item%d ran %d times", i, n)
			}
		}
		wf, err := c.GetWorkflow(ctx, rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(wf.Steps) != 7 {
			t.Errorf("GetWorkflow lists %d steps, want split, 5 items and total", len(wf.Steps))
		}
		// Added steps that do not fit the workflow fail the adder for good.
		bad, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{{Step: "split", Task: "wf.dup"}, {Step: "later", Task: "wf.item", After: []string{"split"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		w2 := newWorker(t, c, &cairnq.WorkerOptions{Queues: []string{cairnq.DefaultQueue}})
		if err := w2.Handle("wf.dup", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			return nil, tc.AddSteps(cairnq.WorkflowStep{Step: "later", Task: "wf.item"}) // taken
		}, nil); err != nil {
			t.Fatal(err)
		}
		startWorker(t, w2)
		final := waitWorkflow(t, c, bad.ID)
		adder, err := c.GetByKey(ctx, cairnq.StepKey(bad.ID, "split"))
		if err != nil {
			t.Fatal(err)
		}
		if final.Status != cairnq.StatusFailed || adder.Error == nil || adder.Error.Type != "InvalidSteps" {
			t.Errorf("a step adding a taken name: workflow %s, step %s %+v", final.Status, adder.Status, adder.Error)
		}
	})
}

// CancelWorkflow cancels the queued steps and stops the running ones;
// RetryWorkflow waits for the stopping ones to end, then runs again what
// did not succeed, and only that. Client.Cancel of the record does what
// CancelWorkflow does.
func TestWorkflowCancelAndRetry(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		var runs stepRuns
		block := make(chan struct{})
		started := make(chan struct{}, 4)
		w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 4, HeartbeatInterval: 50 * time.Millisecond})
		if err := w.Handle("wf.step", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			var in stepIn
			if err := tc.Decode(&in); err != nil {
				return nil, err
			}
			runs.add(in.Step)
			if in.Step == "wait" {
				started <- struct{}{}
				<-block // deaf to the cancel until the test lets it go
			}
			return in.Step, nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		steps := []cairnq.WorkflowStep{
			{Step: "first", Task: "wf.step", Payload: stepIn{"first"}},
			{Step: "wait", Task: "wf.step", Payload: stepIn{"wait"}, After: []string{"first"}},
			{Step: "last", Task: "wf.step", Payload: stepIn{"last"}, After: []string{"wait"}},
		}
		rec, err := c.SubmitWorkflow(ctx, steps, nil)
		if err != nil {
			t.Fatal(err)
		}
		<-started
		if _, err := c.CancelWorkflow(ctx, rec.ID); err != nil {
			t.Fatal(err)
		}
		final := waitWorkflow(t, c, rec.ID)
		if final.Status != cairnq.StatusCanceled {
			t.Fatalf("canceled workflow %s", final.Status)
		}
		if _, err := c.RetryWorkflow(ctx, rec.ID); !errors.As(err, new(*cairnq.ArgumentError)) {
			t.Errorf("retrying while a step is still stopping: %v, want an *ArgumentError", err)
		}
		close(block)
		waitFor(t, "the running step to end canceled", func() bool {
			return stepStates(t, c, rec.ID)["wait"] == cairnq.StepState(cairnq.StatusCanceled)
		})
		if st := stepStates(t, c, rec.ID); st["first"] != "succeeded" || st["last"] != cairnq.StepSkipped {
			t.Errorf("after cancel: %v", st)
		}
		if _, err := c.RetryWorkflow(ctx, rec.ID); err != nil {
			t.Fatal(err)
		}
		final = waitWorkflow(t, c, rec.ID)
		if final.Status != cairnq.StatusSucceeded {
			t.Fatalf("retried workflow %s %+v", final.Status, final.Error)
		}
		if runs.get("first") != 1 || runs.get("wait") != 2 || runs.get("last") != 1 {
			t.Errorf("runs %v, want first once, wait twice, last once", runs.n)
		}
		if _, err := c.RetryWorkflow(ctx, rec.ID); !errors.As(err, new(*cairnq.ArgumentError)) {
			t.Errorf("retrying a succeeded workflow: %v, want an *ArgumentError", err)
		}

		// Cancel on the record, as a console's button does: the queued
		// steps go too, and RetryWorkflow resumes it all the same.
		delayed := []cairnq.WorkflowStep{{Step: "later", Task: "wf.step", Payload: stepIn{"later"}, Options: &cairnq.SubmitOptions{Delay: time.Hour}}}
		rec2, err := c.SubmitWorkflow(ctx, delayed, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Cancel(ctx, rec2.ID); err != nil {
			t.Fatal(err)
		}
		if st := stepStates(t, c, rec2.ID); st["later"] != cairnq.StepState(cairnq.StatusCanceled) {
			t.Errorf("after Cancel of the record: %v, want its queued step canceled", st)
		}
		// A plain retry of the record, as another SDK's console does: the
		// next sweep resumes the workflow.
		if retried, err := c.Retry(ctx, rec2.ID, &cairnq.RetryOptions{ResetAttempt: true}); err != nil || retried == nil {
			t.Fatalf("Retry of the record: %v %v", retried, err)
		}
		if final := waitWorkflow(t, c, rec2.ID); final.Status != cairnq.StatusSucceeded {
			t.Errorf("the workflow retried by the protocol after Cancel: %s %+v, want resumed and succeeded", final.Status, final.Error)
		}
		if runs.get("later") != 1 {
			t.Errorf("the resumed step ran %d times, want once", runs.get("later"))
		}

		task, err := c.Submit(ctx, "plain", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CancelWorkflow(ctx, task.ID); !errors.As(err, new(*cairnq.ArgumentError)) {
			t.Errorf("CancelWorkflow of a plain task: %v", err)
		}
		if _, err := c.GetWorkflow(ctx, "task_none"); !errors.Is(err, cairnq.ErrNotFound) {
			t.Errorf("GetWorkflow of no task: %v", err)
		}
	})
}

// A failed workflow's record retried through the protocol alone (as
// another SDK's console would) resumes at a Go worker's sweep.
func TestWorkflowRetriedByAnotherSDK(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		var runs stepRuns
		var fail sync.Mutex
		failing := true
		w := newWorker(t, c, &cairnq.WorkerOptions{WorkflowSweep: 50 * time.Millisecond})
		if err := w.Handle("wf.step", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			var in stepIn
			if err := tc.Decode(&in); err != nil {
				return nil, err
			}
			runs.add(in.Step)
			fail.Lock()
			defer fail.Unlock()
			if in.Step == "b" && failing {
				return nil, &cairnq.TaskError{Type: "Bad", Code: "bad", Message: "not yet", Retryable: false}
			}
			return nil, nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		final, err := c.CallWorkflow(ctx, []cairnq.WorkflowStep{
			{Step: "a", Task: "wf.step", Payload: stepIn{"a"}},
			{Step: "b", Task: "wf.step", Payload: stepIn{"b"}, After: []string{"a"}},
			{Step: "c", Task: "wf.step", Payload: stepIn{"c"}, After: []string{"b"}},
		}, nil, &cairnq.WaitOptions{Timeout: time.Minute})
		var tf *cairnq.TaskFailedError
		if !errors.As(err, &tf) || tf.Envelope.Type != "WorkflowFailed" {
			t.Fatalf("CallWorkflow: %v, want a WorkflowFailed *TaskFailedError", err)
		}
		fail.Lock()
		failing = false
		fail.Unlock()
		if _, err := c.Store().Retry(ctx, tf.ID, true); err != nil {
			t.Fatal(err)
		}
		if final = waitWorkflow(t, c, tf.ID); final.Status != cairnq.StatusSucceeded {
			t.Fatalf("workflow retried by the protocol: %s %+v", final.Status, final.Error)
		}
		if runs.get("a") != 1 || runs.get("b") != 2 || runs.get("c") != 1 {
			t.Errorf("runs %v, want a once, b twice, c once", runs.n)
		}
	})
}

// A workflow this SDK cannot advance (here, a step whose options name
// one it does not know, as a later version might write) is left alone:
// the settlement that meets it commits, the sweep hands its record back
// for later and goes on to the other workflows.
func TestWorkflowUnreadableRecordLeftAlone(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tasks.db")
	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	odd, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
		{Step: "a", Task: "wf.go"},
		{Step: "b", Task: "wf.go", After: []string{"a"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, path, `UPDATE cairnq_tasks SET payload = json_set(payload, '$.steps[1].options', json('{"timeout_ms": 5}')) WHERE id = '`+odd.ID+`'`)
	plain, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
		{Step: "ts", Task: "wf.ts"},
		{Step: "go", Task: "wf.go", After: []string{"ts"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	settleAsAnotherSDK(t, c, cairnq.DefaultQueue, "wf.ts", nil)
	var errs []string
	var mu sync.Mutex
	w := newWorker(t, c, &cairnq.WorkerOptions{WorkflowSweep: 20 * time.Millisecond,
		OnError: func(err error, phase cairnq.ErrorPhase, taskID string) {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err.Error())
		}})
	if err := w.Handle("wf.go", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return nil, nil }, nil); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	if final := waitWorkflow(t, c, plain.ID); final.Status != cairnq.StatusSucceeded {
		t.Fatalf("the readable workflow: %s", final.Status)
	}
	a, err := c.GetByKey(ctx, cairnq.StepKey(odd.ID, "a"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "step a to succeed", func() bool {
		got, err := c.Get(ctx, a.ID)
		return err == nil && got.Status == cairnq.StatusSucceeded
	})
	got, _ := c.Get(ctx, a.ID)
	if got.Attempt != 1 {
		t.Errorf("step a ran %d attempts: its settlement did not commit", got.Attempt)
	}
	if st := stepStates(t, c, odd.ID); st["b"] != cairnq.StepWaiting {
		t.Errorf("the unreadable workflow's steps: %v", st)
	}
	if rec, _ := c.Get(ctx, odd.ID); rec.Status != cairnq.StatusQueued {
		t.Errorf("the unreadable workflow's record is %s, want left queued", rec.Status)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errs) > 0 {
		t.Errorf("the worker reported %v", errs)
	}
}

// A step settling in the application's transaction (SucceedTx) whose
// added steps the workflow refuses gets an error and writes nothing;
// once its handler returns, the step fails for good and the workflow
// with it, without waiting on the lock the application's transaction
// held.
func TestWorkflowSucceedTxRefusedSteps(t *testing.T) {
	c, ex := openPostgresApp(t, nil)
	ctx := context.Background()
	refused := make(chan error, 1)
	w := newWorker(t, c, nil)
	if err := w.Handle("wf.tx", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		if err := tc.AddSteps(cairnq.WorkflowStep{Step: "later", Task: "wf.tx"}); err != nil { // a name the workflow has
			return nil, err
		}
		err := ex.Tx(ctx, func(ctx context.Context, sess executor.Session) error {
			return tc.SucceedTx(ctx, sess, "done")
		})
		refused <- err
		return nil, err
	}, nil); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{{Step: "tx", Task: "wf.tx"}, {Step: "later", Task: "wf.tx", After: []string{"tx"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-refused; !errors.As(err, new(*cairnq.ArgumentError)) {
		t.Errorf("SucceedTx with refused steps: %v, want an error wrapping an *ArgumentError", err)
	}
	final := waitWorkflow(t, c, rec.ID)
	step, err := c.GetByKey(ctx, cairnq.StepKey(rec.ID, "tx"))
	if err != nil {
		t.Fatal(err)
	}
	if final.Status != cairnq.StatusFailed || step.Status != cairnq.StatusFailed || step.Error == nil || step.Error.Type != "InvalidSteps" || step.Attempt != 1 {
		t.Errorf("workflow %s, step %s after %d attempts (%+v); want both failed at once with InvalidSteps", final.Status, step.Status, step.Attempt, step.Error)
	}
}
