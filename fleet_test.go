package cairnq_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// claimCounter counts the worker's claim-path statements crossing the
// executor seam, told apart by their text: the idle probe, lease
// recovery and the claim; and the reads of a workflow's every step
// (workflow_steps).
type claimCounter struct {
	executor.Executor
	l executor.Listener

	mu                                  sync.Mutex
	probes, recovers, claims, stepReads int
}

func (c *claimCounter) count(sql string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case strings.Contains(sql, "parent_id = ") && strings.Contains(sql, "'cairnq_workflow' ->> 'step'"):
		c.stepReads++
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

func (c *claimCounter) readSteps() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stepReads
}

type countingSession struct {
	executor.Session
	c *claimCounter
}

func (s countingSession) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	s.c.count(sql)
	return s.Session.Query(ctx, sql, args...)
}

// openCounted opens a client on dsn as another process would, on its own
// executor (so only LISTEN carries other clients' submits to it), its
// claim-path statements counted.
func openCounted(ctx context.Context, t *testing.T, dsn string) (*cairnq.Client, *claimCounter) {
	t.Helper()
	ex, err := cairnqpgx.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	counter := &claimCounter{Executor: ex, l: ex}
	c, err := cairnq.OpenPostgres(ctx, counter, nil)
	if err != nil {
		ex.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		ex.Close()
	})
	return c, counter
}

// runReporting runs a worker on c (concurrency 8, its poll an hour away:
// only submits wake it) whose handler for name reports each task's id on
// started, and returns what stops it and waits for its Run.
func runReporting(ctx context.Context, t *testing.T, c *cairnq.Client, name string, started chan<- string) (stop func()) {
	t.Helper()
	return runWorkerReporting(ctx, t, newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 8, PollInterval: time.Hour}), name, started)
}

// runWorkerReporting registers name on w with a handler that reports
// each task's id on started, and runs w until stop (which fails t if Run
// returned an error).
func runWorkerReporting(ctx context.Context, t *testing.T, w *cairnq.Worker, name string, started chan<- string) (stop func()) {
	t.Helper()
	if err := w.Handle(name, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		started <- tc.ID()
		return nil, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()
	return sync.OnceFunc(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	})
}

// submitAndStart submits task i of a test, named name, through sc and
// waits for a worker to report it on started.
func submitAndStart(ctx context.Context, t *testing.T, sc *cairnq.Client, name string, started <-chan string, i int) {
	t.Helper()
	task, err := sc.Submit(ctx, name, nil, nil)
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

// An idle Postgres worker woken by another process's submits (LISTEN,
// its poll an hour away) spends one probe and one claim on each task it
// runs: no lease recovery when no lease has expired, no claim after a
// draw that took all there was, no probe when a call ends. In a fleet
// every idle process probed, recovered and claimed on every submit.
func TestIdleWorkerSpendsOneProbeAndOneClaimPerTask(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // hang guard only
	defer cancel()
	dsn := pgtest.DSN(t)
	wc, counter := openCounted(ctx, t, dsn)
	// The submitter is another client on its own executor: nothing in
	// process wakes the worker, only the notification.
	sc, _ := openCounted(ctx, t, dsn)
	started := make(chan string, 1)
	stop := runReporting(ctx, t, wc, "fleet.task", started)

	const n = 20
	for i := range n {
		submitAndStart(ctx, t, sc, "fleet.task", started, i)
	}
	stop()
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
	got, err := cairnq.StoreOf(c).Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "gone", Lease: 50 * time.Millisecond})
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	waitFor(t, "the lease to expire", func() bool { return time.Now().After(got[0].LeaseUntil) })

	started := make(chan string, 1)
	stop := runWorkerReporting(ctx, t, newWorker(t, c, &cairnq.WorkerOptions{PollInterval: time.Hour}), "fleet.lost", started)
	defer stop()
	select {
	case id := <-started:
		if id != task.ID {
			t.Fatalf("started %s, want %s", id, task.ID)
		}
	case <-ctx.Done():
		t.Fatal("the task whose lease expired never ran again")
	}
}

// An idle worker's probes leave out their look for an expired lease
// while the process looked less than a second ago (on Postgres the look
// reads every lease that ran out under a held snapshot), and the worker
// then polls again as soon as that look is due, whatever its
// PollInterval: a task whose worker vanished runs again within about a
// second.
func TestIdleWorkerLooksForExpiredLeasesWhenDue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // hang guard only
	defer cancel()
	c, dsn := openPostgresDSN(t, nil)
	other, _ := openCounted(ctx, t, dsn) // another process: its probes do not pace this one's
	w := newWorker(t, c, &cairnq.WorkerOptions{PollInterval: time.Hour})
	calls := cairnq.RecordClaims(w)
	started := make(chan string, 1)
	defer runWorkerReporting(ctx, t, w, "fleet.wake", started)()
	waitFor(t, "the worker's first poll", func() bool { return len(calls()) > 0 })

	// Each round, a task's worker vanishes and its lease runs out (on a
	// queue this worker does not serve: recovery is every worker's job),
	// and a submit wakes the idle worker. Its probe leaves the look out
	// when it comes within the pace of the last look (on a slow machine
	// it may not; then another round), and the lease is recovered all
	// the same.
	skipped := false
	for round := 0; round < 10 && !skipped; round++ {
		// A queue per round: the last round's task is queued again.
		elsewhere := fmt.Sprint("elsewhere-", round)
		lost, err := other.Submit(ctx, "fleet.lost", nil, &cairnq.SubmitOptions{Queue: elsewhere})
		if err != nil {
			t.Fatal(err)
		}
		got, err := cairnq.StoreOf(other).Claim(ctx, cairnqtype.ClaimParams{Queues: []string{elsewhere}, WorkerID: "gone", Lease: 20 * time.Millisecond})
		if err != nil || len(got) != 1 || got[0].ID != lost.ID {
			t.Fatalf("claim = %v, %v; want %s", got, err, lost.ID)
		}
		waitFor(t, "the lease to run out", func() bool { return time.Now().After(got[0].LeaseUntil.Add(time.Millisecond)) })
		before := len(calls())
		wake, err := other.Submit(ctx, "fleet.wake", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case id := <-started:
			if id != wake.ID {
				t.Fatalf("started %s, want %s", id, wake.ID)
			}
		case <-ctx.Done():
			t.Fatalf("round %d: %s never started", round, wake.ID)
		}
		waitFor(t, "the expired lease's recovery", func() bool {
			task, err := other.Get(ctx, lost.ID)
			if err != nil {
				t.Fatal(err)
			}
			return task.Status == cairnq.StatusQueued
		})
		for _, call := range calls()[before:] {
			skipped = skipped || !call.Result.LookDue.IsZero()
		}
	}
	if !skipped {
		t.Fatal("no probe in 10 rounds left its look out: each came a second or more after the last look")
	}
}

// In an idle fleet every process hears every submit. Once the processes
// that lose the races defer their wakeups, the fleet spends about one
// probe per task on the winner plus the losers' deferred ones, where
// every process probed on every submit before.
func TestIdleFleetDefersToTheWinner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // hang guard only
	defer cancel()
	dsn := pgtest.DSN(t)
	const procs, n = 8, 120
	started := make(chan string, 1)
	var counters []*claimCounter
	for range procs {
		c, counter := openCounted(ctx, t, dsn)
		counters = append(counters, counter)
		t.Cleanup(runReporting(ctx, t, c, "fleet.trickle", started))
	}
	sc, _ := openCounted(ctx, t, dsn)
	probes := func() (sum int) {
		for _, c := range counters {
			p, _, _ := c.read()
			sum += p
		}
		return sum
	}
	var before int
	for i := range n {
		if i == n/2 { // the first half lets the losers find out
			before = probes()
		}
		submitAndStart(ctx, t, sc, "fleet.trickle", started, i)
	}
	// Every process probing on every submit is procs per task.
	spent := probes() - before
	t.Logf("%d processes: %d probes for the last %d tasks", procs, spent, n-n/2)
	if limit := 4 * (n - n/2); spent > limit {
		t.Errorf("%d processes spent %d probes on %d tasks, want <= %d", procs, spent, n-n/2, limit)
	}
}
