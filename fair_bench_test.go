package cairnq_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// BenchmarkFairShareBaseline is issue 51's "today" for fair shares: tenant
// A's 10,000 tasks are queued, then tenant B's 100, and one worker of
// concurrency 16 runs them all. It reports B's wait from submit to start
// (p50, p95) and how many of A's tasks started before B's last: with no
// fair share, B waits behind A's whole backlog. Run with -benchtime 1x.
func BenchmarkFairShareBaseline(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			for range b.N {
				var c *cairnq.Client
				if backend == "sqlite" {
					c = openTemp(b, nil)
				} else {
					c = openPostgres(b, nil)
				}
				fairShareRun(b, c)
			}
		})
	}
}

func fairShareRun(b *testing.B, c *cairnq.Client) {
	ctx := context.Background()
	const aN, bN = 10_000, 100
	items := make([]cairnq.SubmitItem, aN)
	for i := range items {
		items[i] = cairnq.SubmitItem{Name: "job", Options: cairnq.SubmitOptions{Metadata: map[string]string{"tenant": "A"}}}
	}
	for len(items) > 0 {
		k := min(len(items), 5000)
		if _, err := c.SubmitMany(ctx, items[:k]); err != nil {
			b.Fatal(err)
		}
		items = items[k:]
	}
	submitted := map[string]time.Time{}
	for range bN {
		t, err := c.Submit(ctx, "job", nil, &cairnq.SubmitOptions{Metadata: map[string]string{"tenant": "B"}})
		if err != nil {
			b.Fatal(err)
		}
		submitted[t.ID] = time.Now()
	}
	var mu sync.Mutex
	var waits []time.Duration
	aBefore, aStarted := 0, 0
	allB := make(chan struct{})
	w := newWorker(b, c, &cairnq.WorkerOptions{Concurrency: 16})
	w.Handle("job", func(_ context.Context, tc *cairnq.TaskContext) (any, error) {
		tenant, _ := tc.MetadataText("tenant")
		mu.Lock()
		defer mu.Unlock()
		if tenant == "A" {
			aStarted++
			return nil, nil
		}
		waits = append(waits, time.Since(submitted[tc.ID()]))
		if aBefore = aStarted; len(waits) == bN {
			close(allB)
		}
		return nil, nil
	}, nil)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	<-allB
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	slices.Sort(waits)
	b.ReportMetric(waits[len(waits)/2].Seconds(), "b_wait_p50_s")
	b.ReportMetric(waits[len(waits)*95/100].Seconds(), "b_wait_p95_s")
	b.ReportMetric(float64(aBefore), "a_started_before_last_b")
}
