package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/workflowspec"
)

// submitSteps submits a workflow of steps named as given, each waiting
// for the one before, and claims its first step.
func submitSteps(t *testing.T, s *Store, names ...string) (rec, first *cairnqtype.Task) {
	t.Helper()
	var specs []StepSpec
	for i, n := range names {
		sp := StepSpec{Step: n, Task: "work"}
		if i > 0 {
			sp.After = []string{names[i-1]}
		}
		specs = append(specs, sp)
	}
	def, err := NewDefinition("submit workflow", workflowspec.OnFailure(""), specs)
	if err != nil {
		t.Fatal(err)
	}
	rec, err = s.SubmitWorkflow(t.Context(), WorkflowParams{Def: def})
	if err != nil {
		t.Fatal(err)
	}
	return rec, claimOne(t, s, "w1", time.Minute)
}

// Every kind of settlement of a workflow's step goes through Settle, which
// reads the step's mark from the row and advances the workflow in the
// settlement's transaction: the next step is queued, or the workflow has
// ended, when Settle returns, with no sweep.
func TestSettleAdvancesAStepWhateverItsOutcome(t *testing.T) {
	bothStores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		_, a := submitSteps(t, s, "a", "b")
		out, err := s.Settle(ctx, Settlement{Task: a, WorkerID: "w1", Outcome: Succeeded, Result: map[string]int{"n": 1}})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != cairnqtype.StatusSucceeded || out.Advanced.Inserted != 1 {
			t.Fatalf("success settled %s, inserted %d; want succeeded, 1 (step b)", out.Status, out.Advanced.Inserted)
		}
		if out.Step == nil || out.Step.Step != "a" {
			t.Fatalf("settled step %+v, want the mark of step a", out.Step)
		}
		b := claimOne(t, s, "w1", time.Minute)
		out, err = s.Settle(ctx, Settlement{Task: b, WorkerID: "w1", Outcome: Failed, Retryable: false,
			Error: cairnqtype.ErrorEnvelope{Type: "Boom", Code: "boom", Message: "no"}})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != cairnqtype.StatusFailed || out.Advanced.Record == nil || out.Advanced.Record.Status != cairnqtype.StatusFailed {
			t.Fatalf("failure settled %s, advanced %+v; want failed and the workflow ended failed", out.Status, out.Advanced)
		}

		// A snooze that a cancel wins ends the step: its workflow moves
		// on in the snooze's own transaction.
		rec, c := submitSteps(t, s, "c", "d")
		if _, err := s.Cancel(ctx, c.ID); err != nil {
			t.Fatal(err)
		}
		out, err = s.Settle(ctx, Settlement{Task: c, WorkerID: "w1", Outcome: Snoozed, Delay: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != cairnqtype.StatusCanceled || out.Advanced.Record == nil {
			t.Fatalf("snooze a cancel won settled %s, advanced %+v; want canceled and the workflow ended", out.Status, out.Advanced)
		}
		got, err := s.Get(ctx, rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.IsTerminal() {
			t.Fatalf("workflow record %s after its only live step was canceled, want ended", got.Status)
		}

		// A plain snooze of a step advances nothing: the step is queued.
		_, e := submitSteps(t, s, "e")
		out, err = s.Settle(ctx, Settlement{Task: e, WorkerID: "w1", Outcome: Snoozed, Delay: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != cairnqtype.StatusQueued || out.Task == nil || out.Advanced.Progress {
			t.Fatalf("snooze settled %s, advanced %+v; want queued and no advance", out.Status, out.Advanced)
		}
		if _, err := s.Submit(ctx, SubmitParams{Name: "plain"}); err != nil {
			t.Fatal(err)
		}
		plain := claimOne(t, s, "w1", time.Minute)
		if out, err = s.Settle(ctx, Settlement{Task: plain, WorkerID: "w1", Outcome: Succeeded}); err != nil || out.Step != nil {
			t.Fatalf("a plain task's settlement: %v, step %+v; want no step", err, out.Step)
		}
	})
}

// Steps a success added that its workflow refuses fail the step for good
// in the same Settle call, with the InvalidSteps envelope; nothing of the
// success is written.
func TestSettleRefusedStepsFailTheStep(t *testing.T) {
	bothStores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		_, a := submitSteps(t, s, "a", "b")
		added, err := SpecSteps("add steps", []StepSpec{{Step: "b", Task: "work"}}) // b is taken
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Settle(ctx, Settlement{Task: a, WorkerID: "w1", Outcome: Succeeded, Added: added})
		if err != nil {
			t.Fatal(err)
		}
		var refused *AddedStepsError
		if !errors.As(out.Refused, &refused) || out.Status != cairnqtype.StatusFailed {
			t.Fatalf("settled %s, refused %v; want failed with an *AddedStepsError", out.Status, out.Refused)
		}
		got, err := s.Get(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Error == nil || got.Error.Type != "InvalidSteps" || got.Result != nil {
			t.Fatalf("step row error %+v result %s, want the InvalidSteps envelope and no result", got.Error, got.Result)
		}
	})
}

// A settlement no worker builds is an *ArgumentError, and nothing is
// written; a lost lease is an ErrLostLease, for a step as for a plain
// task.
func TestSettleRefusesBadSettlements(t *testing.T) {
	bothStores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		_, a := submitSteps(t, s, "a")
		for _, st := range []Settlement{
			{WorkerID: "w1", Outcome: Succeeded},
			{Task: a, WorkerID: "w1"},
			{Task: a, WorkerID: "w1", Outcome: Snoozed, Delay: -time.Second},
		} {
			if _, err := s.Settle(ctx, st); !errors.Is(err, cairnqtype.ErrInvalidArgument) {
				t.Fatalf("Settle(%+v) = %v, want ErrInvalidArgument", st, err)
			}
		}
		if got, _ := s.Get(ctx, a.ID); got.Status != cairnqtype.StatusRunning {
			t.Fatalf("step %s after refused settlements, want still running", got.Status)
		}
		plain, err := s.Submit(ctx, SubmitParams{Name: "plain"})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range []*cairnqtype.Task{a, plain} {
			if _, err := s.Settle(ctx, Settlement{Task: task, WorkerID: "other", Outcome: Failed}); !errors.Is(err, cairnqtype.ErrLostLease) {
				t.Fatalf("Settle of %s by a worker that holds no lease = %v, want ErrLostLease", task.ID, err)
			}
		}
	})
}
