package conformance_test

// Fault tests on Postgres, through the pgx adapter: the suite of
// internal/testkit/faulttest (a worker process and a submitting process killed
// with SIGKILL in the middle of their work, poisoned values among good
// ones), the same checks the root package's fault_test.go runs on SQLite,
// and a server crash and restart (on a private cluster) in the middle of
// a burn-down.
//
// The process tests re-execute this test binary as their child processes,
// which run TestFaultPostgresChild.

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/internal/testkit/faulttest"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// faultSubmitterApp is the application_name of the killed submitter's
// sessions, by which the test waits for them to end.
const faultSubmitterApp = "cairnq-fault-submitter"

// pgFault runs the fault suite on a fresh database of the test server,
// which every process of a test reaches by its DSN.
var pgFault = faulttest.Backend{
	ChildTest: "TestFaultPostgresChild",
	NewDB: func(t *testing.T) string {
		return pgtest.DSN(t)
	},
	Open: func(t *testing.T, dsn string) *cairnq.Client {
		return pgClient(t, dsn, "")
	},
	SubmitterDSN: func(dsn string) string {
		return withAppName(dsn, faultSubmitterApp)
	},
	AfterSubmitterKill: awaitSubmitterSessions,
}

// withAppName returns dsn with application_name set to name, so the
// sessions of a process using it can be told apart.
func withAppName(dsn, name string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("application_name", name)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " application_name=" + name // keyword/value form: the last one wins
}

// awaitSubmitterSessions waits for the killed submitter's sessions to
// end. A statement the killed process sent may still run, and commit,
// until its session finds the client gone: count rows only once its
// sessions have ended.
func awaitSubmitterSessions(t *testing.T, dsn string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	faulttest.Wait(t, "the killed submitter's sessions to end", func() (bool, error) {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", faultSubmitterApp).Scan(&n)
		return n == 0, err
	})
}

// TestFaultPostgresKillWorker runs faulttest.KillWorker with its three
// worker processes connected to one database.
func TestFaultPostgresKillWorker(t *testing.T) { faulttest.KillWorker(t, pgFault) }

// TestFaultPostgresKillSubmitter runs faulttest.KillSubmitter, where the
// kill lands in the middle of the grouped inserts the submitter's client
// sends; awaitSubmitterSessions lets the server finish with them first.
func TestFaultPostgresKillSubmitter(t *testing.T) { faulttest.KillSubmitter(t, pgFault) }

// TestWorkflowMultiprocessPostgres runs faulttest.WorkflowMultiprocess:
// three worker processes on one database advance the same 200 workflows.
func TestWorkflowMultiprocessPostgres(t *testing.T) { faulttest.WorkflowMultiprocess(t, pgFault) }

// TestWorkflowKillPostgres runs faulttest.WorkflowKill: the workers
// advancing them are killed at random points and replaced.
func TestWorkflowKillPostgres(t *testing.T) { faulttest.WorkflowKill(t, pgFault) }

// TestGlobalLimitProcessesPostgres runs faulttest.GlobalLimit: three
// worker processes on one database under a global limit, and per tenant.
func TestGlobalLimitProcessesPostgres(t *testing.T) { faulttest.GlobalLimit(t, pgFault) }

// TestFleetPauseProcessesPostgres runs faulttest.FleetPause: a queue
// paused from this process stops two worker processes on the database.
func TestFleetPauseProcessesPostgres(t *testing.T) { faulttest.FleetPause(t, pgFault) }

// TestFaultPostgresChild is the test a child process of this binary runs
// (pgFault.ChildTest). Without a role set by a parent test, it skips.
func TestFaultPostgresChild(t *testing.T) { faulttest.Child(t, pgFault) }

// TestFaultPostgresPoisonedValues runs faulttest.PoisonedValues, whose
// fresh client is a new pool on the same database.
func TestFaultPostgresPoisonedValues(t *testing.T) { faulttest.PoisonedValues(t, pgFault) }

// TestFaultPostgresRestart crashes the server (an immediate shutdown, then
// a start: crash recovery) while a worker in this process burns down a
// queue, with a few of its handlers held across the crash; then crashes
// it again just after the worker claimed a task for every slot. The worker
// carries on without being restarted: every task acknowledged before a
// crash, and every one submitted after, succeeds. A task runs again only
// across a crash (a run in flight when the server went down may have lost
// its lease meanwhile), and only on a new attempt: the same attempt
// running twice is a claim the crash took back after the worker had
// started its handler, which no lease expiry explains.
func TestFaultPostgresRestart(t *testing.T) {
	faulttest.SkipInChild(t)
	if testing.Short() {
		t.Skip("makes a private cluster; skipped with -short")
	}
	t.Parallel()
	const (
		before, after = 300, 50 // tasks submitted before and after the first crash
		normalRuns    = 60      // runs before the handler starts holding
		heldRuns      = 3       // runs held across the first crash
		conc          = 8
		fresh         = "fault.fresh" // the second crash's tasks: one per slot
	)
	start := time.Now()
	ctx := context.Background()
	// The WAL writer flushes an asynchronous commit within its delay (200ms
	// by default); at 10s one stays unflushed until a synchronous commit
	// follows it, so the second crash surely finds any claim that commits
	// asynchronously still unwritten, as an unlucky crash would.
	cl := pgtest.NewCluster(t, "wal_writer_delay = 10s")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", cl.LogTail(40))
		}
	})
	c := pgClient(t, cl.DSN(), "")
	acked := faulttest.SubmitAll(t, before, func(i int) (*cairnq.Task, error) {
		return c.Submit(ctx, faulttest.Job, map[string]int{"i": i}, nil)
	})

	type run struct {
		id      string
		attempt int
		begun   int32 // crashes begun when the run started
		done    int32 // crashes the server had come back from by then
	}
	var (
		mu       sync.Mutex
		runs     []run
		errs     []string
		begun    atomic.Int32
		crashes  atomic.Int32 // done
		started  atomic.Int32
		holding  atomic.Int32
		held     = make(chan string, 64)
		release1 = make(chan struct{}) // ends the holds across the first crash
		release2 = make(chan struct{}) // and the second
		once1    sync.Once
		once2    sync.Once
	)
	release := func(n int) {
		if n == 1 {
			once1.Do(func() { close(release1) })
		} else {
			once2.Do(func() { close(release2) })
		}
	}
	record := func(tc *cairnq.TaskContext) {
		mu.Lock()
		runs = append(runs, run{tc.ID(), tc.Attempt(), begun.Load(), crashes.Load()})
		mu.Unlock()
	}
	hold := func(ctx context.Context, tc *cairnq.TaskContext, release <-chan struct{}) error {
		select {
		case held <- tc.ID():
		default: // more holds than the test waits for: a rerun
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done(): // the lease is lost
			return ctx.Err()
		}
	}
	w := faulttest.NewWorker(t, c, &cairnq.WorkerOptions{
		ID: "restart-worker", Concurrency: conc,
		// Long enough that heartbeats (every second) keep every lease
		// through a short outage, short enough that a claim whose reply the
		// crash swallowed comes back soon.
		LeaseDuration:   3 * time.Second,
		ShutdownTimeout: 2 * time.Second,
		OnError: func(err error, phase cairnq.ErrorPhase, taskID string) {
			mu.Lock()
			errs = append(errs, fmt.Sprintf("%s %s: %v", phase, taskID, err))
			mu.Unlock()
		},
	})
	if err := w.Handle(faulttest.Job, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		record(tc)
		if started.Add(1) > normalRuns && holding.Add(1) <= heldRuns {
			if err := hold(ctx, tc, release1); err != nil {
				return nil, err
			}
		}
		time.Sleep(2 * time.Millisecond) // the work
		return tc.Payload(), nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle(fresh, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		record(tc)
		if crashes.Load() < 2 {
			if err := hold(ctx, tc, release2); err != nil {
				return nil, err
			}
		}
		return tc.Payload(), nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	stop := faulttest.StartWorker(t, w)
	t.Cleanup(func() { release(1); release(2) }) // before the worker stops, should the test fail first
	awaitHeld := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-held:
			case <-time.After(faulttest.Watchdog):
				t.Fatalf("the held runs did not start\n%s", faulttest.AllGoroutines())
			}
		}
	}
	crash := func() {
		t.Helper()
		at := time.Now()
		begun.Add(1)
		rctx, cancel := context.WithTimeout(ctx, faulttest.Watchdog)
		defer cancel()
		if err := cl.RestartImmediate(rctx); err != nil {
			t.Fatal(err)
		}
		crashes.Add(1)
		t.Logf("crash %d: the server was back after %v (test at %v)", crashes.Load(),
			time.Since(at).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	}
	// submit retries a submit the crash failed, under its key, which makes
	// the retry safe.
	retries := 0
	submit := func(name, key string, i int, delay time.Duration) {
		t.Helper()
		for {
			task, err := c.Submit(ctx, name, map[string]int{"i": i}, &cairnq.SubmitOptions{Key: key, Delay: delay})
			if err == nil {
				acked[task.ID] = i
				return
			}
			if retries++; retries > 100 {
				t.Fatalf("submit after a crash: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	drained := func(want int) {
		t.Helper()
		faulttest.Wait(t, "every task to succeed", func() (bool, error) {
			st, err := c.Stats(ctx, cairnq.DefaultQueue)
			if err != nil {
				return false, nil // a read on a connection the crash broke
			}
			s := st[cairnq.DefaultQueue]
			if s.Failed+s.Canceled > 0 {
				return false, fmt.Errorf("tasks failed or were canceled: %+v", s)
			}
			return s.Succeeded == want, nil
		})
	}

	// The first crash, in the middle of the burn-down.
	awaitHeld(heldRuns)
	crash()
	release(1)
	for i := range after {
		submit(faulttest.Job, fmt.Sprintf("after-%d", i), before+i, 0)
	}
	drained(before + after)
	t.Logf("burn-down done after %v", time.Since(start).Round(time.Millisecond))

	// The second crash, right after the worker claimed a task for every
	// slot: no settlement commits between the claim and the crash, and
	// only a heartbeat could. The delay makes the claims come after every
	// submit committed.
	for i := range conc {
		submit(fresh, fmt.Sprintf("fresh-%d", i), before+after+i, 300*time.Millisecond)
	}
	awaitHeld(conc)
	crash()
	release(2)
	drained(before + after + conc)
	stop()
	t.Logf("all done after %v; %d submits retried after a crash", time.Since(start).Round(time.Millisecond), retries)

	tasks, err := c.List(ctx, &cairnq.ListOptions{Limit: 2 * len(acked)})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != len(acked) {
		t.Errorf("the database holds %d tasks, want %d", len(tasks), len(acked))
	}
	for _, task := range tasks {
		i, ok := acked[task.ID]
		want := fmt.Sprintf(`{"i":%d}`, i)
		if !ok || task.Status != cairnq.StatusSucceeded || !faulttest.SameJSON(task.Result, want) {
			t.Errorf("task %s (submitted: %v): %s with %s, want succeeded with %s", task.ID, ok, task.Status, task.Result, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	byTask := map[string][]run{} // in the order the runs started
	for _, r := range runs {
		byTask[r.id] = append(byTask[r.id], r)
	}
	var lostClaims, problems []string
	twice := 0
	for id := range acked {
		rs := byTask[id]
		if len(rs) == 0 {
			problems = append(problems, id+": never ran")
		}
		if len(rs) > 1 {
			twice++
		}
		seen := map[int]bool{}
		for k, r := range rs {
			if seen[r.attempt] {
				lostClaims = append(lostClaims, fmt.Sprintf("%s: attempt %d ran again after crash %d", id, r.attempt, r.begun))
			}
			seen[r.attempt] = true
			// A crash lies between the runs: it was not over when the
			// previous run started, and had begun when this one started.
			if k > 0 && r.begun <= rs[k-1].done {
				problems = append(problems, fmt.Sprintf("%s: ran again (attempt %d) with no crash since its previous run", id, r.attempt))
			}
		}
	}
	sort.Strings(lostClaims)
	sort.Strings(problems)
	if len(lostClaims) > 0 {
		t.Errorf("%d runs repeated an attempt that had already run: a crash took back a claim after the worker had "+
			"started its handler (a claim must be durable before its handler starts):\n%s", len(lostClaims), strings.Join(lostClaims, "\n"))
	}
	if len(problems) > 0 {
		t.Errorf("%d problems:\n%s", len(problems), strings.Join(problems, "\n"))
	}
	t.Logf("%d tasks ran twice across a crash; the worker survived %d errors, the first: %.300q", twice, len(errs), append(errs, "")[0])
}

// TestDurableKillPostgres runs faulttest.DurableKill: worker processes
// running a ten-step durable handler on one database, killed at random
// points and replaced.
func TestDurableKillPostgres(t *testing.T) {
	faulttest.DurableKill(t, pgFault, faulttest.DurableOptions{})
}

// TestDurableKillPostgresRestart runs faulttest.DurableKill on a private
// cluster that crashes (an immediate shutdown, then crash recovery) when
// half the tasks have ended, with the kills going on.
func TestDurableKillPostgresRestart(t *testing.T) {
	faulttest.SkipInChild(t)
	if testing.Short() {
		t.Skip("makes a private cluster; skipped with -short")
	}
	cl := pgtest.NewCluster(t)
	b := pgFault
	b.NewDB = func(*testing.T) string { return cl.DSN() }
	faulttest.DurableKill(t, b, faulttest.DurableOptions{Midway: func(t *testing.T) {
		if err := cl.RestartImmediate(context.Background()); err != nil {
			t.Fatalf("restarting the server: %v", err)
		}
		t.Log("the server crashed and came back")
	}})
}

// TestDurableKillPgbouncer runs faulttest.DurableKill with every process
// reaching the database through pgbouncer in transaction mode.
func TestDurableKillPgbouncer(t *testing.T) {
	faulttest.SkipInChild(t)
	b := pgFault
	b.NewDB = func(t *testing.T) string { return pgtest.Pooler(t, pgtest.DSN(t), pgtest.PoolTransaction) }
	faulttest.DurableKill(t, b, faulttest.DurableOptions{})
}
