package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cairnq/cairnq-go/internal/workflowspec"
)

// AddedSteps checks what each call adds, against those added before,
// at a cost that grows with what the call adds: a fan-out added one
// step per call, then a step waiting for all of them, stays linear.
func TestAddedStepsOnePerCall(t *testing.T) {
	var a AddedSteps
	var all []string
	for i := range MaxWorkflowSteps - 1 {
		name := fmt.Sprintf("item%d", i)
		if err := a.Add("add steps", "split", []workflowspec.Step{{Step: name, Task: "t"}}); err != nil {
			t.Fatal(err)
		}
		all = append(all, name)
	}
	if err := a.Add("add steps", "split", []workflowspec.Step{{Step: "item7", Task: "t"}}); err == nil || !strings.Contains(err.Error(), "added twice") {
		t.Errorf("a name added before: %v, want it refused", err)
	}
	if err := a.Add("add steps", "split", []workflowspec.Step{{Step: "total", Task: "t", After: all}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Add("add steps", "split", []workflowspec.Step{{Step: "more", Task: "t"}}); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("one past the limit: %v, want it refused", err)
	}
	if len(a.Steps) != MaxWorkflowSteps {
		t.Errorf("%d steps kept, want the refused calls to add nothing", len(a.Steps))
	}
}

// A step added later that an earlier added step waits for can close a
// cycle through it: that call checks every added step.
func TestAddedStepsCycleThroughEarlierStep(t *testing.T) {
	var a AddedSteps
	if err := a.Add("add steps", "by", []workflowspec.Step{{Step: "p", Task: "t", After: []string{"q"}}}); err != nil {
		t.Fatal(err) // q may be the workflow's
	}
	err := a.Add("add steps", "by", []workflowspec.Step{{Step: "q", Task: "t", After: []string{"p"}}})
	if err == nil || !strings.Contains(err.Error(), "waits for itself") {
		t.Errorf("q after p, p after q: %v, want a cycle", err)
	}
	if err := a.Add("add steps", "by", []workflowspec.Step{{Step: "q", Task: "t"}}); err != nil {
		t.Errorf("q alone after the refused call: %v", err)
	}
}

// The orders the reviewers found quadratic stay fast: the step waiting
// for every item added first, then the items one per call, or all in
// one call; a chain added from its end.
func TestAddedStepsOrders(t *testing.T) {
	const n = MaxWorkflowSteps - 1
	names := make([]string, n)
	items := make([]workflowspec.Step, n)
	for i := range names {
		names[i] = fmt.Sprintf("item%d", i)
		items[i] = workflowspec.Step{Step: names[i], Task: "t"}
	}
	joinFirst := func() *AddedSteps {
		var a AddedSteps
		if err := a.Add("add steps", "split", []workflowspec.Step{{Step: "total", Task: "t", After: names}}); err != nil {
			t.Fatal(err)
		}
		return &a
	}
	a := joinFirst()
	for _, it := range items {
		if err := a.Add("add steps", "split", []workflowspec.Step{it}); err != nil {
			t.Fatal(err)
		}
	}
	if err := joinFirst().Add("add steps", "split", items); err != nil {
		t.Fatal(err)
	}
	var chain AddedSteps
	for i := n - 1; i >= 0; i-- {
		s := workflowspec.Step{Step: names[i], Task: "t"}
		if i > 0 {
			s.After = []string{names[i-1]} // added by a later call
		}
		if err := chain.Add("add steps", "split", []workflowspec.Step{s}); err != nil {
			t.Fatal(err)
		}
	}
	// The chain's start closing it into a cycle is still caught.
	var ring AddedSteps
	if err := ring.Add("add steps", "split", []workflowspec.Step{{Step: "a", Task: "t", After: []string{"c"}}, {Step: "b", Task: "t", After: []string{"a"}}}); err != nil {
		t.Fatal(err)
	}
	if err := ring.Add("add steps", "split", []workflowspec.Step{{Step: "c", Task: "t", After: []string{"b"}}}); err == nil || !strings.Contains(err.Error(), "waits for itself") {
		t.Errorf("c closing a -> c -> b -> a: %v, want a cycle", err)
	}
	if len(ring.Steps) != 2 {
		t.Errorf("%d steps after the refused call, want 2", len(ring.Steps))
	}
}
