package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cairnq/cairnq-go/protocol"
)

// The SQL floor: how fast could any client drain the burn-down through
// cairnq's own claim and complete_many statements on this server? It
// drives them straight through pgx with nothing else: no handlers, no
// goroutine per task, rows left undecoded, batches as large as asked.
// What it costs the server per task is the database's share, which no
// client-side work can lower. Its loop is naive (claim, then settle and
// wait for that commit), so its rate is no ceiling for a worker, which
// overlaps claims with settlements.
//
// floorLean runs the same loop after dropping the six protocol indexes
// that neither statement reads (they serve list, purge and lineage
// lookups, but every claim and every settlement writes an entry into each
// of them): the share of the floor that is the protocol's index set.
//
// floorWorker is the floor in the worker's own shape at --concurrency:
// one loop claims at most that many tasks at a time, each claim a durable
// statement of its own, and hands what it drew to one settling goroutine,
// which settles everything handed to it since its last complete_many in
// the next; up to settlingCap times the concurrency may wait for their
// settlement, as in the worker. It is the rate a worker would reach if
// its calls, their goroutines and its client-side work cost nothing.
const (
	floorSystem       = "floor"
	floorLeanSystem   = "floor-lean"
	floorWorkerSystem = "floor-worker"
)

// floorSystems are the floor's variants, in the order a run measures them.
var floorSystems = []string{floorSystem, floorLeanSystem, floorWorkerSystem}

// settlingCap mirrors the worker's bound (worker_run.go) on tasks whose
// settlement has not yet committed, in multiples of the concurrency.
const settlingCap = 4

// leanDrop lists the protocol v1 indexes the claim/complete path never
// reads.
var leanDrop = []string{
	"cairnq_tasks_name_idx", "cairnq_tasks_root_idx", "cairnq_tasks_correlation_idx",
	"cairnq_tasks_completed_idx", "cairnq_tasks_status_completed_idx", "cairnq_tasks_queue_completed_idx",
}

func floorLabel(sys string) string {
	switch sys {
	case floorLeanSystem:
		return "SQL floor, claim-path indexes only"
	case floorWorkerSystem:
		return "SQL floor, worker's shape"
	}
	return "SQL floor, protocol v1 schema"
}

// floorShape describes a floor variant's loops for the report.
func floorShape(cfg *config, sys string) string {
	if sys == floorWorkerSystem {
		return fmt.Sprintf("1 loop, durable claims of at most %d tasks, settlements grouped behind them", cfg.concurrency)
	}
	return fmt.Sprintf("%d loops, %d tasks per claim, %d claims per complete_many", cfg.floorStreams, cfg.floorBatch, cfg.floorSettle)
}

func floorBurnDown(ctx context.Context, cfg *config, sys string, run int) (burnResult, error) {
	lean := sys == floorLeanSystem
	n := cfg.tasks
	db, err := cfg.srv.FreshDatabase(ctx, "cq_"+strings.ReplaceAll(sys, "-", "_"))
	if err != nil {
		return burnResult{}, err
	}
	defer db.Drop()

	// The schema and the tasks come from cairnq itself, as in the burn-down.
	a, err := findAdapter("pgx")
	if err != nil {
		return burnResult{}, err
	}
	if err := loadBacklog(ctx, cfg, a, db.DSN, n); err != nil {
		return burnResult{}, fmt.Errorf("%s: %w", sys, err)
	}

	pool, err := pgxpool.New(ctx, db.DSN)
	if err != nil {
		return burnResult{}, err
	}
	defer pool.Close()
	if lean {
		for _, idx := range leanDrop {
			if _, err := pool.Exec(ctx, "DROP INDEX "+idx); err != nil {
				return burnResult{}, fmt.Errorf("%s: %w", sys, err)
			}
		}
	}
	settle()
	before := readCounters(ctx, db)

	stmts := protocol.Statements(protocol.Postgres)
	claim := stmts.Get(protocol.StmtClaimOneQueueOneName)
	complete := stmts.Get(protocol.StmtCompleteMany)
	const worker = "floor"

	srvBefore := cfg.srv.serverCPU(ctx)
	cliBefore := clientCPU()
	start := time.Now()
	drain := floorDrainStreams
	if sys == floorWorkerSystem {
		drain = floorDrainWorkerShape
	}
	drainErr := drain(ctx, cfg, pool, claim, complete, worker)
	elapsed := time.Since(start)
	cliCPU := clientCPU() - cliBefore
	srvCPU := cfg.srv.serverCPU(ctx).since(srvBefore)
	if drainErr != nil {
		return burnResult{}, fmt.Errorf("%s: %w", sys, drainErr)
	}
	var succeeded int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM cairnq_tasks WHERE status = 'succeeded'").Scan(&succeeded); err != nil {
		return burnResult{}, err
	}
	if succeeded != n {
		return burnResult{}, fmt.Errorf("%s: %d of %d tasks succeeded", sys, succeeded, n)
	}
	pool.Close()
	settle()
	return burnResult{system: sys, run: run, n: n, elapsed: elapsed, handlersDone: elapsed,
		clientCPU: cliCPU, serverCPU: srvCPU, server: readCounters(ctx, db).delta(before)}, nil
}

// floorDrainStreams drains the backlog through --floor-streams loops,
// each running --floor-settle asynchronously committed claims and then
// one complete_many on what they drew.
func floorDrainStreams(ctx context.Context, cfg *config, pool *pgxpool.Pool, claim, complete *protocol.Statement, worker string) error {
	var wg sync.WaitGroup
	errs := make(chan error, cfg.floorStreams)
	for range cfg.floorStreams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				// Up to floorSettle claims, then one complete_many for all
				// of them, as the worker's settlements trail its claims.
				var ids []string
				for range cfg.floorSettle {
					got, err := floorClaim(ctx, pool, claim, worker, cfg.floorBatch, false)
					if err != nil {
						errs <- err
						return
					}
					if len(got) == 0 {
						break
					}
					ids = append(ids, got...)
				}
				if len(ids) == 0 {
					return
				}
				if err := floorSettle(ctx, pool, complete, worker, ids); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// floorDrainWorkerShape drains the backlog in the worker's shape (see
// floorWorkerSystem).
func floorDrainWorkerShape(ctx context.Context, cfg *config, pool *pgxpool.Pool, claim, complete *protocol.Statement, worker string) error {
	var (
		mu        sync.Mutex
		room      = sync.NewCond(&mu)
		pending   []string // drawn, not yet handed to a complete_many
		unsettled int      // drawn, not yet settled
		drained   bool
		failed    error
	)
	handed := make(chan struct{}, 1)
	signal := func() {
		select {
		case handed <- struct{}{}:
		default:
		}
	}
	fail := func(err error) {
		mu.Lock()
		if failed == nil {
			failed = err
		}
		drained = true
		room.Broadcast()
		mu.Unlock()
		signal()
	}
	settled := make(chan struct{})
	go func() {
		defer close(settled)
		for range handed {
			mu.Lock()
			ids, done := pending, drained
			pending = nil
			mu.Unlock()
			if len(ids) > 0 {
				if err := floorSettle(ctx, pool, complete, worker, ids); err != nil {
					fail(err)
					return
				}
				mu.Lock()
				unsettled -= len(ids)
				room.Broadcast()
				mu.Unlock()
				signal() // more may have been handed during the statement
				continue
			}
			if done {
				return
			}
		}
	}()
	for {
		mu.Lock()
		for unsettled >= settlingCap*cfg.concurrency && !drained {
			room.Wait()
		}
		stop := drained
		mu.Unlock()
		if stop {
			break
		}
		ids, err := floorClaim(ctx, pool, claim, worker, cfg.concurrency, true)
		if err != nil {
			fail(err)
			break
		}
		mu.Lock()
		pending = append(pending, ids...)
		unsettled += len(ids)
		drained = drained || len(ids) == 0
		mu.Unlock()
		signal()
	}
	<-settled
	return failed
}

// floorSettle completes ids in one complete_many, as the worker's
// completion groups do.
func floorSettle(ctx context.Context, pool *pgxpool.Pool, complete *protocol.Statement, worker string, ids []string) error {
	workers := make([]string, len(ids))
	for i := range workers {
		workers[i] = worker
	}
	args, err := complete.Bind(protocol.Args{"ids": pgTextArray(ids), "worker_ids": pgTextArray(workers), "results": pgNullArray(len(ids))})
	if err != nil {
		return err
	}
	tag, err := pool.Exec(ctx, complete.SQL, args...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != int64(len(ids)) {
		return fmt.Errorf("complete_many settled %d of %d", tag.RowsAffected(), len(ids))
	}
	return nil
}

// floorClaim runs one claim and returns the ids it leased, read from the
// undecoded rows: a statement of its own when durable, as the worker's,
// else in a transaction that commits asynchronously.
func floorClaim(ctx context.Context, pool *pgxpool.Pool, claim *protocol.Statement, worker string, limit int, durable bool) ([]string, error) {
	args, err := claim.Bind(protocol.Args{
		"queues": nil, "queue": "default", "names": nil, "name": noopName,
		"worker_id": worker, "lease_ms": int64(30_000), "limit": int64(limit), "lease_expired_error": nil,
	})
	if err != nil {
		return nil, err
	}
	var ids []string
	read := func(q interface {
		Query(context.Context, string, ...any) (pgx.Rows, error)
	}) error {
		rows, err := q.Query(ctx, claim.SQL, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		idCol := -1
		for i, f := range rows.FieldDescriptions() {
			if f.Name == "id" {
				idCol = i
			}
		}
		for rows.Next() {
			ids = append(ids, string(rows.RawValues()[idCol]))
		}
		return rows.Err()
	}
	if durable {
		return ids, read(pool)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
			return err
		}
		return read(tx)
	})
	return ids, err
}

// pgTextArray and pgNullArray write text[] literals the way the store
// binds arrays. Task ids need no escaping.
func pgTextArray(v []string) string { return `{"` + strings.Join(v, `","`) + `"}` }

func pgNullArray(n int) string {
	return "{" + strings.TrimSuffix(strings.Repeat("NULL,", n), ",") + "}"
}
