package engine

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/workflowspec"
)

// Completions handed to a claim settle in its transaction, each exactly as
// Complete would settle it (a cancel requested wins, a lease gone is
// refused to that completion alone), before the claim draws; waiters hear
// of them.
func TestClaimSettlesAheadOfItsDraw(t *testing.T) {
	bothStores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		ids := claimed(t, s, 3) // done, canceled, gone: running as "w"
		next, err := s.Submit(ctx, SubmitParams{Name: "job"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Cancel(ctx, ids[1]); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Complete(ctx, ids[2], "w", nil); err != nil {
			t.Fatal(err)
		}
		done, unsubscribe := s.SubscribeDone(ctx, ids[0])
		defer unsubscribe()

		cs := []*Completion{
			{ID: ids[0], WorkerID: "w", Result: `{"x": 1}`},
			{ID: ids[1], WorkerID: "w"},
			{ID: ids[2], WorkerID: "w"},
		}
		claim, err := s.Claims(ctx, ClaimRequest{ClaimParams: cairnqtype.ClaimParams{Queues: []string{cairnqtype.DefaultQueue}, WorkerID: "w"},
			Draws: []Draw{{Batch: 1, Calls: 5, Tasks: -1}}, Calls: 5, Settle: cs})
		if err != nil {
			t.Fatal(err)
		}
		got := claim.Tasks[0]
		if len(got) != 1 || got[0].ID != next.ID {
			t.Fatalf("claimed %d tasks, want the one queued (%s)", len(got), next.ID)
		}
		if cs[0].Status != cairnqtype.StatusSucceeded || cs[0].Err != nil {
			t.Errorf("completion of a running task: %q %v, want succeeded", cs[0].Status, cs[0].Err)
		}
		if cs[1].Status != cairnqtype.StatusCanceled || cs[1].Err != nil {
			t.Errorf("completion of a task whose cancel was requested: %q %v, want canceled", cs[1].Status, cs[1].Err)
		}
		var lost *cairnqtype.LostLeaseError
		if !errors.As(cs[2].Err, &lost) || lost.ID != ids[2] || cs[2].Status != "" {
			t.Errorf("completion of a settled task: %q %v, want a *LostLeaseError", cs[2].Status, cs[2].Err)
		}
		if task, err := s.Get(ctx, ids[0]); err != nil || !jsonSame(task.Result, map[string]any{"x": 1}) {
			t.Errorf("stored result %s (%v), want {\"x\": 1}", task.Result, err)
		}
		select {
		case <-done:
		default:
			t.Error("a waiter on the settled task was not woken")
		}
		for i, want := range []cairnqtype.Status{cairnqtype.StatusSucceeded, cairnqtype.StatusCanceled, cairnqtype.StatusSucceeded} {
			if task, err := s.Get(ctx, ids[i]); err != nil || task.Status != want {
				t.Errorf("task %d: %v %v, want %s", i, task.Status, err, want)
			}
		}
	})
}

// A claim that draws nothing (no names it may run) still settles what it
// carries.
func TestClaimWithoutNamesStillSettles(t *testing.T) {
	bothStores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		ids := claimed(t, s, 1)
		cs := []*Completion{{ID: ids[0], WorkerID: "w"}}
		got, err := s.Claims(ctx, ClaimRequest{ClaimParams: cairnqtype.ClaimParams{Queues: []string{cairnqtype.DefaultQueue}, Names: []string{}, WorkerID: "w"},
			Draws: []Draw{{Batch: 1, Calls: 1, Tasks: -1}}, Calls: 1, Settle: cs})
		if err != nil || len(got.Tasks[0]) != 0 {
			t.Fatalf("claim: %v, %v", got.Tasks, err)
		}
		if task, err := s.Get(ctx, ids[0]); err != nil || task.Status != cairnqtype.StatusSucceeded || cs[0].Status != cairnqtype.StatusSucceeded {
			t.Errorf("task %v %v, completion %q: want succeeded", task.Status, err, cs[0].Status)
		}
	})
}

// A group of step successes on SQLite settles in the single writer, and
// must not wait there for its workers' row locks: a heartbeat holds its
// row lock while it waits for that writer, so each would wait for the
// other for ever (the fault tests met it). On Postgres the group takes
// them, around complete_many only.
func TestStepGroupOnSQLiteTakesNoRowLock(t *testing.T) {
	s, err := sqliteInspectDB(t).open(t, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	def, err := NewDefinition("submit workflow", workflowspec.CancelRest, []StepSpec{{Step: "a", Task: "job"}})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.SubmitWorkflow(ctx, WorkflowParams{Def: def})
	if err != nil {
		t.Fatal(err)
	}
	step := claimOne(t, s, "w", time.Minute)
	var rows sync.Mutex
	rows.Lock() // a heartbeat's, held while it waits for the writer
	defer rows.Unlock()
	cs := []*Completion{{ID: step.ID, WorkerID: "w", Step: &StepMark{Record: rec.ID, Step: "a"}, Rows: &rows}}
	settled := make(chan error, 1)
	go func() { settled <- s.SettleCompletions(ctx, cs) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-settled:
			if err != nil || cs[0].Status != cairnqtype.StatusSucceeded {
				t.Fatalf("settled %q, %v", cs[0].Status, err)
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			rows.Unlock()
			<-settled
			rows.Lock()
			t.Fatal("the group waited for a row lock inside SQLite's writer")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
