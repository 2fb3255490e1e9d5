package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/bench/internal/backlog"
	"github.com/cairnq/cairnq-go/executor"
)

const (
	noopName = "mem_noop"
	// waitName has no handler anywhere: its tasks stay queued.
	waitName = "mem_wait"
)

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// openClient opens a client on the backend's database. On Postgres every
// call crossing the executor seam adds one to calls (when not nil).
func openClient(ctx context.Context, cfg *config, backend, target string, calls *atomic.Int64) (*cairnq.Client, executor.Executor, func(), error) {
	opts := cairnq.Options{Logger: quietLogger()}
	if backend == "sqlite" {
		c, err := cairnq.Open(ctx, target, &cairnq.SQLiteOptions{Options: opts})
		if err != nil {
			return nil, nil, nil, err
		}
		return c, nil, func() { _ = c.Close() }, nil
	}
	ex, err := cairnqpgx.Open(ctx, target, &cairnqpgx.Options{MaxConns: int32(cfg.pool)})
	if err != nil {
		return nil, nil, nil, err
	}
	var seam executor.Executor = ex
	if calls != nil {
		seam = withCounting(ex, calls)
	}
	c, err := cairnq.OpenPostgres(ctx, seam, &cairnq.PostgresOptions{Options: opts})
	if err != nil {
		_ = ex.Close()
		return nil, nil, nil, err
	}
	return c, ex, func() {
		_ = c.Close()
		_ = ex.Close()
	}, nil
}

// fill submits n no-op tasks (setup, untimed): on Postgres SubmitTx in
// transactions of 500 from 8 goroutines, on SQLite Submit from 64
// goroutines (group commit).
func fill(ctx context.Context, cfg *config, backend, target string, n int) error {
	c, ex, closeFn, err := openClient(ctx, cfg, backend, target, nil)
	if err != nil {
		return err
	}
	defer closeFn()
	if ex == nil {
		return backlog.Fill(n, 1, 64, func(int) error {
			_, err := c.Submit(ctx, noopName, nil, nil)
			return err
		})
	}
	return backlog.Fill(n, 500, 8, func(count int) error { return backlog.InTx(ctx, c, ex, noopName, count) })
}

// snapshot is one reading of this process's memory.
type snapshot struct {
	RSS      int64 `json:"rss"`      // VmRSS
	HWM      int64 `json:"hwm"`      // VmHWM
	Heap     int64 `json:"heap"`     // /memory/classes/heap/objects:bytes (live and not yet swept)
	Live     int64 `json:"live"`     // /gc/heap/live:bytes (live after the last GC)
	GoTotal  int64 `json:"go_total"` // /memory/classes/total:bytes (all the Go runtime mapped)
	Stacks   int64 `json:"stacks"`   // /memory/classes/heap/stacks:bytes (goroutine stacks)
	Routines int   `json:"goroutines"`
}

var metricNames = []string{"/memory/classes/heap/objects:bytes", "/gc/heap/live:bytes", "/memory/classes/total:bytes", "/memory/classes/heap/stacks:bytes"}

func read() snapshot {
	var s snapshot
	if f, err := os.Open("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			for _, field := range []struct {
				name string
				dst  *int64
			}{{"VmRSS:", &s.RSS}, {"VmHWM:", &s.HWM}} {
				if rest, ok := strings.CutPrefix(line, field.name); ok {
					kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
					*field.dst = kb << 10
				}
			}
		}
		f.Close()
	}
	samples := make([]metrics.Sample, len(metricNames))
	for i, n := range metricNames {
		samples[i].Name = n
	}
	metrics.Read(samples)
	val := func(i int) int64 {
		if samples[i].Value.Kind() == metrics.KindUint64 {
			return int64(samples[i].Value.Uint64())
		}
		return 0
	}
	s.Heap, s.Live, s.GoTotal, s.Stacks = val(0), val(1), val(2), val(3)
	s.Routines = runtime.NumGoroutine()
	return s
}

// afterGC reads memory after a full collection.
func afterGC() snapshot {
	runtime.GC()
	runtime.GC()
	return read()
}

func runChild(ctx context.Context, cfg *config) error {
	if cfg.heapDir != "" {
		// Sample every 4 KiB allocated rather than 512 KiB, so that small
		// retained structures show (it slows the run: not for figures).
		runtime.MemProfileRate = 4096
	}
	var r result
	var err error
	switch cfg.child {
	case "drain":
		r, err = drain(ctx, cfg)
	case "waits":
		r, err = waits(ctx, cfg)
	default:
		err = fmt.Errorf("unknown child %q", cfg.child)
	}
	if err != nil {
		return err
	}
	r.Kind, r.Backend, r.N = cfg.child, cfg.backends[0], cfg.n
	b, _ := json.Marshal(r)
	fmt.Printf("RESULT %s\n", b)
	return nil
}

// drain runs one worker over the backlog until every task succeeded,
// sampling memory all along.
func drain(ctx context.Context, cfg *config) (result, error) {
	n := cfg.n
	c, _, closeFn, err := openClient(ctx, cfg, cfg.backends[0], cfg.db, nil)
	if err != nil {
		return result{}, err
	}
	defer closeFn()
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Concurrency: cfg.concurrency, Logger: quietLogger()})
	if err != nil {
		return result{}, err
	}
	var ran atomic.Int64
	if err := w.Handle(noopName, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		ran.Add(1)
		return nil, nil
	}, nil); err != nil {
		return result{}, err
	}

	var r result
	r.StartRSS = afterGC().RSS
	var mu sync.Mutex
	marks := [3]int64{int64(n) / 10, int64(n) / 2, int64(n) * 9 / 10}
	sample := func() {
		s := read()
		done := ran.Load()
		mu.Lock()
		defer mu.Unlock()
		r.Samples++
		r.PeakRSS = max(r.PeakRSS, s.RSS)
		r.PeakHeap = max(r.PeakHeap, s.Heap)
		r.PeakLive = max(r.PeakLive, s.Live)
		r.PeakGoTotal = max(r.PeakGoTotal, s.GoTotal)
		for i, m := range marks {
			if r.RSSAt[i] == 0 && done >= m {
				r.RSSAt[i], r.LiveAt[i] = s.RSS, s.Live
				if i == 2 && cfg.heapDir != "" {
					writeHeap(cfg, fmt.Sprintf("drain-%s-%d.pprof", cfg.backends[0], n))
				}
			}
		}
	}
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(cfg.sampleEvery)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				sample()
			}
		}
	}()

	runCtx, stop := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	start := time.Now()
	go func() { runDone <- w.Run(runCtx) }()
	// Done when every task is succeeded in the database (settlements are
	// grouped, so they trail the handler calls).
	deadline := time.Now().Add(30 * time.Minute)
	for {
		st, err := c.Stats(ctx, "")
		if err != nil {
			stop()
			return result{}, err
		}
		succeeded := 0
		for _, q := range st {
			succeeded += q.Succeeded
		}
		if succeeded >= n {
			break
		}
		if time.Now().After(deadline) {
			stop()
			return result{}, fmt.Errorf("stalled: %d of %d succeeded", succeeded, n)
		}
		time.Sleep(100 * time.Millisecond) // polling the database for progress, not synchronizing
	}
	r.Elapsed = time.Since(start)
	close(stopSampling)
	<-sampled
	sample()
	stop()
	if err := <-runDone; err != nil {
		return result{}, fmt.Errorf("worker: %w", err)
	}
	end := afterGC()
	r.HWM, r.EndLive = end.HWM, end.Live
	return r, nil
}

func writeHeap(cfg *config, name string) {
	if err := os.MkdirAll(cfg.heapDir, 0o755); err != nil {
		return
	}
	runtime.GC() // the inuse profile is as of the last GC
	f, err := os.Create(filepath.Join(cfg.heapDir, name))
	if err != nil {
		return
	}
	defer f.Close()
	_ = pprof.Lookup("heap").WriteTo(f, 0)
}

// waits holds cfg.n concurrent Waits on queued tasks that nobody runs,
// comparing memory, goroutines and executor calls with none held.
func waits(ctx context.Context, cfg *config) (result, error) {
	n := cfg.n
	var calls atomic.Int64
	c, _, closeFn, err := openClient(ctx, cfg, cfg.backends[0], cfg.db, &calls)
	if err != nil {
		return result{}, err
	}
	defer closeFn()
	ids := make([]string, n)
	for i := range ids {
		t, err := c.Submit(ctx, waitName, nil, nil)
		if err != nil {
			return result{}, err
		}
		ids[i] = t.ID
	}
	counted := cfg.backends[0] == "postgres"
	rate := func() float64 {
		if !counted {
			return -1
		}
		before := calls.Load()
		time.Sleep(cfg.waitWindow) // the measured window
		return float64(calls.Load()-before) / cfg.waitWindow.Seconds()
	}

	var r result
	r.Base = afterGC()
	r.Goroutines[0] = r.Base.Routines
	r.QueriesPerS[0] = rate()

	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Wait(wctx, id, &cairnq.WaitOptions{Timeout: time.Hour})
			if err != nil && wctx.Err() == nil {
				errs <- err
			}
		}()
	}
	// Let the polls grow to their cap (100ms x1.5 up to 500ms: ~1.3s).
	time.Sleep(2 * time.Second)
	r.QueriesPerS[1] = rate()
	r.Held = afterGC()
	if cfg.heapDir != "" {
		writeHeap(cfg, fmt.Sprintf("waits-%s-%d-held.pprof", cfg.backends[0], n))
	}
	r.Goroutines[1] = r.Held.Routines
	cancel()
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return result{}, fmt.Errorf("wait: %w", err)
	}
	after := afterGC()
	if cfg.heapDir != "" {
		writeHeap(cfg, fmt.Sprintf("waits-%s-%d-after.pprof", cfg.backends[0], n))
	}
	r.GoroutinesAt, r.AfterLive = after.Routines, after.Live
	r.HWM = after.HWM
	return r, nil
}

// countingExec counts the calls crossing the executor seam (Query, Exec,
// Tx), keeping the Listener.
type countingExec struct {
	executor.Executor
	calls *atomic.Int64
}

type countingListenExec struct {
	countingExec
	l executor.Listener
}

func (e countingListenExec) Listen(ctx context.Context, channels []string, onNotify func(channel, payload string)) (func(), error) {
	return e.l.Listen(ctx, channels, onNotify)
}

func withCounting(ex executor.Executor, calls *atomic.Int64) executor.Executor {
	ce := countingExec{Executor: ex, calls: calls}
	if l, ok := ex.(executor.Listener); ok {
		return countingListenExec{countingExec: ce, l: l}
	}
	return ce
}

func (e countingExec) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	e.calls.Add(1)
	return e.Executor.Query(ctx, sql, args...)
}

func (e countingExec) Exec(ctx context.Context, script string) error {
	e.calls.Add(1)
	return e.Executor.Exec(ctx, script)
}

func (e countingExec) Tx(ctx context.Context, fn func(ctx context.Context, s executor.Session) error) error {
	e.calls.Add(1)
	return e.Executor.Tx(ctx, fn)
}
