package cairnq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
)

// TestWorkflowAddStepsRefusesBadStepsAtTheCall: what AddSteps can refuse
// without reading the workflow (a cycle among the added steps, more steps
// than a workflow may hold, a name used twice across calls, the adder's
// own name) is an *ArgumentError at the call that adds nothing, not a
// nil that fails the step at its settlement; the good steps added around
// them run, and the workflow succeeds.
func TestWorkflowAddStepsRefusesBadStepsAtTheCall(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		many := make([]cairnq.WorkflowStep, 10_001)
		for i := range many {
			many[i] = cairnq.WorkflowStep{Step: fmt.Sprintf("m%d", i), Task: "wf.leaf"}
		}
		bad := map[string][]cairnq.WorkflowStep{
			"a cycle": {
				{Step: "p", Task: "wf.leaf", After: []string{"q"}},
				{Step: "q", Task: "wf.leaf", After: []string{"p"}},
			},
			"10,001 steps":      many,
			"a name used twice": {{Step: "good", Task: "wf.leaf"}},
			"the adder's name":  {{Step: "root", Task: "wf.leaf"}},
			"no task":           {{Step: "x"}},
		}
		got := make(chan map[string]error, 1)
		w := newWorker(t, c, nil)
		if err := w.Handle("wf.root", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			if err := tc.AddSteps(cairnq.WorkflowStep{Step: "good", Task: "wf.leaf"}); err != nil {
				return nil, err
			}
			errs := map[string]error{}
			for what, steps := range bad {
				errs[what] = tc.AddSteps(steps...)
			}
			got <- errs
			return nil, tc.AddSteps(cairnq.WorkflowStep{Step: "after", Task: "wf.leaf", After: []string{"good"}})
		}, nil); err != nil {
			t.Fatal(err)
		}
		if err := w.Handle("wf.leaf", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			return "ok", nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{{Step: "root", Task: "wf.root"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for what, err := range <-got {
			if !errors.As(err, new(*cairnq.ArgumentError)) {
				t.Errorf("AddSteps of %s: %v, want an *ArgumentError", what, err)
			}
		}
		if final := waitWorkflow(t, c, rec.ID); final.Status != cairnq.StatusSucceeded {
			t.Fatalf("workflow %s (%+v), want succeeded with the good steps only", final.Status, final.Error)
		}
		wf, err := c.GetWorkflow(ctx, rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range wf.Steps {
			names = append(names, s.Step)
		}
		if len(names) != 3 {
			t.Errorf("the workflow's steps are %v, want root, good and after", names)
		}
	})
}
