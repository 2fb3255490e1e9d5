package main

// --bench durable: a handler of --durable-steps no-op durable steps, run
// --durable-n times by --durable-callers goroutines, each starting a run
// and waiting for its end before starting the next: cairnq (Client.Call
// of a handler of cairnq.Once steps), DBOS Transact (RunWorkflow then
// GetResult of a workflow of RunAsStep steps, run in the calling
// process) and River (Insert of a job of ResumableStep steps, then its
// completion event). Each system gets a fresh database, in turn within
// each run, so every run compares them under the same load.
//
// The systems do not write the same things: cairnq and DBOS commit
// every step's output before the next step starts (a kill -9 re-runs only
// the step it interrupted); River 0.51 records completed steps only when
// an attempt ends in an error, a snooze or a cooperative cancel, so its
// steps cost nothing here and a kill -9 re-runs them all.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	_ "github.com/dbos-inc/dbos-transact-golang/dbos/driver/sqlite" // DBOS's SQLite system database
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/bench/internal/pgadmin"
)

// dbosVersion is the DBOS Transact release the bench module pins.
const dbosVersion = "1.9.0"

// durableConfig is --bench durable's.
type durableConfig struct {
	n, steps, callers int
	backends          []string // postgres, sqlite
	systems           string
	// dbosSharedPool gives DBOS a pool of --pool connections, as cairnq
	// and River have, rather than the one DBOS makes by default.
	dbosSharedPool bool
}

func durableFlags(c *durableConfig) func() error {
	backends := flag.String("durable-backends", "postgres", "durable: backends, comma-separated (postgres, sqlite; River runs on postgres only)")
	flag.IntVar(&c.n, "durable-n", 10_000, "durable: runs per measurement")
	flag.IntVar(&c.steps, "durable-steps", 10, "durable: no-op steps per run")
	flag.IntVar(&c.callers, "durable-callers", 64, "durable: goroutines each starting a run and waiting for it")
	flag.StringVar(&c.systems, "durable-systems", "cairnq,dbos,river", "durable: systems, in order")
	flag.BoolVar(&c.dbosSharedPool, "durable-dbos-pool", false, "durable: give DBOS a pgxpool of --pool connections instead of its own default pool")
	return func() error {
		c.backends = splitList(*backends)
		for _, b := range c.backends {
			if b != "postgres" && b != "sqlite" {
				return fmt.Errorf("bad --durable-backends entry %q (postgres, sqlite)", b)
			}
		}
		if c.n < 1 || c.steps < 1 || c.callers < 1 {
			return errors.New("--durable-n, --durable-steps and --durable-callers must be >= 1")
		}
		return nil
	}
}

// durableRun is one system's measurement: runs per second.
type durableRun struct {
	system, backend string
	rate            float64
	took            time.Duration
}

func benchDurable(ctx context.Context, cfg *config) {
	d := cfg.durable
	fmt.Printf("durable: %d runs of %d no-op steps from %d callers; cairnq concurrency %d, River MaxWorkers %d, pools of %d; DBOS Transact %s, River %s\n",
		d.n, d.steps, d.callers, cfg.concurrency, cfg.concurrency, cfg.pool, dbosVersion, riverVersion)
	rates := map[[2]string][]float64{}
	for run := 1; run <= cfg.runs && ctx.Err() == nil; run++ {
		for _, backend := range d.backends {
			for _, sys := range splitList(d.systems) {
				if sys == "river" && backend == "sqlite" {
					continue
				}
				r, err := durableOnce(ctx, cfg, sys, backend)
				if err != nil {
					fmt.Printf("  run %d %s on %s: %v\n", run, sys, backend, err)
					continue
				}
				fmt.Printf("  run %d %-7s on %-8s %8.0f runs/s (%d runs in %v)\n", run, sys, backend, r.rate, d.n, r.took.Round(time.Millisecond))
				k := [2]string{sys, backend}
				rates[k] = append(rates[k], r.rate)
			}
		}
	}
	fmt.Println()
	for _, backend := range d.backends {
		cq := median(rates[[2]string{"cairnq", backend}])
		for _, peer := range []struct{ sys, label string }{{"dbos", "DBOS"}, {"river", "River"}} {
			p := median(rates[[2]string{peer.sys, backend}])
			if cq == 0 || p == 0 {
				continue
			}
			suffix := ""
			if backend == "sqlite" {
				suffix = " (SQLite)"
			}
			fmt.Printf("durable cairnq/%s = %.2fx%s (medians of %d runs: %.0f vs %.0f runs/s)\n",
				peer.label, cq/p, suffix, len(rates[[2]string{"cairnq", backend}]), cq, p)
		}
	}
}

// durableOnce measures one system on a fresh database of backend.
func durableOnce(ctx context.Context, cfg *config, sys, backend string) (durableRun, error) {
	target, cleanup, err := freshTarget(ctx, cfg, backend, "durable_"+sys)
	if err != nil {
		return durableRun{}, err
	}
	defer cleanup()
	var start func(ctx context.Context) (call func(i int) error, stop func(), err error)
	switch sys {
	case "cairnq":
		start = func(ctx context.Context) (func(int) error, func(), error) {
			return cairnqDurable(ctx, cfg, backend, target)
		}
	case "dbos":
		start = func(ctx context.Context) (func(int) error, func(), error) {
			return dbosDurable(ctx, cfg, backend, target)
		}
	case "river":
		start = func(ctx context.Context) (func(int) error, func(), error) {
			return riverDurable(ctx, cfg, target)
		}
	default:
		return durableRun{}, fmt.Errorf("unknown durable system %q (cairnq, dbos, river)", sys)
	}
	call, stop, err := start(ctx)
	if err != nil {
		return durableRun{}, err
	}
	defer stop()
	settle()
	took, err := callAll(ctx, cfg.durable.n, cfg.durable.callers, call)
	if err != nil {
		return durableRun{}, err
	}
	return durableRun{system: sys, backend: backend, rate: float64(cfg.durable.n) / took.Seconds(), took: took}, nil
}

// callAll runs call(i) for i in [0, n) from callers goroutines, each
// waiting for its call before the next, and returns how long all took.
func callAll(ctx context.Context, n, callers int, call func(i int) error) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	start := time.Now()
	for range callers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := call(i); err != nil {
					errs <- fmt.Errorf("run %d: %w", i, err)
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return took, ctx.Err()
}

// cairnqDurable starts a worker serving a handler of durable steps, and
// returns a call that runs one through Client.Call.
func cairnqDurable(ctx context.Context, cfg *config, backend, target string) (func(int) error, func(), error) {
	c, closeC, err := openOn(ctx, cfg, backend, target)
	if err != nil {
		return nil, nil, err
	}
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Concurrency: cfg.concurrency, Logger: quietLogger()})
	if err != nil {
		closeC()
		return nil, nil, err
	}
	steps := stepNames(cfg.durable.steps)
	_ = w.Handle("bench.durable", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		sum := 0
		for i, name := range steps {
			v, err := cairnq.Once(ctx, tc, name, func(context.Context) (int, error) { return i, nil })
			if err != nil {
				return nil, err
			}
			sum += v
		}
		return sum, nil
	}, nil)
	runCtx, stopRun := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(runCtx) }()
	stop := func() {
		stopRun()
		<-stopped
		closeC()
	}
	call := func(int) error {
		t, err := c.Call(ctx, "bench.durable", nil, &cairnq.CallOptions{WaitOptions: cairnq.WaitOptions{Timeout: time.Minute}})
		if err == nil && t.Status != cairnq.StatusSucceeded {
			err = fmt.Errorf("task %s ended %s", t.ID, t.Status)
		}
		return err
	}
	return call, stop, nil
}

// dbosDurable launches DBOS on target with a workflow of RunAsStep
// steps, and returns a call that runs one (RunWorkflow, GetResult).
func dbosDurable(ctx context.Context, cfg *config, backend, target string) (func(int) error, func(), error) {
	conf := dbos.Config{AppName: "bench-durable", Logger: quietLogger()}
	var closeExtra func()
	if backend == "postgres" && cfg.durable.dbosSharedPool {
		pool, err := riverPool(ctx, target, cfg.pool)
		if err != nil {
			return nil, nil, err
		}
		conf.SystemDBPool, closeExtra = pool, pool.Close
	} else if backend == "postgres" {
		conf.DatabaseURL, closeExtra = target, func() {}
	} else {
		conf.DatabaseURL = "sqlite:" + target
		closeExtra = func() {}
	}
	dctx, err := dbos.NewContext(ctx, conf)
	if err != nil {
		closeExtra()
		return nil, nil, err
	}
	steps := stepNames(cfg.durable.steps)
	workflow := func(ctx dbos.Context, in int) (int, error) {
		sum := 0
		for i, name := range steps {
			v, err := dbos.RunAsStep(ctx, func(context.Context) (int, error) { return i, nil }, dbos.WithStepName(name))
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	}
	dbos.RegisterWorkflow(dctx, workflow)
	if err := dbos.Launch(dctx); err != nil {
		closeExtra()
		return nil, nil, err
	}
	stop := func() {
		dbos.Shutdown(dctx, 30*time.Second)
		closeExtra()
	}
	call := func(i int) error {
		h, err := dbos.RunWorkflow(dctx, workflow, i)
		if err != nil {
			return err
		}
		_, err = h.GetResult()
		return err
	}
	return call, stop, nil
}

type durableArgs struct{}

func (durableArgs) Kind() string { return "bench_durable" }

// durableWorker is a River job of ResumableStep no-op steps.
type durableWorker struct {
	river.WorkerDefaults[durableArgs]
	steps []string
	step  time.Duration // each step's work
}

func (w *durableWorker) Work(ctx context.Context, job *river.Job[durableArgs]) error {
	for _, name := range w.steps {
		river.ResumableStep(ctx, name, nil, func(context.Context) error {
			time.Sleep(w.step)
			return nil
		})
	}
	return nil
}

// riverDurable starts a River client whose worker runs ResumableStep
// steps, and returns a call that inserts a job and waits for its
// completion event.
func riverDurable(ctx context.Context, cfg *config, dsn string) (func(int) error, func(), error) {
	if err := riverSetup(ctx, cfg, &pgadmin.Database{DSN: dsn}, 0); err != nil {
		return nil, nil, err
	}
	pool, err := riverPool(ctx, dsn, cfg.pool)
	if err != nil {
		return nil, nil, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &durableWorker{steps: stepNames(cfg.durable.steps)})
	client, err := river.NewClient(riverpgxv5.New(pool), riverWorkerConfig(cfg, workers, 0))
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	events, cancelSub := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed)
	var mu sync.Mutex
	waiting := map[int64]chan *river.Event{}
	early := map[int64]*river.Event{}
	routed := make(chan struct{})
	go func() { // owned by stop: it ends when cancelSub closes events
		defer close(routed)
		for ev := range events {
			mu.Lock()
			if ch, ok := waiting[ev.Job.ID]; ok {
				ch <- ev
				delete(waiting, ev.Job.ID)
			} else {
				early[ev.Job.ID] = ev
			}
			mu.Unlock()
		}
	}()
	if err := client.Start(ctx); err != nil {
		cancelSub()
		pool.Close()
		return nil, nil, err
	}
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.Stop(sctx)
		cancelSub()
		<-routed
		pool.Close()
	}
	call := func(int) error {
		res, err := client.Insert(ctx, durableArgs{}, nil)
		if err != nil {
			return err
		}
		ch := make(chan *river.Event, 1)
		mu.Lock()
		if ev, ok := early[res.Job.ID]; ok {
			delete(early, res.Job.ID)
			ch <- ev
		} else {
			waiting[res.Job.ID] = ch
		}
		mu.Unlock()
		select {
		case ev := <-ch:
			if ev.Kind != river.EventKindJobCompleted {
				return fmt.Errorf("job %d: %s", ev.Job.ID, ev.Kind)
			}
			return nil
		case <-time.After(time.Minute):
			return fmt.Errorf("job %d did not complete within a minute", res.Job.ID)
		}
	}
	return call, stop, nil
}

// stepNames are the names of n steps.
func stepNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint("step-", i)
	}
	return out
}

// freshTarget is a fresh database of backend for one measurement: a
// Postgres database on the bench's server, or a SQLite file in a
// temporary directory; cleanup drops it.
func freshTarget(ctx context.Context, cfg *config, backend, label string) (target string, cleanup func(), err error) {
	if backend == "postgres" {
		db, err := cfg.srv.FreshDatabase(ctx, label)
		if err != nil {
			return "", nil, err
		}
		return db.DSN, func() { db.Drop() }, nil
	}
	dir, err := os.MkdirTemp("", label+"-")
	if err != nil {
		return "", nil, err
	}
	return filepath.Join(dir, "tasks.db"), func() { os.RemoveAll(dir) }, nil
}

// openOn opens a cairnq client on target (freshTarget's): through pgx
// on Postgres.
func openOn(ctx context.Context, cfg *config, backend, target string) (*cairnq.Client, func(), error) {
	if backend == "postgres" {
		pgx, err := findAdapter("pgx")
		if err != nil {
			return nil, nil, err
		}
		return openClient(ctx, cfg, pgx, target, true, nil)
	}
	c, err := cairnq.Open(ctx, target, &cairnq.SQLiteOptions{Options: cairnq.Options{Logger: quietLogger()}})
	if err != nil {
		return nil, nil, err
	}
	return c, func() { c.Close() }, nil
}
