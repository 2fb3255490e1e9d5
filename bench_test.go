package cairnq_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
)

// The benchmarks run on a file database in b.TempDir() with the default
// durability (WAL, synchronous=NORMAL). Figures go in docs/benchmarks.md.

func reportRate(b *testing.B, unit string) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit)
}

// reportCPU reports cpu (processCPU's difference across the measured
// part) spent on n tasks as milliseconds per 1,000 tasks.
func reportCPU(b *testing.B, cpu time.Duration, n int) {
	b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-ms/1k")
}

func BenchmarkSubmit(b *testing.B) {
	c := openTemp(b, nil)
	ctx := context.Background()
	payload := map[string]any{"page": 1, "title": "hello"}
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Submit(ctx, "render", payload, nil); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, "submits/s")
}

// BenchmarkSubmitParallel64 submits from 64 goroutines; group commit puts
// the writes that arrive together into one transaction.
func BenchmarkSubmitParallel64(b *testing.B) {
	c := openTemp(b, nil)
	ctx := context.Background()
	payload := map[string]any{"page": 1, "title": "hello"}
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Submit(ctx, "render", payload, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRate(b, "submits/s")
}

func BenchmarkGet(b *testing.B) {
	c := openTemp(b, nil)
	ctx := context.Background()
	t, err := c.Submit(ctx, "render", map[string]any{"page": 1, "title": "hello"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Get(ctx, t.ID); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, "gets/s")
}

// BenchmarkGetParallel reads from several goroutines: WAL readers run on
// their own connections and never wait for the writer or each other.
func BenchmarkGetParallel(b *testing.B) {
	c := openTemp(b, nil)
	ctx := context.Background()
	t, err := c.Submit(ctx, "render", map[string]any{"page": 1, "title": "hello"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Get(ctx, t.ID); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRate(b, "gets/s")
}

// BenchmarkClaimComplete claims one task and completes it, the two writes
// a worker makes per task, from one goroutine.
func BenchmarkClaimComplete(b *testing.B) {
	c := openTemp(b, nil)
	ctx := context.Background()
	st := cairnq.StoreOf(c)
	for range b.N {
		if _, err := c.Submit(ctx, "render", map[string]int{"page": 1}, nil); err != nil {
			b.Fatal(err)
		}
	}
	claim := cairnqtype.ClaimParams{Queues: []string{"default"}, Names: []string{"render"}, WorkerID: "bench"}
	b.ResetTimer()
	for range b.N {
		got, err := st.Claim(ctx, claim)
		if err != nil || len(got) != 1 {
			b.Fatalf("claim: %v %v", got, err)
		}
		if _, err := st.Complete(ctx, got[0].ID, "bench", map[string]bool{"ok": true}); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, "tasks/s")
}
