package cairnq_test

import (
	"context"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go"
)

// BenchmarkGlobalLimitThroughput runs 200 tasks of 1 ms on one worker of
// concurrency 16, without a limit and under a GlobalLimit of 5, on a
// SQLite file; tasks/s is the figure (the limit caps the running calls
// at 5, and each claim of the name is a transaction of several
// statements).
func BenchmarkGlobalLimitThroughput(b *testing.B) {
	for _, bc := range []struct {
		name  string
		limit *cairnq.GlobalLimit
	}{{"unlimited", nil}, {"limit5", &cairnq.GlobalLimit{Max: 5}}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			c := openTemp(b, nil)
			w := newWorker(b, c, &cairnq.WorkerOptions{Concurrency: 16, PollInterval: 5 * time.Millisecond})
			if err := w.Handle("work", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
				time.Sleep(time.Millisecond)
				return nil, nil
			}, &cairnq.HandlerOptions{GlobalLimit: bc.limit}); err != nil {
				b.Fatal(err)
			}
			startWorker(b, w)
			const n = 200
			items := make([]cairnq.SubmitItem, n)
			for i := range items {
				items[i] = cairnq.SubmitItem{Name: "work"}
			}
			start := time.Now()
			for b.Loop() {
				tasks, err := c.SubmitMany(ctx, items)
				if err != nil {
					b.Fatal(err)
				}
				for _, task := range tasks {
					waitTask(b, c, task.ID)
				}
			}
			b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "tasks/s")
		})
	}
}
