package engine

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cairnq/cairnq-go/executor/sqlexec"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
	"github.com/cairnq/cairnq-go/internal/workflowspec"
)

// BenchmarkGetWorkflow reads a workflow of MaxWorkflowSteps steps, its
// definition cached after the first read (issue 49's target: 50 ms).
func BenchmarkGetWorkflow(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			ctx := context.Background()
			var s *Store
			var err error
			if backend == "sqlite" {
				s, err = OpenSQLite(ctx, filepath.Join(b.TempDir(), "tasks.db"), SQLiteOptions{})
			} else {
				db, oerr := sql.Open("pgx", pgtest.DSN(b))
				if oerr != nil {
					b.Fatal(oerr)
				}
				b.Cleanup(func() { _ = db.Close() })
				s, err = OpenPostgres(ctx, sqlexec.New(db, nil), PostgresOptions{})
			}
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			specs := make([]StepSpec, MaxWorkflowSteps)
			for i := range specs {
				specs[i] = StepSpec{Step: fmt.Sprint("step-", i), Task: "work"}
			}
			def, err := NewDefinition("submit workflow", workflowspec.OnFailure(""), specs)
			if err != nil {
				b.Fatal(err)
			}
			rec, err := s.SubmitWorkflow(ctx, WorkflowParams{Def: def})
			if err != nil {
				b.Fatal(err)
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
