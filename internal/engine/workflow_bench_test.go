package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/protocol"
)

// BenchmarkGetWorkflow reads a workflow of MaxWorkflowSteps steps, its
// definition cached after the first read (issue 49's target: 50 ms):
// queued, every step waiting to run; and ended, every step succeeded and
// the record finished, so that the record holds the workflow's result
// beside its definition, as a read after a run finds it.
func BenchmarkGetWorkflow(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, state := range []string{"queued", "ended"} {
			b.Run(backend+"/"+state, func(b *testing.B) {
				ctx := context.Background()
				var s *Store
				if backend == "sqlite" {
					var err error
					if s, err = OpenSQLite(ctx, filepath.Join(b.TempDir(), "tasks.db"), SQLiteOptions{}); err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = s.Close() })
				} else {
					s, _ = openCountingPG(b)
				}
				specs := make([]StepSpec, MaxWorkflowSteps)
				for i := range specs {
					specs[i] = StepSpec{Step: fmt.Sprint("step-", i), Task: "work"}
				}
				rec := submitSpecs(b, s, specs)
				if state == "ended" {
					endWorkflow(b, s, rec.ID)
				}
				for b.Loop() {
					st, err := s.GetWorkflow(ctx, rec.ID)
					if err != nil || len(st.Steps) != MaxWorkflowSteps {
						b.Fatalf("%d steps, %v", len(st.Steps), err)
					}
				}
			})
		}
	}
}

// endWorkflow marks every step of the workflow whose record is record
// succeeded, by hand, then has a full advance finish the record.
func endWorkflow(tb testing.TB, s *Store, record string) {
	tb.Helper()
	ctx := context.Background()
	arg := "?"
	if s.dialect == protocol.Postgres {
		arg = "$1"
	}
	err := s.be.write(ctx, func(q querier) error {
		_, err := q.query(ctx, "UPDATE cairnq_tasks SET status = 'succeeded', attempt = 1, completed_at_ms = updated_at_ms WHERE parent_id = "+arg, []any{record})
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := s.AdvanceWorkflow(ctx, record, "bench"); err != nil {
		tb.Fatal(err)
	}
	rec, err := s.Get(ctx, record)
	if err != nil || rec.Status != cairnqtype.StatusSucceeded || len(rec.Result) < MaxWorkflowSteps {
		tb.Fatalf("record %v (%d bytes of result), %v", rec.Status, len(rec.Result), err)
	}
}
