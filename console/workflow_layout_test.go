package console

import (
	"fmt"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
)

// A graph too wide to shrink to the window readably scrolls in its box:
// a long chain across, a wide fan-out down; a small one shrinks in both.
func TestWorkflowGraphScrollsWhenWide(t *testing.T) {
	chain, fan := &cairnq.Workflow{}, &cairnq.Workflow{}
	fan.Steps = append(fan.Steps, cairnq.WorkflowStepState{Step: "root"})
	for i := range 12 {
		s := cairnq.WorkflowStepState{Step: fmt.Sprint("s", i)}
		if i > 0 {
			s.After = []string{fmt.Sprint("s", i-1)}
		}
		chain.Steps = append(chain.Steps, s)
		fan.Steps = append(fan.Steps, cairnq.WorkflowStepState{Step: fmt.Sprint("f", i), After: []string{"root"}})
	}
	small := &cairnq.Workflow{Steps: chain.Steps[:3]}
	for _, tc := range []struct {
		name         string
		wf           *cairnq.Workflow
		across, down bool
	}{{"chain of 12", chain, true, false}, {"fan-out of 12", fan, false, true}, {"chain of 3", small, false, false}} {
		v := layoutWorkflow(tc.wf)
		if v.Across.Scroll != tc.across || v.Down.Scroll != tc.down {
			t.Errorf("%s: scroll across %v (width %d), down %v (width %d); want %v, %v",
				tc.name, v.Across.Scroll, v.Across.Width, v.Down.Scroll, v.Down.Width, tc.across, tc.down)
		}
	}
}
