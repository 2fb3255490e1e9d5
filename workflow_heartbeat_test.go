package cairnq_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go"
	"github.com/jackc/pgx/v5"
)

// While a workflow's lock is held elsewhere (an application's SettleTx
// transaction, a slow full advance in another process), a step's grouped
// success waits for it without holding its worker's row lock: the
// worker's heartbeat goes on, and an unrelated task's short lease is
// kept. (The sleeps are the task's work and the lock's hold, longer than
// the lease: what is tested, not a wait for a state.)
func TestWorkflowGroupedStepLeavesTheHeartbeatAlone(t *testing.T) {
	ctx := context.Background()
	c, dsn := openPostgresDSN(t, nil)
	var slowRuns atomic.Int32
	release := make(chan struct{})
	w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 3, LeaseDuration: time.Second, WorkflowSweep: cairnq.NoWorkflowSweep})
	if err := w.Handle("slow", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		slowRuns.Add(1)
		time.Sleep(4 * time.Second)
		return nil, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	handleHeld(t, w, "wf.step", release)
	startWorker(t, w)
	slow, err := c.Submit(ctx, "slow", nil, &cairnq.SubmitOptions{MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{{Step: "s", Task: "wf.step"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, slow.ID, cairnq.StatusRunning, "slow running")
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 0))", cairnq.StepKey(rec.ID, "")); err != nil {
		t.Fatal(err)
	}
	close(release) // the step succeeds; its settlement waits for the lock
	time.Sleep(3 * time.Second)
	tx.Rollback(ctx)
	final := waitTask(t, c, slow.ID)
	if n := slowRuns.Load(); n != 1 || final.Attempt != 1 {
		t.Fatalf("slow task ran %d times (attempt %d, status %s): its lease expired while the step's group held the worker's rowsMu", n, final.Attempt, final.Status)
	}
}
