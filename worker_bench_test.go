package cairnq_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// submitMany fills the default queue with n "noop" tasks from several
// goroutines (setup, not measured).
func submitMany(b *testing.B, c *cairnq.Client, n int) {
	b.Helper()
	var wg sync.WaitGroup
	per := n / 32
	for g := range 32 {
		count := per
		if g == 31 {
			count = n - per*31
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range count {
				if _, err := c.Submit(context.Background(), "noop", nil, nil); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkBurnDown drains 10,000 no-op tasks with one worker at several
// concurrencies, on a file database.
func BenchmarkBurnDown(b *testing.B) {
	const tasks = 10_000
	for _, conc := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			var total time.Duration
			for range b.N {
				b.StopTimer()
				c := openTemp(b, nil)
				submitMany(b, c, tasks)
				w := newWorker(b, c, &cairnq.WorkerOptions{Concurrency: conc})
				var ran atomic.Int64
				w.Handle("noop", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
					ran.Add(1)
					return nil, nil
				}, nil)
				ctx, cancel := context.WithCancel(context.Background())
				runDone := make(chan error, 1)
				b.StartTimer()
				start := time.Now()
				go func() { runDone <- w.Run(ctx) }()
				// Counting rows is itself costly on a 10k table, so poll the
				// handler count first and the database only at the end.
				for ran.Load() < tasks {
					time.Sleep(time.Millisecond)
				}
				for {
					stats, err := c.Stats(context.Background(), "default")
					if err != nil {
						b.Fatal(err)
					}
					if stats["default"].Succeeded == tasks {
						break
					}
					time.Sleep(time.Millisecond)
				}
				total += time.Since(start)
				b.StopTimer()
				cancel()
				<-runDone
				c.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(tasks*b.N)/total.Seconds(), "tasks/s")
		})
	}
}

// BenchmarkCallLatency measures Call round trips (submit, a worker in this
// process runs a no-op, the caller sees the result) with default settings.
func BenchmarkCallLatency(b *testing.B) {
	c := openTemp(b, nil)
	w, err := cairnq.NewWorker(c, nil) // every default, including the 500ms idle poll
	if err != nil {
		b.Fatal(err)
	}
	w.Handle("echo", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return tc.Payload(), nil }, nil)
	startWorker(b, w)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	runtime.GC()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if _, err := c.Call(ctx, "echo", map[string]int{"i": i}, nil); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
}
