package main

// --bench limit (issue 49): what a GlobalLimit costs the name it limits.
// A backlog of tasks whose handler sleeps --limit-handlers (1 ms, 10 ms)
// is burned down by one worker of --limit-concurrency calls under a
// GlobalLimit of 5, and under 2 per tenant of 4 tenants (the metadata
// member "tenant"); the rate from the first call's start to the last
// call's end, over the ideal one (the calls the limit allows at once over the
// handler's time), is the efficiency. Without a limit, the same backlog
// at the worker's concurrency is shown beside. Each measurement runs in
// a fresh database; the backends alternate within a run.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync/atomic"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// limitConfig is --bench limit's.
type limitConfig struct {
	backends    []string
	handlers    []time.Duration
	concurrency int
	seconds     float64 // the backlog: about this many seconds at the ideal rate
}

func limitFlags(c *limitConfig) func() error {
	backends := flag.String("limit-backends", "postgres,sqlite", "limit: backends, comma-separated (postgres, sqlite)")
	handlers := flag.String("limit-handlers", "1ms,10ms", "limit: handler times, comma-separated")
	flag.IntVar(&c.concurrency, "limit-concurrency", 16, "limit: the worker's concurrency")
	flag.Float64Var(&c.seconds, "limit-seconds", 1, "limit: each backlog's size, in seconds at the ideal rate")
	return func() error {
		c.backends = splitList(*backends)
		for _, b := range c.backends {
			if b != "postgres" && b != "sqlite" {
				return fmt.Errorf("bad --limit-backends entry %q (postgres, sqlite)", b)
			}
		}
		c.handlers = nil
		for _, h := range splitList(*handlers) {
			d, err := time.ParseDuration(h)
			if err != nil || d <= 0 {
				return fmt.Errorf("bad --limit-handlers entry %q", h)
			}
			c.handlers = append(c.handlers, d)
		}
		if c.concurrency < 8 || c.seconds <= 0 {
			return errors.New("--limit-concurrency must be at least 8 (the tenants' 4 x 2), --limit-seconds positive")
		}
		return nil
	}
}

// limitShape is one way of limiting the name: its limit, the tenants
// its tasks spread over, and how many calls it allows at once.
type limitShape struct {
	name    string
	limit   *cairnq.GlobalLimit
	tenants int
	atOnce  int
}

const limitedName = "bench.limited"

func benchLimit(ctx context.Context, cfg *config) {
	lc := cfg.limit
	shapes := []limitShape{
		{"unlimited", nil, 0, lc.concurrency},
		{"limit 5", &cairnq.GlobalLimit{Max: 5}, 0, 5},
		{"2 per tenant of 4", &cairnq.GlobalLimit{Max: 2, PerMetadataKey: "tenant"}, 4, 8},
	}
	fmt.Printf("limit: one worker of concurrency %d burns down a backlog of about %.1f s at the ideal rate\n", lc.concurrency, lc.seconds)
	rates := map[string][]float64{}
	key := func(backend string, h time.Duration, shape string) string {
		return fmt.Sprint(backend, "/", h, "/", shape)
	}
	for run := 1; run <= cfg.runs && ctx.Err() == nil; run++ {
		for _, backend := range lc.backends {
			for _, h := range lc.handlers {
				for _, sh := range shapes {
					ideal := float64(sh.atOnce) / h.Seconds()
					n := max(int(ideal*lc.seconds), 50)
					took, most, err := limitOnce(ctx, cfg, backend, h, sh, n)
					if err != nil {
						fmt.Printf("  run %d %s %v %s: %v\n", run, backend, h, sh.name, err)
						continue
					}
					rate := float64(n) / took.Seconds()
					fmt.Printf("  run %d %-8s %5v %-18s %7.0f tasks/s  ideal %5.0f  efficiency %.2f  (%d in %v, at most %d at once)\n",
						run, backend, h, sh.name, rate, ideal, rate/ideal, n, took.Round(time.Millisecond), most)
					rates[key(backend, h, sh.name)] = append(rates[key(backend, h, sh.name)], rate/ideal)
				}
			}
		}
	}
	fmt.Println()
	for _, backend := range lc.backends {
		worst, at := 2.0, ""
		for _, h := range lc.handlers {
			for _, sh := range shapes {
				e := median(rates[key(backend, h, sh.name)])
				fmt.Printf("%-8s %5v %-18s efficiency %.2f (median of %d runs)\n", backend, h, sh.name, e, len(rates[key(backend, h, sh.name)]))
				if sh.limit != nil && e < worst {
					worst, at = e, fmt.Sprint(h, ", ", sh.name)
				}
			}
		}
		if at == "" {
			continue
		}
		fmt.Printf("global limit efficiency = %.2f (%s; worst: %s; River Pro's users report its global limits halving throughput, 0.50: riverqueue/river#1145)\n",
			worst, backend, at)
	}
}

// limitOnce burns down n tasks of handler time h under sh in a fresh
// database and returns the time from the first call's start to the last
// call's end (the worker's own start, its first probe and LISTEN, left
// out), and the most calls it saw running at once.
func limitOnce(ctx context.Context, cfg *config, backend string, h time.Duration, sh limitShape, n int) (time.Duration, int, error) {
	target, cleanup, err := freshTarget(ctx, cfg, backend, "limit")
	if err != nil {
		return 0, 0, err
	}
	defer cleanup()
	c, closeC, err := openOn(ctx, cfg, backend, target)
	if err != nil {
		return 0, 0, err
	}
	defer closeC()
	items := make([]cairnq.SubmitItem, n)
	for i := range items {
		items[i] = cairnq.SubmitItem{Name: limitedName}
		if sh.tenants > 0 {
			items[i].Options.Metadata = map[string]string{"tenant": fmt.Sprint("t", i%sh.tenants)}
		}
	}
	for from := 0; from < n; from += cairnq.MaxSubmitMany {
		if _, err := c.SubmitMany(ctx, items[from:min(from+cairnq.MaxSubmitMany, n)]); err != nil {
			return 0, 0, err
		}
	}
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Concurrency: cfg.limit.concurrency, Logger: quietLogger()})
	if err != nil {
		return 0, 0, err
	}
	var ran, running, most, first atomic.Int64
	done := make(chan struct{})
	_ = w.Handle(limitedName, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		first.CompareAndSwap(0, time.Now().UnixNano())
		now := running.Add(1)
		for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
		}
		time.Sleep(h)
		running.Add(-1)
		if ran.Add(1) == int64(n) {
			close(done)
		}
		return nil, nil
	}, &cairnq.HandlerOptions{GlobalLimit: sh.limit})
	runCtx, stopRun := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(runCtx) }()
	defer func() { stopRun(); <-stopped }()
	select {
	case <-done:
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case err := <-stopped:
		stopped <- err
		return 0, 0, fmt.Errorf("the worker stopped: %v", err)
	}
	return time.Since(time.Unix(0, first.Load())), int(most.Load()), nil
}
