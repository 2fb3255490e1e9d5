package conformance

// The workflow check (workflow): a workflow's record and steps go
// through the executor as a bulk submit's statements (insert_many,
// upsert_keys) plus the workflow's own (workflow_look, workflow_heads,
// workflow_steps, workflow_finish, a writing WITH on Postgres), each
// advance in the settling step's transaction.

import (
	"context"
	"errors"
	"fmt"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
)

// workflow: a diamond runs to its end, each step once, the last reading
// the results of the two before it; SubmitWorkflowTx writes the whole
// workflow or nothing with the executor's transaction.
func (s *suite) workflow(r reporter) {
	e := s.setup(r)
	c := s.client(r, e)
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{
		Queues: []string{"certify"}, Concurrency: 4, PollInterval: 50 * time.Millisecond,
		LeaseDuration: 10 * time.Second, ShutdownTimeout: 5 * time.Second, WorkflowSweep: 100 * time.Millisecond,
	})
	if err != nil {
		r.Fatalf("NewWorker: %v", err)
	}
	word := cairnq.Define[string, string]("certify.word")
	err = word.Handle(w, func(ctx context.Context, tc *cairnq.TaskContext, in string) (string, error) {
		if in != "join" {
			return in, nil
		}
		b, err := cairnq.StepResult[string](ctx, tc, "b")
		if err != nil {
			return "", err
		}
		cr, err := cairnq.StepResult[string](ctx, tc, "c")
		return b + cr, err
	}, nil)
	if err != nil {
		r.Fatalf("Handle: %v", err)
	}
	stop := s.runWorker(e.ctx, w)
	defer func() {
		if err, returned := stop(); !returned {
			r.Errorf("%v", err)
		}
	}()

	opts := &cairnq.SubmitOptions{Queue: "certify"}
	steps := []cairnq.WorkflowStep{
		word.Step("a", "a", opts), word.Step("b", "b", opts, "a"), word.Step("c", "c", opts, "a"),
		word.Step("d", "join", opts, "b", "c"),
	}
	rec, err := c.CallWorkflow(e.ctx, steps, nil, &cairnq.WaitOptions{Timeout: 30 * time.Second, PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond})
	if err != nil {
		r.Fatalf("a diamond workflow run by a worker on %s: %v. Fix the failing named checks first (worker_run, tx_commits)", s.name, err)
	}
	wf, err := c.GetWorkflow(e.ctx, rec.ID)
	if err != nil {
		r.Fatalf("GetWorkflow: %v", err)
	}
	for _, st := range wf.Steps {
		if st.State != cairnq.StepState(cairnq.StatusSucceeded) || st.Attempt != 1 {
			r.Errorf("step %s ended %s after %d attempts; want succeeded on the first", st.Step, st.State, st.Attempt)
		}
	}
	d, err := c.GetByKey(e.ctx, cairnq.StepKey(rec.ID, "d"))
	var out string
	if err != nil || d.DecodeResult(&out) != nil || out != "bc" {
		r.Errorf("the last step's result is %v (%v); want \"bc\", read from the two steps it waited for", d, err)
	}

	before := count(r, e.ctx, e.ex, "cairnq_tasks")
	errRollback := errors.New("certify: roll back")
	err = e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		if _, err := c.SubmitWorkflowTx(ctx, sess, steps, nil); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		r.Fatalf("SubmitWorkflowTx inside Tx failed: %v", err)
	}
	if n := count(r, e.ctx, e.ex, "cairnq_tasks"); n != before {
		r.Errorf("a rolled-back SubmitWorkflowTx left %d tasks", n-before)
	}
	var kept *cairnq.Task
	err = e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) (err error) {
		kept, err = c.SubmitWorkflowTx(ctx, sess, steps, nil)
		return err
	})
	if err != nil {
		r.Fatalf("SubmitWorkflowTx inside Tx failed: %v", err)
	}
	final, err := c.Wait(e.ctx, kept.ID, &cairnq.WaitOptions{Timeout: 30 * time.Second})
	if err != nil || final.Status != cairnq.StatusSucceeded {
		r.Errorf("the workflow SubmitWorkflowTx committed: %v; want it succeeded (%s)", err, fmt.Sprint(final))
	}
}
