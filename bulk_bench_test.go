package cairnq_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// BenchmarkByFilter cancels, retries and deletes by filter
// CAIRNQ_BULK_N tasks (default 50,000) while a worker on another queue
// submits and runs one task at a time, and reports each action's time and
// the worker's round trips (submit, claim, run, settle) while the action
// ran against the same before it: a bulk action that held a lock workers
// need would show as the longest round trip. Run with -benchtime 1x.
func BenchmarkByFilter(b *testing.B) {
	n := 50_000
	if v, err := strconv.Atoi(os.Getenv("CAIRNQ_BULK_N")); err == nil && v > 0 {
		n = v
	}
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			var c *cairnq.Client
			if backend == "sqlite" {
				c = openTemp(b, nil)
			} else {
				c = openPostgres(b, nil)
			}
			ctx := context.Background()
			items := make([]cairnq.SubmitItem, n)
			for i := range items {
				items[i] = cairnq.SubmitItem{Name: "bulk", Options: cairnq.SubmitOptions{Queue: "bulk"}}
			}
			for len(items) > 0 {
				k := min(len(items), 5000)
				if _, err := c.SubmitMany(ctx, items[:k]); err != nil {
					b.Fatal(err)
				}
				items = items[k:]
			}
			w := newWorker(b, c, &cairnq.WorkerOptions{Queues: []string{"live"}})
			w.Handle("live", func(context.Context, *cairnq.TaskContext) (any, error) { return nil, nil }, nil)
			// trips runs the worker's round trips until stop is closed.
			trips := func(stop <-chan struct{}) []time.Duration {
				var out []time.Duration
				for {
					select {
					case <-stop:
						return out
					default:
					}
					start := time.Now()
					if _, err := c.Submit(ctx, "live", nil, &cairnq.SubmitOptions{Queue: "live"}); err != nil {
						b.Error(err)
						return out
					}
					if _, err := w.WorkOne(ctx); err != nil {
						b.Error(err)
						return out
					}
					out = append(out, time.Since(start))
				}
			}
			during := func(what string, act func() (int, error)) {
				stop := make(chan struct{})
				var got []time.Duration
				var wg sync.WaitGroup
				wg.Go(func() { got = trips(stop) })
				start := time.Now()
				done, err := act()
				took := time.Since(start)
				close(stop)
				wg.Wait()
				if err != nil || done != n {
					b.Fatalf("%s: %d, %v; want %d", what, done, err, n)
				}
				b.ReportMetric(took.Seconds(), what+"_s")
				b.ReportMetric(ms(slices.Max(got)), what+"_trip_max_ms")
				b.ReportMetric(ms(quantile(got, 0.99)), what+"_trip_p99_ms")
			}
			for range b.N {
				stop := make(chan struct{})
				time.AfterFunc(2*time.Second, func() { close(stop) })
				quiet := trips(stop)
				b.ReportMetric(ms(slices.Max(quiet)), "alone_trip_max_ms")
				b.ReportMetric(ms(quantile(quiet, 0.99)), "alone_trip_p99_ms")
				during("cancel", func() (int, error) { return c.CancelByFilter(ctx, cairnq.TaskFilter{Queue: "bulk"}) })
				during("retry", func() (int, error) {
					return c.RetryByFilter(ctx, cairnq.TaskFilter{Queue: "bulk", Status: cairnq.StatusCanceled}, nil)
				})
				during("cancel2", func() (int, error) { return c.CancelByFilter(ctx, cairnq.TaskFilter{Queue: "bulk"}) })
				during("delete", func() (int, error) { return c.DeleteByFilter(ctx, cairnq.TaskFilter{Queue: "bulk"}) })
			}
		})
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// quantile is the q-quantile of ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(int(float64(len(s))*q), len(s)-1)]
}
