package main

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// The sustained run's default rate is half what each system can submit
// and run at once. The measurement counts both with the backlog between
// them bounded by twice the worker's concurrency, and stops every
// goroutine it and the system started, for cairnq and for River.
func TestSustainedCapacityBoundsTheBacklog(t *testing.T) {
	srv := testServer(t)
	cfg := &config{srv: srv, pool: 8, concurrency: 8,
		riverFetchCooldown: time.Millisecond, riverFetchPoll: 10 * time.Millisecond}
	for _, sys := range []struct {
		name string
		open sustainedOpen
	}{{"cairnq", sustainedCairnq}, {"river", sustainedRiver}} {
		t.Run(sys.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			c, err := sustainedCapacity(context.Background(), cfg, sys.open, 200*time.Millisecond, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if c.started <= 0 || c.submitted <= 0 {
				t.Fatalf("counted %d submitted and %d started, want both positive", c.submitted, c.started)
			}
			// The counts may differ by what was in flight at the window's
			// two ends (each at most the room, submits in progress
			// included) and the submits that returned between the two
			// reads that open it; unbounded, the submits ran thousands
			// ahead.
			room := int64(2 * cfg.concurrency)
			if d := c.submitted - c.started; d > 2*room+64 || -d > 2*room+64 {
				t.Errorf("%d submitted and %d started in the window: the backlog was not held to %d", c.submitted, c.started, room)
			}
			if got, want := c.rate(), float64(c.started)/time.Second.Seconds(); got != want {
				t.Errorf("rate %.1f, want the starts per second, %.1f", got, want)
			}
			// The goroutines of a closed pool or client may take a moment
			// to return.
			deadline := time.Now().Add(10 * time.Second)
			for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > before {
				buf := make([]byte, 1<<20)
				t.Errorf("%d goroutines after the measurement, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
			}
		})
	}
}
