package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/bench/internal/backlog"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/pgdsn"
)

const noopName = "bench_noop"

// pollInterval is the worker's default PollInterval, which the latency
// benchmark keeps.
const pollInterval = 500 * time.Millisecond

// openClient opens a cairnq client on a's executor; closeFn closes both.
func openClient(ctx context.Context, cfg *config, a adapter, dsn string, listen bool, counts *callCounts) (*cairnq.Client, func(), error) {
	c, _, closeFn, err := openClientEx(ctx, cfg, a, dsn, listen, counts)
	return c, closeFn, err
}

// openClientEx is openClient that also returns the executor.
func openClientEx(ctx context.Context, cfg *config, a adapter, dsn string, listen bool, counts *callCounts) (*cairnq.Client, executor.Executor, func(), error) {
	if cfg.via != "" {
		var err error
		if dsn, err = pgdsn.WithHostPort(dsn, cfg.via); err != nil {
			return nil, nil, nil, fmt.Errorf("--via: %w", err)
		}
	}
	ex, closeEx, err := a.open(ctx, dsn, cfg.pool)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: open: %w", a.name, err)
	}
	var seam executor.Executor = ex
	if counts != nil {
		seam = withCounting(seam, counts)
	}
	if !listen {
		seam = noListen{seam}
	}
	c, err := cairnq.OpenPostgres(ctx, seam, &cairnq.PostgresOptions{Options: cairnq.Options{Logger: quietLogger()}})
	if err != nil {
		_ = closeEx()
		return nil, nil, nil, fmt.Errorf("%s: OpenPostgres: %w", a.name, err)
	}
	return c, ex, func() {
		_ = c.Close()
		_ = closeEx()
	}, nil
}

// loadBacklog migrates the database at dsn through a client on a and
// fills it with n no-op tasks (see fill).
func loadBacklog(ctx context.Context, cfg *config, a adapter, dsn string, n int) error {
	sub, subEx, closeSub, err := openClientEx(ctx, cfg, a, dsn, false, nil)
	if err != nil {
		return err
	}
	defer closeSub()
	if err := fill(ctx, sub, subEx, n); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	return nil
}

// fill submits n no-op tasks for a burn-down (setup, not timed): SubmitTx
// in transactions of up to 500 tasks from 8 goroutines. The tasks are the
// same as those Submit makes.
func fill(ctx context.Context, c *cairnq.Client, ex executor.Executor, n int) error {
	return backlog.Fill(n, 500, 8, func(count int) error { return backlog.InTx(ctx, c, ex, noopName, count) })
}

// submitLoop calls fn n times from g goroutines and returns the wall time.
func submitLoop(ctx context.Context, fn func(context.Context) error, n, g int) (time.Duration, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	startGate := make(chan struct{})
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-startGate
			for next.Add(1) <= int64(n) {
				if err := fn(ctx); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	start := time.Now()
	close(startGate)
	wg.Wait()
	return time.Since(start), firstErr
}

func submitNoop(c *cairnq.Client) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := c.Submit(ctx, noopName, nil, nil)
		return err
	}
}

// waitRan waits until done is closed, failing when the count stalls for a
// minute or the whole wait passes limit.
func waitRan(ctx context.Context, done <-chan struct{}, ran *atomic.Int64, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last, lastChange := ran.Load(), time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			cur := ran.Load()
			if cur != last {
				last, lastChange = cur, time.Now()
			}
			if time.Since(lastChange) > time.Minute || time.Now().After(deadline) {
				return fmt.Errorf("stalled: %d of %d handler calls after %v", cur, n, time.Since(deadline.Add(-limit)).Round(time.Millisecond))
			}
		}
	}
}

// cairnqBurnDown submits n no-op tasks (not timed), then runs one Worker
// with the configured concurrency, timed from Run until the handler count
// reached n and Stats shows n succeeded.
func cairnqBurnDown(ctx context.Context, cfg *config, a adapter, run int) (burnResult, error) {
	n := cfg.tasks
	db, err := cfg.srv.FreshDatabase(ctx, "cq_"+a.name)
	if err != nil {
		return burnResult{}, err
	}
	defer db.Drop()

	if err := loadBacklog(ctx, cfg, a, db.DSN, n); err != nil {
		return burnResult{}, fmt.Errorf("%s: %w", a.name, err)
	}
	settle()
	before := readCounters(ctx, db)

	var counts *callCounts
	if cfg.countCalls {
		counts = &callCounts{}
	}
	c, closeC, err := openClient(ctx, cfg, a, db.DSN, !cfg.burnNoListen, counts)
	if err != nil {
		return burnResult{}, err
	}
	closeOnce := sync.OnceFunc(closeC)
	defer closeOnce()
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Concurrency: cfg.concurrency, Logger: quietLogger()})
	if err != nil {
		return burnResult{}, err
	}
	var ran atomic.Int64
	done := make(chan struct{})
	_ = w.Handle(noopName, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		if ran.Add(1) == int64(n) {
			close(done)
		}
		return nil, nil
	}, nil)
	var calls0 callDelta
	if counts != nil {
		calls0 = counts.snapshot()
	}

	profiling := false
	if cfg.cpuprofile != "" && !cfg.profiled && a.name == cfg.profileAdapter {
		f, err := os.Create(cfg.cpuprofile)
		if err != nil {
			return burnResult{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return burnResult{}, err
		}
		profiling, cfg.profiled = true, true
		// The allocation profile is cumulative, so the window's own
		// allocations are its end minus its start (pprof -base).
		if err := writeAllocs(cfg.cpuprofile + ".allocs.start"); err != nil {
			return burnResult{}, err
		}
	}
	stopProfile := func() {
		if profiling {
			pprof.StopCPUProfile()
			_ = writeAllocs(cfg.cpuprofile + ".allocs.end")
			profiling = false
		}
	}
	defer stopProfile()

	if cfg.statements {
		if err := enableStatements(ctx, db); err != nil {
			return burnResult{}, fmt.Errorf("pg_stat_statements: %w", err)
		}
	}
	var waits *waitSampler
	if cfg.waitEvents {
		var err error
		if waits, err = startWaitSampler(ctx, db); err != nil {
			return burnResult{}, err
		}
	}
	srvBefore := cfg.srv.serverCPU(ctx)
	cliBefore := clientCPU()
	allocB0, allocN0 := heapAllocs()
	runCtx, stop := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	start := time.Now()
	go func() { runDone <- w.Run(runCtx) }()
	stopRun := func() error {
		stop()
		return <-runDone
	}
	if err := waitRan(ctx, done, &ran, n, cfg.timeout); err != nil {
		_ = stopRun()
		return burnResult{}, fmt.Errorf("%s: %w", a.name, err)
	}
	handlersDone := time.Since(start)
	// Up to `concurrency` completions are still in flight when the last
	// handler returns; Stats counts rows, so it is read only now, and
	// repeated until it shows every task succeeded.
	for {
		stats, err := c.Stats(ctx, cairnq.DefaultQueue)
		if err != nil {
			_ = stopRun()
			return burnResult{}, err
		}
		sc := stats[cairnq.DefaultQueue]
		if sc.Succeeded == n {
			break
		}
		if time.Since(start) > cfg.timeout {
			_ = stopRun()
			return burnResult{}, fmt.Errorf("%s: only %d of %d tasks succeeded after %v (%+v)", a.name, sc.Succeeded, n, cfg.timeout, sc)
		}
		time.Sleep(2 * time.Millisecond)
	}
	elapsed := time.Since(start)
	stopProfile()
	cliCPU := clientCPU() - cliBefore
	allocB1, allocN1 := heapAllocs()
	var waitShares []waitShare
	if waits != nil {
		waitShares = waits.finish()
	}
	srvCPU := cfg.srv.serverCPU(ctx).since(srvBefore)
	if err := stopRun(); err != nil {
		return burnResult{}, fmt.Errorf("%s: worker Run: %w", a.name, err)
	}
	res := burnResult{system: a.name, run: run, n: n, elapsed: elapsed, handlersDone: handlersDone, clientCPU: cliCPU, serverCPU: srvCPU, waits: waitShares,
		allocBytes: allocB1 - allocB0, allocObjects: allocN1 - allocN0}
	if counts != nil {
		d := counts.snapshot().sub(calls0)
		res.calls = &d
	}
	closeOnce()
	settle()
	res.server = readCounters(ctx, db).delta(before)
	if cfg.statements {
		res.statements, _ = topStatements(ctx, db, 12)
	}
	return res, nil
}

// cairnqSubmit measures Submit throughput: n submits of a no-op task from
// g goroutines, on a fresh database, after a short warm-up.
func cairnqSubmit(ctx context.Context, cfg *config, a adapter, g, run int) (rateResult, error) {
	db, err := cfg.srv.FreshDatabase(ctx, "cqsub_"+a.name)
	if err != nil {
		return rateResult{}, err
	}
	defer db.Drop()
	c, closeC, err := openClient(ctx, cfg, a, db.DSN, true, nil)
	if err != nil {
		return rateResult{}, err
	}
	defer closeC()
	if _, err := submitLoop(ctx, submitNoop(c), 200, min(g, cfg.pool)); err != nil { // warm the pool
		return rateResult{}, err
	}
	var waits *waitSampler
	if cfg.waitEvents {
		if waits, err = startWaitSampler(ctx, db); err != nil {
			return rateResult{}, err
		}
	}
	elapsed, err := submitLoop(ctx, submitNoop(c), cfg.submitN, g)
	if err != nil {
		return rateResult{}, fmt.Errorf("%s: submit: %w", a.name, err)
	}
	res := rateResult{system: a.name, goroutines: g, run: run, n: cfg.submitN, elapsed: elapsed}
	if waits != nil {
		res.waits = waits.finish()
	}
	return res, nil
}

// cairnqLatency measures enqueue-to-handler-start: an idle worker (default
// PollInterval, 500ms) in one client, submits from another client on its
// own executor, one at a time, so only LISTEN (or the poll) can wake the
// worker. latency = handler start - submit start.
func cairnqLatency(ctx context.Context, cfg *config, a adapter, listen bool, run int) (latResult, error) {
	label := "off"
	if listen {
		label = "on"
	}
	db, err := cfg.srv.FreshDatabase(ctx, "cqlat_"+a.name+"_"+label)
	if err != nil {
		return latResult{}, err
	}
	defer db.Drop()
	wc, closeW, err := openClient(ctx, cfg, a, db.DSN, listen, nil)
	if err != nil {
		return latResult{}, err
	}
	defer closeW()
	// The submitting client never needs wakeups: no LISTEN of its own.
	sc, closeS, err := openClient(ctx, cfg, a, db.DSN, false, nil)
	if err != nil {
		return latResult{}, err
	}
	defer closeS()

	n := cfg.latencyN
	if !listen && cfg.latencyNoListenN > 0 {
		n = cfg.latencyNoListenN
	}
	const warmup = 10
	total := n + warmup
	starts := make([]time.Time, total)
	started := make(chan int, 1)
	w, err := cairnq.NewWorker(wc, &cairnq.WorkerOptions{Logger: quietLogger()}) // every default: PollInterval 500ms
	if err != nil {
		return latResult{}, err
	}
	_ = w.Handle(noopName, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		now := time.Now()
		var p struct{ I int }
		if err := tc.Decode(&p); err != nil {
			return nil, cairnq.Permanent(err)
		}
		if p.I >= 0 && p.I < total {
			starts[p.I] = now
			started <- p.I
		}
		return nil, nil
	}, nil)
	runCtx, stop := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(runCtx) }()
	defer func() {
		stop()
		<-runDone
	}()

	lat := make([]time.Duration, 0, n)
	var submitDur, afterSubmit []time.Duration
	for i := range total {
		// A random gap around --latency-gap. With LISTEN off the gap is
		// also spread over a whole poll interval: the worker's idle sleep
		// starts when its previous claim comes back empty, right after the
		// previous task, so a short fixed gap would always land at the same
		// point of the poll cycle (latency ~ PollInterval - gap) instead of
		// a random one.
		spread := cfg.latencyGap
		if !listen {
			spread += pollInterval
		}
		gap := cfg.latencyGap/2 + time.Duration(rand.Int64N(int64(spread)+1))
		time.Sleep(gap)
		t0 := time.Now()
		if _, err := sc.Submit(ctx, noopName, map[string]int{"i": i}, nil); err != nil {
			return latResult{}, err
		}
		sd := time.Since(t0)
		select {
		case got := <-started:
			if got != i {
				return latResult{}, fmt.Errorf("handler started task %d while waiting for %d", got, i)
			}
		case <-time.After(10 * time.Second):
			return latResult{}, errors.New("no handler start within 10s of a submit")
		}
		if i >= warmup {
			lat = append(lat, starts[i].Sub(t0))
			submitDur = append(submitDur, sd)
			afterSubmit = append(afterSubmit, starts[i].Sub(t0.Add(sd)))
		}
	}
	return latResult{system: a.name, listen: listen, run: run, lat: lat, submit: submitDur, afterSubmit: afterSubmit}, nil
}

// writeAllocs writes the process's cumulative allocation profile to path.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}
