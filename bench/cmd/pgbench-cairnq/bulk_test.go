package main

import (
	"context"
	"sync"
	"testing"

	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// bulkLoop writes exactly n tasks, in calls of at most batch, over g
// goroutines.
func TestBulkLoopWritesEveryTaskOnce(t *testing.T) {
	for _, c := range []struct{ n, batch, g int }{{100_000, 1000, 1}, {100_000, 5000, 2}, {7, 3, 2}, {5, 10, 3}, {1, 1, 4}} {
		var mu sync.Mutex
		total, calls := 0, 0
		_, err := bulkLoop(context.Background(), c.n, c.batch, c.g, func(_ context.Context, size int) error {
			if size < 1 || size > c.batch {
				t.Errorf("%+v: a call of %d", c, size)
			}
			mu.Lock()
			total, calls = total+size, calls+1
			mu.Unlock()
			return nil
		})
		if err != nil || total != c.n {
			t.Errorf("%+v: wrote %d in %d calls (%v), want %d", c, total, calls, err, c.n)
		}
	}
}

// Every --bulk-systems name has a label of its own.
func TestBulkSystemsLabelled(t *testing.T) {
	seen := map[string]bool{}
	for _, sys := range bulkSystems {
		l := bulkLabel(sys)
		if l == sys || seen[l] {
			t.Errorf("system %q: label %q", sys, l)
		}
		seen[l] = true
	}
}

// Every bulk system writes its tasks on a real server, in batches that
// do not divide them, and each one lands as a row: the floors' reshaped
// schemas included.
func TestBulkSystemsWriteEveryTask(t *testing.T) {
	ctx := context.Background()
	srv, err := connectServer(ctx, pgtest.AdminDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config{srv: srv, pool: 4, bulkN: 1001, bulkGoroutines: 2}
	for _, sys := range bulkSystems {
		t.Run(sys, func(t *testing.T) {
			r, err := bulkRun(ctx, cfg, sys, 300, 1)
			if err != nil {
				t.Fatal(err)
			}
			if r.system != sys || r.n != cfg.bulkN || r.elapsed <= 0 {
				t.Fatalf("result %+v, want %s of %d", r, sys, cfg.bulkN)
			}
		})
	}
}
