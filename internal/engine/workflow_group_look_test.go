package engine

import (
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor/sqlexec"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
	"github.com/cairnq/cairnq-go/internal/workflowspec"
)

// A group of a wide fan-in's leaves, settled together, walks the join's
// wait in one workflow_look: each walk asks twice the group's size at
// first, and the walks of one workflow ask for a step once. The join is
// inserted with the last group, not before.
func TestStepGroupLooksOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := sql.Open("pgx", pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ex := &countingExecutor{Executor: sqlexec.New(db, nil), calls: map[string]int{}}
	s, err := OpenPostgres(ctx, ex, PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })

	const leaves, group = 60, 20
	var specs []StepSpec
	var names []string
	for i := range leaves {
		name := fmt.Sprint("leaf", i)
		specs, names = append(specs, StepSpec{Step: name, Task: "leaf"}), append(names, name)
	}
	specs = append(specs, StepSpec{Step: "join", Task: "join", After: names})
	def, err := NewDefinition("submit workflow", workflowspec.OnFailure(""), specs)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.SubmitWorkflow(ctx, WorkflowParams{Def: def})
	if err != nil {
		t.Fatal(err)
	}
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
