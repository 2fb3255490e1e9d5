package cairnq_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/pgtest"
)

// claimCounter counts the worker's claim-path statements crossing the
// executor seam, told apart by their text: the idle probe, lease
// recovery and the claim.
type claimCounter struct {
	executor.Executor
	l executor.Listener

	mu                       sync.Mutex
	probes, recovers, claims int
}

func (c *claimCounter) count(sql string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case strings.Contains(sql, "has_work"):
		c.probes++
	case strings.Contains(sql, "SKIP LOCKED") && strings.Contains(sql, "lease_until_ms <="):
		c.recovers++
	case strings.Contains(sql, "SKIP LOCKED"):
		c.claims++
	}
}

func (c *claimCounter) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	c.count(sql)
	return c.Executor.Query(ctx, sql, args...)
}

func (c *claimCounter) Tx(ctx context.Context, fn func(ctx context.Context, s executor.Session) error) error {
	return c.Executor.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		return fn(ctx, countingSession{s, c})
	})
}

func (c *claimCounter) Listen(ctx context.Context, channels []string, onNotify func(channel, payload string)) (func(), error) {
	return c.l.Listen(ctx, channels, onNotify)
}

func (c *claimCounter) read() (probes, recovers, claims int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.probes, c.recovers, c.claims
}

type countingSession struct {
	executor.Session
	c *claimCounter
}

func (s countingSession) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	s.c.count(sql)
	return s.Session.Query(ctx, sql, args...)
}

// An idle Postgres worker woken by another process's submits (LISTEN,
// its poll an hour away) spends one probe and one claim on each task it
// runs: no lease recovery when no lease has expired, no claim after a
// draw that took all there was, no probe when a call ends. In a fleet
// every idle process probed, recovered and claimed on every submit.
func TestIdleWorkerSpendsOneProbeAndOneClaimPerTask(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // hang guard only
	defer cancel()
	dsn := pgtest.DSN(t)
	ex, err := cairnqpgx.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	counter := &claimCounter{Executor: ex, l: ex}
	wc, err := cairnq.OpenPostgres(ctx, counter, nil)
	if err != nil {
		ex.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		wc.Close()
		ex.Close()
	})
	// The submitter is another client on its own executor: nothing in
	// process wakes the worker, only the notification.
	sex, err := cairnqpgx.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := cairnq.OpenPostgres(ctx, sex, &cairnq.PostgresOptions{CloseExecutor: true})
	if err != nil {
		sex.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })

	w := newWorker(t, wc, &cairnq.WorkerOptions{Concurrency: 8, PollInterval: time.Hour})
	started := make(chan string, 1)
	if err := w.Handle("fleet.task", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		started <- tc.ID()
		return nil, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()

	const n = 20
	for i := range n {
		task, err := sc.Submit(ctx, "fleet.task", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case id := <-started:
			if id != task.ID {
				t.Fatalf("task %d: started %s, want %s", i, id, task.ID)
			}
		case <-ctx.Done():
			t.Fatalf("task %d never started", i)
		}
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	probes, recovers, claims := counter.read()
	// One probe before the first submit, and one more when the first
	// task was found by that probe before its notification came.
	if claims != n || recovers != 0 || probes > n+2 {
		t.Errorf("%d tasks took %d probes, %d lease recoveries and %d claims; want <= %d, 0 and %d",
			n, probes, recovers, claims, n+2, n)
	}
}

// A probe that sees an expired lease still makes the claim recover it.
func TestIdleWorkerRecoversAnExpiredLease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // hang guard only
	defer cancel()
	c := openPostgres(t, nil)
	task, err := c.Submit(ctx, "fleet.lost", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A worker that claims and vanishes; its lease expires (the database's
	// clock is this machine's).
	got, err := cairnq.StoreOf(c).Claim(ctx, engine.ClaimParams{Queues: []string{"default"}, WorkerID: "gone", Lease: 50 * time.Millisecond})
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	waitFor(t, "the lease to expire", func() bool { return time.Now().After(got[0].LeaseUntil) })

	w := newWorker(t, c, &cairnq.WorkerOptions{PollInterval: time.Hour})
	started := make(chan string, 1)
	if err := w.Handle("fleet.lost", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		started <- tc.ID()
		return nil, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()
	select {
	case id := <-started:
		if id != task.ID {
			t.Fatalf("started %s, want %s", id, task.ID)
		}
	case <-ctx.Done():
		t.Fatal("the task whose lease expired never ran again")
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
}
