package faulttest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// The workflow faults: worker processes advancing the same workflows at
// once, and killed with SIGKILL at random points while they do.

const (
	// WorkflowStep is the task name of the workflow suite's steps.
	WorkflowStep = "fault.wf.step"
	// roleWorkflow runs a worker of WorkflowStep (and the sweep) until
	// the stop file exists or it is killed.
	roleWorkflow = "workflow"
	// envShortLease makes a workflow child's lease the shortest allowed,
	// so the tasks a killed child held come back soon.
	envShortLease = "CAIRNQ_FAULT_SHORT_LEASE"
	// stepAttempts is every step's MaxAttempts: each kill of a process
	// running a step costs that step an attempt.
	stepAttempts = 25
)

// diamond is the suite's workflow: a fans out to b, c and d, e waits for
// the three and joins their results.
func diamond() []cairnq.WorkflowStep {
	opts := &cairnq.SubmitOptions{MaxAttempts: stepAttempts}
	step := func(name string, after ...string) cairnq.WorkflowStep {
		return cairnq.WorkflowStep{Step: name, Task: WorkflowStep, Payload: map[string]string{"step": name}, Options: opts, After: after}
	}
	return []cairnq.WorkflowStep{step("a"), step("b", "a"), step("c", "a"), step("d", "a"), step("e", "b", "c", "d")}
}

// runWorkflowChild is the workflow role: a worker whose handler writes
// "run <task id> <attempt>" before it works, and e's handler checks the
// results it joins.
func runWorkflowChild(t *testing.T, c *cairnq.Client, id string, record, note func(string), stop func()) {
	opts := &cairnq.WorkerOptions{
		ID: id, Concurrency: workerConc, PollInterval: 20 * time.Millisecond, WorkflowSweep: 100 * time.Millisecond,
		OnError: func(err error, phase cairnq.ErrorPhase, taskID string) {
			note(fmt.Sprintf("%s: phase %s, task %q: %v", id, phase, taskID, err))
		},
	}
	if os.Getenv(envShortLease) != "" {
		opts.LeaseDuration = cairnq.MinLeaseDuration
		opts.HeartbeatInterval = 100 * time.Millisecond
	}
	w := NewWorker(t, c, opts)
	if err := w.Handle(WorkflowStep, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		record(fmt.Sprintf("run %s %d", tc.ID(), tc.Attempt()))
		var p struct{ Step string }
		if err := tc.Decode(&p); err != nil {
			return nil, cairnq.Permanent(err)
		}
		time.Sleep(time.Duration(rand.N(3)) * time.Millisecond) // the work
		if p.Step != "e" {
			return p.Step, nil
		}
		joined := ""
		for _, s := range []string{"b", "c", "d"} {
			v, err := cairnq.StepResult[string](ctx, tc, s)
			if err != nil {
				return nil, err
			}
			joined += v
		}
		if joined != "bcd" {
			return nil, cairnq.Permanent(fmt.Errorf("e joined %q, want bcd", joined))
		}
		return joined, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	stopWorker := StartWorker(t, w)
	stop()
	stopWorker()
}

// WorkflowMultiprocess has three worker processes advance the same 200
// diamonds at once: every workflow succeeds, each step is one task (none
// submitted twice), and each ran once. It skips with -short.
func WorkflowMultiprocess(t *testing.T, b Backend) {
	workflowFault(t, b, false)
}

// WorkflowKill runs the same 200 diamonds on worker processes killed with
// SIGKILL at random points (in a handler, a settlement and its advance,
// a sweep), each replaced by a new one: every workflow still succeeds,
// each step is one task, no step ran more often than its attempts allow,
// and nothing is left queued or running. It skips with -short.
func WorkflowKill(t *testing.T, b Backend) {
	workflowFault(t, b, true)
}

func workflowFault(t *testing.T, b Backend, kill bool) {
	SkipInChild(t)
	if testing.Short() {
		t.Skip("starts several processes; skipped with -short")
	}
	t.Parallel()
	const n = 200
	ctx := context.Background()
	start := time.Now()
	dsn := b.NewDB(t)
	dir := t.TempDir()
	stopPath := filepath.Join(dir, "stop")
	c := b.Open(t, dsn)
	records := make([]string, n)
	for i := range records {
		rec, err := c.SubmitWorkflow(ctx, diamond(), nil)
		if err != nil {
			t.Fatal(err)
		}
		records[i] = rec.ID
	}
	env := []string{envDSN + "=" + dsn, envStop + "=" + stopPath}
	if kill {
		env = append(env, envShortLease+"=1")
	}
	procs := newProcs(t, b, dir, env...)
	spawned := 0
	spawn := func() *proc {
		spawned++
		name := fmt.Sprintf("wf%d", spawned)
		return procs.spawn(name, roleWorkflow, envID+"=fault-"+name)
	}
	alive := []*proc{spawn(), spawn(), spawn()}
	all := slices.Clone(alive)
	done := func() (int, error) {
		st, err := c.Stats(ctx, cairnq.WorkflowName)
		s := st[cairnq.WorkflowName]
		if s.Failed+s.Canceled > 0 {
			return 0, fmt.Errorf("workflows failed or were canceled: %+v", s)
		}
		return s.Succeeded, err
	}
	kills := 0
	if kill {
		// Kill a random process whenever some more workflows have ended,
		// until half of them have, each time starting a new one.
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
		for next := 10; next < n/2; next += 10 + rng.IntN(10) {
			procs.await(fmt.Sprintf("%d workflows to end", next), alive, func() (bool, error) {
				k, err := done()
				return k >= next, err
			})
			time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond) // a random point of the work
			i := rng.IntN(len(alive))
			procs.kill(alive[i])
			kills++
			alive[i] = spawn()
			all = append(all, alive[i])
		}
		t.Logf("%d kills in %v", kills, time.Since(start).Round(time.Millisecond))
	}
	procs.await("every workflow to succeed", alive, func() (bool, error) {
		k, err := done()
		return k == n, err
	})
	t.Logf("all %d workflows succeeded after %v", n, time.Since(start).Round(time.Millisecond))
	procs.stopAll(stopPath, alive)
	runs := map[string]int{} // by task id
	for _, p := range all {
		lines, err := readLines(p.out)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			if f := strings.Fields(l); len(f) == 3 && f[0] == "run" {
				runs[f[1]]++
			}
		}
		if notes, err := os.ReadFile(p.out + ".errors"); err == nil && !slices.Contains(alive, p) {
			t.Logf("%s (killed) survived:\n%s", p.name, notes) // stopAll logged the others'
		}
	}
	checkWorkflows(t, c, records, runs, kill)
}

// checkWorkflows checks the database after the workflow faults: each
// record succeeded with one task per step, every step succeeded having
// run at most its attempts' worth (exactly once without kills), and no
// task is left live.
func checkWorkflows(t *testing.T, c *cairnq.Client, records []string, runs map[string]int, killed bool) {
	t.Helper()
	ctx := context.Background()
	twice := 0
	for _, id := range records {
		steps, err := c.List(ctx, &cairnq.ListOptions{RootID: id, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		perStep := map[string]int{}
		for _, s := range steps {
			if s.ID == id {
				continue // the record's own row
			}
			key := cairnq.StepKey(id, stepName(t, s))
			perStep[key]++
			if s.Status != cairnq.StatusSucceeded {
				t.Errorf("workflow %s: step task %s is %s", id, s.ID, s.Status)
			}
			r := runs[s.ID]
			switch {
			case r == 0:
				t.Errorf("workflow %s: step task %s succeeded but no process wrote it ran", id, s.ID)
			case r > s.Attempt:
				t.Errorf("workflow %s: step task %s ran %d times in %d attempts", id, s.ID, r, s.Attempt)
			case !killed && (r != 1 || s.Attempt != 1):
				t.Errorf("workflow %s: step task %s ran %d times in %d attempts without a fault", id, s.ID, r, s.Attempt)
			}
			if r > 1 {
				twice++
			}
		}
		if len(perStep) != 5 {
			t.Errorf("workflow %s has tasks for %d steps, want 5", id, len(perStep))
		}
		for key, k := range perStep {
			if k != 1 {
				t.Errorf("%s has %d tasks: a step was submitted twice", key, k)
			}
		}
	}
	for _, status := range []cairnq.Status{cairnq.StatusQueued, cairnq.StatusRunning} {
		live, err := c.List(ctx, &cairnq.ListOptions{Status: status, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(live) > 0 {
			t.Errorf("%d tasks left %s, the first %s (%s)", len(live), status, live[0].ID, live[0].Name)
		}
	}
	t.Logf("%d step tasks ran more than once (each within its attempts)", twice)
}

// stepName is the step a workflow's task carries in its payload.
func stepName(t *testing.T, task *cairnq.Task) string {
	t.Helper()
	var p struct{ Step string }
	if err := task.DecodePayload(&p); err != nil || p.Step == "" {
		t.Fatalf("task %s (%s) is not a step of the suite's workflows: %s", task.ID, task.Name, task.Payload)
	}
	return p.Step
}
