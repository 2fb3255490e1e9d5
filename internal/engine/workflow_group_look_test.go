package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/workflowspec"
)

// A group of a wide fan-in's leaves, settled together, walks the join's
// wait in one workflow_look: each walk asks twice the group's size at
// first, and the walks of one workflow ask for a step once. The join is
// inserted with the last group, not before.
func TestStepGroupLooksOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, ex := openCountingPG(t)
	const leaves, group = 60, 20
	var specs []StepSpec
	var names []string
	for i := range leaves {
		name := fmt.Sprint("leaf", i)
		specs, names = append(specs, StepSpec{Step: name, Task: "leaf"}), append(names, name)
	}
	specs = append(specs, StepSpec{Step: "join", Task: "join", After: names})
	rec := submitSpecs(t, s, specs)
	claimed, err := s.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w", Lease: time.Minute, Limit: leaves})
	if err != nil || len(claimed) != leaves {
		t.Fatalf("claimed %d leaves, %v", len(claimed), err)
	}
	// In the definition's order (their ids are minted in it), as a
	// worker settles them about: each group is the next stretch of the
	// join's wait.
	slices.SortFunc(claimed, func(a, b *cairnqtype.Task) int { return strings.Compare(a.ID, b.ID) })
	for from := 0; from < leaves; from += group {
		var cs []*Completion
		for _, task := range claimed[from : from+group] {
			mark, _ := StepMarkOf(task)
			cs = append(cs, &Completion{ID: task.ID, WorkerID: "w", Step: &mark})
		}
		ex.snapshot()
		if err := s.SettleCompletions(ctx, cs); err != nil {
			t.Fatal(err)
		}
		got := ex.snapshot()
		last := from+group == leaves
		if !last && got[stmtWorkflowLook] != 1 {
			t.Errorf("leaves %d-%d settled with %d workflow_look, want 1 (%v)", from, from+group-1, got[stmtWorkflowLook], got)
		}
		// Their succeeded keys went with their completion.
		if from > 0 && !last {
			want := map[string]int{stmtLockKeys: 1, stmtCompleteSteps: 1, stmtWorkflowLook: 1}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("leaves %d-%d settled with %v, want %v", from, from+group-1, got, want)
			}
		}
		for _, c := range cs {
			if k, err := s.GetByKey(ctx, workflowspec.SucceededKey(rec.ID, c.Step.Step)); err != nil || k.ID != rec.ID {
				t.Fatalf("%s's succeeded key: %v, want it at the record", c.Step.Step, err)
			}
		}
		joins, err := s.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w", Lease: time.Minute, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{false: 0, true: 1}[last]; len(joins) != want {
			t.Fatalf("after leaves %d-%d: %d tasks to claim, want %d (the join only after the last)", from, from+group-1, len(joins), want)
		}
		if last {
			if mark, _ := StepMarkOf(joins[0]); mark.Record != rec.ID || mark.Step != "join" {
				t.Fatalf("claimed %+v, want the join", mark)
			}
		}
	}
}

// complete_steps writes the succeeded key of a step its update left
// succeeded, and of no other: not one a cancel request made canceled,
// not one whose lease was gone, not a plain task's in the same group,
// not one whose record another SDK purged while it ran (the group still
// settles: a key must point at a row).
func TestCompleteStepsMarksOnlyTheSucceeded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, ex := openCountingPG(t)
	rec := submitSpecs(t, s, []StepSpec{
		{Step: "ok", Task: "job"}, {Step: "stopped", Task: "job"}, {Step: "lost", Task: "job"},
		{Step: "after", Task: "job", After: []string{"ok", "stopped", "lost"}},
	})
	orphaned := submitSpecs(t, s, []StepSpec{{Step: "orphan", Task: "job"}})
	if _, err := s.Submit(ctx, SubmitParams{Name: "plain"}); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w", Lease: time.Minute, Limit: 10})
	if err != nil || len(claimed) != 5 {
		t.Fatalf("claimed %d tasks, %v", len(claimed), err)
	}
	// Another SDK's purge of the record, its keys with it.
	for _, del := range []string{"DELETE FROM cairnq_task_keys WHERE task_id = $1", "DELETE FROM cairnq_tasks WHERE id = $1"} {
		if _, err := ex.Query(ctx, del, orphaned.ID); err != nil {
			t.Fatal(err)
		}
	}
	var cs []*Completion
	for _, task := range claimed {
		c := &Completion{ID: task.ID, WorkerID: "w"}
		if mark, ok := StepMarkOf(task); ok {
			c.Step = &mark
			switch mark.Step {
			case "stopped":
				if _, err := s.Cancel(ctx, task.ID); err != nil {
					t.Fatal(err)
				}
			case "lost":
				c.WorkerID = "another" // not the lease's holder
			}
		}
		cs = append(cs, c)
	}
	if err := s.SettleCompletions(ctx, cs); err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Step == nil {
			if c.Status != cairnqtype.StatusSucceeded {
				t.Errorf("the plain task settled %q, want succeeded", c.Status)
			}
			continue
		}
		k, err := s.GetByKey(ctx, workflowspec.SucceededKey(c.Step.Record, c.Step.Step))
		if c.Step.Step == "ok" {
			if err != nil || k.ID != rec.ID {
				t.Errorf("ok's succeeded key: %v, want it at the record", err)
			}
			continue
		}
		if !errors.Is(err, cairnqtype.ErrNotFound) {
			t.Errorf("%s (settled %q, %v): its succeeded key found (%v), want none", c.Step.Step, c.Status, c.Err, err)
		}
	}
}

// submitSpecs submits a workflow of specs on s.
func submitSpecs(tb testing.TB, s *Store, specs []StepSpec) *cairnqtype.Task {
	tb.Helper()
	def, err := NewDefinition("submit workflow", workflowspec.OnFailure(""), specs)
	if err != nil {
		tb.Fatal(err)
	}
	rec, err := s.SubmitWorkflow(context.Background(), WorkflowParams{Def: def})
	if err != nil {
		tb.Fatal(err)
	}
	return rec
}
