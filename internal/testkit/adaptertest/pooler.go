package adaptertest

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver, for the checks behind the pooler's back

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
	"github.com/cairnq/cairnq-go/internal/testkit/syncbuf"
)

// The pooler burn-down's shape: what session 13's probe ran, where 687
// submits and 803 worker calls failed behind a transaction-mode pgbouncer.
const (
	poolerTasks      = 2000
	poolerSubmitters = 16
	poolerWorkers    = 16
	// poolerBatch is one SubmitMany beside the submits: more new tasks
	// than the store writes by insert_many (256), so it goes by COPY.
	poolerBatch = 300
	// poolerBurnTimeout bounds the burn-down. A task the worker leaves
	// running waits out its lease (poolerLease) and runs again, which
	// the checks then catch; it is a bound on a hang, not a timing.
	poolerBurnTimeout = 3 * time.Minute
	poolerLease       = 10 * time.Second
)

// Opener opens the executor under test on dsn, closed when t ends, the
// way an application would on its defaults.
type Opener func(t *testing.T, dsn string) executor.Executor

// BehindPoolers runs the pooler burn-down through pgbouncer in transaction
// mode and in session mode, each as a subtest.
func BehindPoolers(t *testing.T, open Opener) {
	for _, mode := range []pgtest.PoolMode{pgtest.PoolTransaction, pgtest.PoolSession} {
		t.Run(string(mode), func(t *testing.T) { BehindPooler(t, mode, open, true) })
	}
}

// BehindPoolersPolling is BehindPoolers for an executor that listens only
// on connections proven direct, so behind a session-mode pooler too it
// polls (bun's pgdriver, which fails on notifications it did not ask
// for); it must say nothing at WARN there.
func BehindPoolersPolling(t *testing.T, open Opener) {
	for _, mode := range []pgtest.PoolMode{pgtest.PoolTransaction, pgtest.PoolSession} {
		t.Run(string(mode), func(t *testing.T) { BehindPooler(t, mode, open, false) })
	}
}

// BehindPooler opens a client through a pgbouncer in mode in front of a
// fresh database, with the executor open returns, and burns down
// poolerTasks tasks submitted from poolerSubmitters goroutines, and a
// SubmitMany of poolerBatch, by a worker of concurrency poolerWorkers. It checks, from a connection that goes
// around the pooler:
//   - every submit and every worker statement succeeded the first time
//     (none was refused or retried);
//   - every acknowledged task succeeded, its handler ran exactly once, and
//     nothing is left queued or running;
//   - a Call after the burn-down gets its result;
//   - LISTEN, where the executor has it: in transaction mode, where
//     notifications are never delivered, the listener refuses after its
//     check and the client says so in exactly one INFO naming the pooler;
//     in session mode, where they are, it listens and says nothing at
//     WARN. Without LISTEN nothing is said either way.
func BehindPooler(t *testing.T, mode pgtest.PoolMode, open Opener, sessionListens bool) {
	dsn := pgtest.DSN(t)
	pooled := pgtest.Pooler(t, dsn, mode)
	direct, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })

	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ex := open(t, pooled)
	ctx, cancel := context.WithTimeout(context.Background(), poolerBurnTimeout)
	defer cancel()
	c, err := cairnq.OpenPostgres(ctx, ex, &cairnq.PostgresOptions{Options: cairnq.Options{Logger: log}})
	if err != nil {
		t.Fatalf("open through the pooler: %v", err)
	}
	t.Cleanup(func() { c.Close() })

	worker := startPooledWorker(t, ctx, c)
	defer worker.stop(t)

	ids, submitErrs := submitFrom(ctx, c, poolerSubmitters, poolerTasks)
	// A batch large enough to go by COPY where the executor can
	// (executor.Copier), which pgbouncer passes on in either mode.
	batch := make([]cairnq.SubmitItem, poolerBatch)
	for i := range batch {
		batch[i] = cairnq.SubmitItem{Name: "pooled", Payload: map[string]int{"i": i}}
	}
	if tasks, err := c.SubmitMany(ctx, batch); err != nil {
		submitErrs = append(submitErrs, fmt.Sprintf("SubmitMany of %d: %v", len(batch), err))
	} else {
		for _, task := range tasks {
			ids = append(ids, task.ID)
		}
	}
	awaitBurnDown(t, ctx, direct, len(ids))
	called, err := c.Call(ctx, "pooled", nil, &cairnq.CallOptions{WaitOptions: cairnq.WaitOptions{Timeout: time.Minute}})
	if err != nil {
		t.Fatalf("a Call after the burn-down: %v", err)
	}
	if called.Status != cairnq.StatusSucceeded || len(called.Result) == 0 {
		t.Fatalf("a Call after the burn-down: %s with result %s", called.Status, called.Result)
	}
	worker.stop(t)

	checkBurnDown(t, ctx, direct, mode, worker, ids, submitErrs)
	checkPoolerWarns(t, ex, mode, sessionListens, &logs)
}

// pooledWorker is the burn-down's worker, running until stopped, and what
// it saw: the runs of each task's handler and every error OnError got.
type pooledWorker struct {
	mu       sync.Mutex
	runs     map[string]int
	workErrs []string

	cancel  context.CancelFunc
	ran     chan error // what Run returned
	stopped bool
}

// startPooledWorker starts a worker of concurrency poolerWorkers on c,
// handling "pooled" tasks, until its stop or ctx's end.
func startPooledWorker(t *testing.T, ctx context.Context, c *cairnq.Client) *pooledWorker {
	t.Helper()
	pw := &pooledWorker{runs: map[string]int{}}
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{
		Concurrency: poolerWorkers, LeaseDuration: poolerLease, PollInterval: 50 * time.Millisecond,
		OnError: func(err error, phase cairnq.ErrorPhase, taskID string) {
			pw.mu.Lock()
			defer pw.mu.Unlock()
			pw.workErrs = append(pw.workErrs, fmt.Sprintf("%s %s: %v", phase, taskID, err))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("pooled", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		pw.mu.Lock()
		pw.runs[tc.Task().ID]++
		pw.mu.Unlock()
		return map[string]string{"id": tc.Task().ID}, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	pw.cancel = cancel
	pw.ran = make(chan error, 1)
	go func() { pw.ran <- w.Run(runCtx) }()
	return pw
}

// stop stops the worker, the first time it is called, and reports an
// error its Run returned.
func (pw *pooledWorker) stop(t *testing.T) {
	t.Helper()
	if !pw.stopped {
		pw.stopped = true
		pw.cancel()
		if err := <-pw.ran; err != nil {
			t.Errorf("worker: %v", err)
		}
	}
}

// countStatus counts the tasks in status, from around the pooler.
func countStatus(t *testing.T, ctx context.Context, direct *sql.DB, status string) int {
	t.Helper()
	var n int
	if err := direct.QueryRowContext(ctx, "SELECT count(*) FROM cairnq_tasks WHERE status = $1", status).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", status, err)
	}
	return n
}

// awaitBurnDown waits until n tasks have succeeded. It counts from around
// the pooler, so that what is counted does not depend on what is being
// tested.
func awaitBurnDown(t *testing.T, ctx context.Context, direct *sql.DB, n int) {
	t.Helper()
	for countStatus(t, ctx, direct, "succeeded") < n {
		if ctx.Err() != nil {
			t.Fatalf("burn-down unfinished after %v: %d of %d succeeded", poolerBurnTimeout, countStatus(t, ctx, direct, "succeeded"), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkBurnDown checks, once worker has stopped, that no submit or worker
// call failed, that each acknowledged task in ids ran once and succeeded,
// and that nothing is left queued or running.
func checkBurnDown(t *testing.T, ctx context.Context, direct *sql.DB, mode pgtest.PoolMode, worker *pooledWorker, ids, submitErrs []string) {
	t.Helper()
	for _, e := range submitErrs {
		t.Errorf("submit: %s", e)
	}
	worker.mu.Lock()
	for _, e := range worker.workErrs {
		t.Errorf("worker: %s", e)
	}
	twice := 0
	for _, id := range ids {
		if worker.runs[id] != 1 {
			twice++
			if twice <= 5 {
				t.Errorf("task %s ran %d times", id, worker.runs[id])
			}
		}
	}
	worker.mu.Unlock()
	lost := 0
	for _, id := range ids {
		var status string
		if err := direct.QueryRowContext(ctx, "SELECT status FROM cairnq_tasks WHERE id = $1", id).Scan(&status); err != nil || status != "succeeded" {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged task %s: status %q (%v)", id, status, err)
			}
		}
	}
	stuck := countStatus(t, ctx, direct, "queued") + countStatus(t, ctx, direct, "running")
	t.Logf("%s mode: %d acknowledged, %d lost, %d not run exactly once, %d stuck; %d submit errors, %d worker errors",
		mode, len(ids), lost, twice, stuck, len(submitErrs), len(worker.workErrs))
	if stuck != 0 {
		t.Errorf("%d tasks left queued or running", stuck)
	}
}

// checkPoolerWarns checks what the client logged about LISTEN on ex
// behind a pooler in mode: one INFO naming the pooler where a listener
// refuses (polling is expected there: no WARN), a LISTEN where it should
// listen, and no WARN in any mode.
func checkPoolerWarns(t *testing.T, ex executor.Executor, mode pgtest.PoolMode, sessionListens bool, logs *syncbuf.Buffer) {
	t.Helper()
	_, listens := ex.(executor.Listener)
	pooledWarn := listens && mode == pgtest.PoolTransaction && sessionListens
	if listens && (pooledWarn || sessionListens) {
		// A LISTEN behind a transaction-mode pooler is refused once its
		// check has waited for a notification that never comes; wait for
		// the client's word either way.
		Poll(t, "the client to listen, or to say it cannot", func() bool {
			l := logs.String()
			return strings.Contains(l, "listening for notifications") || strings.Contains(l, "connection pooler")
		})
	}
	warns := warnLines(logs.String())
	switch {
	case pooledWarn:
		infos := 0
		for line := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(line, "level=INFO") && strings.Contains(line, "connection pooler") {
				infos++
			}
		}
		if infos != 1 || len(warns) != 0 {
			t.Errorf("behind a transaction-mode pooler: want one INFO naming the pooler and no WARN, got %d and:\n%s", infos, strings.Join(warns, "\n"))
		}
	case listens && sessionListens && !strings.Contains(logs.String(), "listening for notifications"):
		t.Errorf("behind a %s-mode pooler: no LISTEN:\n%s", mode, logs.String())
	default:
		if len(warns) != 0 {
			t.Errorf("behind a %s-mode pooler: want no WARN, got:\n%s", mode, strings.Join(warns, "\n"))
		}
	}
}

// submitFrom submits n tasks from g goroutines and returns the ids
// acknowledged, and every error a submit returned.
func submitFrom(ctx context.Context, c *cairnq.Client, g, n int) (ids []string, errs []string) {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for range g {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				task, err := c.Submit(ctx, "pooled", map[string]int64{"n": next.Load()}, nil)
				mu.Lock()
				if err != nil {
					errs = append(errs, err.Error())
				} else {
					ids = append(ids, task.ID)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return ids, errs
}

// warnLines returns the lines of a text log at WARN or above.
func warnLines(log string) []string {
	var out []string
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			out = append(out, line)
		}
	}
	return out
}
