package main

import (
	"context"
	"testing"

	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestFloorsDrainEveryTask runs every floor variant on a backlog that is
// no multiple of any claim's width: each must end, with every task
// settled exactly once (floorBurnDown counts the succeeded rows, and a
// complete_many that settles fewer rows than it names fails the drain).
func TestFloorsDrainEveryTask(t *testing.T) {
	ctx := context.Background()
	srv, err := connectServer(ctx, pgtest.AdminDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config{srv: srv, tasks: 1001, concurrency: 8, pool: 4, floorStreams: 2, floorBatch: 16, floorSettle: 2}
	for _, sys := range floorSystems {
		t.Run(sys, func(t *testing.T) {
			r, err := floorBurnDown(ctx, cfg, sys, 1)
			if err != nil {
				t.Fatal(err)
			}
			if r.system != sys || r.n != cfg.tasks {
				t.Fatalf("result for %s of %d tasks, want %s of %d", r.system, r.n, sys, cfg.tasks)
			}
		})
	}
}
