package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkGetWorkflow reads a workflow of MaxWorkflowSteps steps, its
// definition cached after the first read (issue 49's target: 50 ms).
func BenchmarkGetWorkflow(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
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
			for b.Loop() {
				st, err := s.GetWorkflow(ctx, rec.ID)
				if err != nil || len(st.Steps) != MaxWorkflowSteps {
					b.Fatalf("%d steps, %v", len(st.Steps), err)
				}
			}
		})
	}
}
