package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnq/cairnq-go/bench/internal/pgadmin"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverVersion is the River release the bench module pins (go.mod).
const riverVersion = "0.51.2"

type noopArgs struct{}

func (noopArgs) Kind() string { return "bench_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	ran   atomic.Int64
	total int64
	done  chan struct{}
}

func (w *noopWorker) Work(ctx context.Context, job *river.Job[noopArgs]) error {
	if w.ran.Add(1) == w.total {
		close(w.done)
	}
	return nil
}

func riverPool(ctx context.Context, dsn string, conns int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	if conns > 0 {
		cfg.MaxConns = int32(conns)
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// riverSetup migrates a fresh database for River and inserts n no-op jobs
// with InsertMany (not timed).
func riverSetup(ctx context.Context, cfg *config, db *pgadmin.Database, n int) error {
	pool, err := riverPool(ctx, db.DSN, cfg.pool)
	if err != nil {
		return err
	}
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: quietLogger()})
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	if n == 0 {
		return nil
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: quietLogger()})
	if err != nil {
		return err
	}
	const chunk = 1000
	params := make([]river.InsertManyParams, 0, chunk)
	for done := 0; done < n; {
		params = params[:0]
		for i := 0; i < chunk && done+i < n; i++ {
			params = append(params, river.InsertManyParams{Args: noopArgs{}})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return fmt.Errorf("river InsertMany: %w", err)
		}
		done += len(params)
	}
	return nil
}

// riverBurnDown runs River 0.51.2 on n no-op jobs with MaxWorkers workers
// on one queue, timed from Start until the worker count reached n and the
// database shows n completed jobs.
func riverBurnDown(ctx context.Context, cfg *config, run int) (burnResult, error) {
	n := cfg.tasks
	db, err := cfg.srv.FreshDatabase(ctx, "river")
	if err != nil {
		return burnResult{}, err
	}
	defer db.Drop()
	if err := riverSetup(ctx, cfg, db, n); err != nil {
		return burnResult{}, err
	}
	settle()
	before := readCounters(ctx, db)

	pool, err := riverPool(ctx, db.DSN, cfg.pool)
	if err != nil {
		return burnResult{}, err
	}
	closePool := sync.OnceFunc(pool.Close)
	defer closePool()
	w := &noopWorker{total: int64(n), done: make(chan struct{})}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:            quietLogger(),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.concurrency}},
		Workers:           workers,
		FetchCooldown:     cfg.riverFetchCooldown,
		FetchPollInterval: cfg.riverFetchPoll,
	})
	if err != nil {
		return burnResult{}, err
	}

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
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return burnResult{}, err
	}
	stopClient := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.Stop(sctx)
	}
	if err := waitRan(ctx, w.done, &w.ran, n, cfg.timeout); err != nil {
		stopClient()
		return burnResult{}, fmt.Errorf("river: %w", err)
	}
	handlersDone := time.Since(start)
	// Completions are written by River's batching completer after Work
	// returns: the run ends when the database shows them all.
	for {
		var completed int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&completed); err != nil {
			stopClient()
			return burnResult{}, err
		}
		if completed == n {
			break
		}
		if time.Since(start) > cfg.timeout {
			stopClient()
			return burnResult{}, fmt.Errorf("river: only %d of %d jobs completed after %v", completed, n, cfg.timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
	elapsed := time.Since(start)
	cliCPU := clientCPU() - cliBefore
	allocB1, allocN1 := heapAllocs()
	var waitShares []waitShare
	if waits != nil {
		waitShares = waits.finish()
	}
	srvCPU := cfg.srv.serverCPU(ctx).since(srvBefore)
	stopClient()
	closePool()
	settle()
	after := readCounters(ctx, db)
	res := burnResult{
		system: "river", run: run, n: n, elapsed: elapsed, handlersDone: handlersDone,
		server: after.delta(before), clientCPU: cliCPU, serverCPU: srvCPU, waits: waitShares,
		allocBytes: allocB1 - allocB0, allocObjects: allocN1 - allocN0,
	}
	if cfg.statements {
		res.statements, _ = topStatements(ctx, db, 12)
	}
	return res, nil
}

// riverInserter opens a River client on a fresh, migrated database named
// for name, for the insert benchmarks; closeFn drops it all.
func riverInserter(ctx context.Context, cfg *config, name string) (client *river.Client[pgx.Tx], db *pgadmin.Database, closeFn func(), err error) {
	db, err = cfg.srv.FreshDatabase(ctx, name)
	if err != nil {
		return nil, nil, nil, err
	}
	pool, err := riverPool(ctx, db.DSN, cfg.pool)
	if err == nil {
		if err = riverSetup(ctx, cfg, db, 0); err == nil {
			client, err = river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: quietLogger()})
		}
	}
	closeFn = func() {
		if pool != nil {
			pool.Close()
		}
		db.Drop()
	}
	if err != nil {
		closeFn()
		return nil, nil, nil, err
	}
	return client, db, closeFn, nil
}

// riverSubmit inserts n jobs one Insert call at a time from g goroutines.
func riverSubmit(ctx context.Context, cfg *config, g, run int) (rateResult, error) {
	client, db, closeFn, err := riverInserter(ctx, cfg, "riversub")
	if err != nil {
		return rateResult{}, err
	}
	defer closeFn()
	insert := func(ctx context.Context) error {
		_, err := client.Insert(ctx, noopArgs{}, nil)
		return err
	}
	var waits *waitSampler
	if cfg.waitEvents {
		if waits, err = startWaitSampler(ctx, db); err != nil {
			return rateResult{}, err
		}
	}
	elapsed, err := submitLoop(ctx, insert, cfg.submitN, g)
	if err != nil {
		return rateResult{}, fmt.Errorf("river insert: %w", err)
	}
	res := rateResult{system: "river", goroutines: g, run: run, n: cfg.submitN, elapsed: elapsed}
	if waits != nil {
		res.waits = waits.finish()
	}
	return res, nil
}

// riverWorkerConfig is the River config every benchmark's worker client
// runs with: the default queue at the burn-down's concurrency, the fetch
// settings of the flags, the given retention of completed jobs (-1 keeps
// them).
func riverWorkerConfig(cfg *config, workers *river.Workers, retention time.Duration) *river.Config {
	return &river.Config{
		Logger:                      quietLogger(),
		Queues:                      map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.concurrency}},
		Workers:                     workers,
		FetchCooldown:               cfg.riverFetchCooldown,
		FetchPollInterval:           cfg.riverFetchPoll,
		CompletedJobRetentionPeriod: retention,
	}
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
