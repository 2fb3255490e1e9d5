package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
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
//
// floorCalls and floorStore climb from there toward the worker, one layer
// at a time, so that the gap between the worker and floorWorker can be
// read layer by layer: floorCalls runs each claimed task through a no-op
// call in a goroutine of its own, which hands the task to the settling
// goroutine when it returns, and the loop claims again only once every
// call of its draw has returned (the worker waits for its slots the same
// way); floorStore does that through cairnq's store instead of raw
// statements: the claim as the busy worker makes it (its rows decoded
// into tasks) and the settlements as the worker's completer writes them.
// What is left between floorStore and the worker is the worker's own
// machinery: contexts, leases tracked for the heartbeat, limits, panics
// recovered, the slots gathered.
const (
	floorSystem       = "floor"
	floorLeanSystem   = "floor-lean"
	floorWorkerSystem = "floor-worker"
	floorCallsSystem  = "floor-calls"
	floorStoreSystem  = "floor-store"
)

// floorSystems are the floor's variants, in the order a run measures them.
var floorSystems = []string{floorSystem, floorLeanSystem, floorWorkerSystem, floorCallsSystem, floorStoreSystem}

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
	case floorCallsSystem:
		return "SQL floor, worker's shape + calls"
	case floorStoreSystem:
		return "SQL floor, worker's shape + calls + store"
	}
	return "SQL floor, protocol v1 schema"
}

// isFloor reports whether sys is one of the floor's variants.
func isFloor(sys string) bool { return slices.Contains(floorSystems, sys) }

// floorShape describes a floor variant's loops for the report.
func floorShape(cfg *config, sys string) string {
	switch sys {
	case floorWorkerSystem:
		return fmt.Sprintf("1 loop, durable claims of at most %d tasks, settlements grouped behind them", cfg.concurrency)
	case floorCallsSystem:
		return "the worker's shape, each task through a no-op call in a goroutine of its own"
	case floorStoreSystem:
		return "the same, claims and settlements through cairnq's store as the worker makes them"
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
	claimStmt := stmts.Get("claim").Specialize(floorClaimArgs())
	completeStmt := stmts.Get("complete_many")
	const worker = "floor"
	claim := func(ctx context.Context, limit int, durable bool) ([]string, error) {
		return floorClaim(ctx, pool, claimStmt, worker, limit, durable)
	}
	complete := func(ctx context.Context, ids []string) error {
		return floorSettle(ctx, pool, completeStmt, worker, ids)
	}
	var st *engine.Store
	if sys == floorStoreSystem {
		if claim, complete, st, err = storeFloor(ctx, cfg, db.DSN, worker); err != nil {
			return burnResult{}, fmt.Errorf("%s: %w", sys, err)
		}
		defer st.Close()
	}

	srvBefore := cfg.srv.serverCPU(ctx)
	cliBefore := clientCPU()
	start := time.Now()
	var drainErr error
	switch sys {
	case floorWorkerSystem, floorCallsSystem, floorStoreSystem:
		drainErr = floorDrainWorkerShape(ctx, cfg, claim, complete, sys != floorWorkerSystem)
	default:
		drainErr = floorDrainStreams(ctx, cfg, claim, complete)
	}
	elapsed := time.Since(start)
	cliCPU := clientCPU() - cliBefore
	srvCPU := cfg.srv.serverCPU(ctx).since(srvBefore)
	if drainErr != nil {
		return burnResult{}, fmt.Errorf("%s: %w", sys, drainErr)
	}
	if st != nil {
		// Before the counters: a backend reports its commits when it
		// disconnects, if not sooner.
		if err := st.Close(); err != nil {
			return burnResult{}, err
		}
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
func floorDrainStreams(ctx context.Context, cfg *config, claim floorClaimFunc, complete floorSettleFunc) error {
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
					got, err := claim(ctx, cfg.floorBatch, false)
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
				if err := complete(ctx, ids); err != nil {
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

// floorClaimFunc claims up to limit tasks and returns their ids, durably
// or not; floorSettleFunc completes ids in one statement.
type (
	floorClaimFunc  func(ctx context.Context, limit int, durable bool) ([]string, error)
	floorSettleFunc func(ctx context.Context, ids []string) error
)

// floorDrainWorkerShape drains the backlog in the worker's shape (see
// floorWorkerSystem), through calls when calls is set (floorCallsSystem).
func floorDrainWorkerShape(ctx context.Context, cfg *config, claim floorClaimFunc, complete floorSettleFunc, calls bool) error {
	var (
		mu        sync.Mutex
		room      = sync.NewCond(&mu)
		pending   []string // drawn (and called), not yet handed to a complete_many
		unsettled int      // drawn, not yet settled
		running   int      // calls of the last draw not yet returned
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
			ids, done := pending, drained && running == 0
			pending = nil
			mu.Unlock()
			if len(ids) > 0 {
				if err := complete(ctx, ids); err != nil {
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
	noop := func(context.Context, string) error { return nil }
	for {
		mu.Lock()
		for (unsettled >= settlingCap*cfg.concurrency || running > 0) && !drained {
			room.Wait()
		}
		stop := drained
		mu.Unlock()
		if stop {
			break
		}
		ids, err := claim(ctx, cfg.concurrency, true)
		if err != nil {
			fail(err)
			break
		}
		mu.Lock()
		unsettled += len(ids)
		drained = drained || len(ids) == 0
		if !calls {
			pending = append(pending, ids...)
		} else {
			running += len(ids)
			for _, id := range ids {
				go func() {
					err := noop(ctx, id)
					mu.Lock()
					if err == nil {
						pending = append(pending, id)
					}
					if running--; running == 0 {
						room.Broadcast()
					}
					mu.Unlock()
					signal()
				}()
			}
		}
		mu.Unlock()
		signal()
	}
	mu.Lock()
	for running > 0 { // after a failure, the calls of the last draw
		room.Wait()
	}
	mu.Unlock()
	signal()
	<-settled
	return failed
}

// storeFloor returns the claims and settlements of floorStoreSystem, on a
// store of its own over the pgx adapter, which the caller closes.
func storeFloor(ctx context.Context, cfg *config, dsn, worker string) (floorClaimFunc, floorSettleFunc, *engine.Store, error) {
	ex, err := cairnqpgx.Open(ctx, dsn, &cairnqpgx.Options{MaxConns: int32(cfg.pool)})
	if err != nil {
		return nil, nil, nil, err
	}
	st, err := engine.OpenPostgres(ctx, ex, engine.PostgresOptions{CloseExecutor: true})
	if err != nil {
		ex.Close()
		return nil, nil, nil, err
	}
	// A busy worker's claims: no probe first, leases recovered once a
	// minute, as a busy worker's are once a poll. A LeaseLook is one
	// loop's; the streams claim at once, so each claim borrows one. (Up
	// to session 26 this floor never recovered: now each stream's first
	// claim does, a statement per stream in a run of thousands.)
	looks := make(chan *engine.LeaseLook, 256)
	claim := func(ctx context.Context, limit int, _ bool) ([]string, error) {
		var leases *engine.LeaseLook
		select {
		case leases = <-looks:
		default:
			leases = &engine.LeaseLook{Every: time.Minute}
		}
		got, err := st.Claims(ctx, engine.ClaimRequest{ClaimParams: cairnqtype.ClaimParams{Queues: []string{"default"},
			Names: []string{noopName}, WorkerID: worker, Lease: 30 * time.Second}, Busy: true, Leases: leases, Calls: limit,
			Draws: []engine.Draw{{Batch: 1, Calls: limit, Tasks: -1}}})
		select {
		case looks <- leases:
		default:
		}
		var tasks []*cairnqtype.Task
		if err == nil {
			tasks = got.Tasks[0]
		}
		ids := make([]string, len(tasks))
		for i, t := range tasks {
			ids[i] = t.ID
		}
		return ids, err
	}
	complete := func(ctx context.Context, ids []string) error {
		cs := make([]*engine.Completion, len(ids))
		for i, id := range ids {
			cs[i] = &engine.Completion{ID: id, WorkerID: worker}
		}
		if err := st.SettleCompletions(ctx, cs); err != nil {
			return err
		}
		for _, c := range cs {
			if c.Err != nil {
				return c.Err
			}
		}
		return nil
	}
	return claim, complete, st, nil
}

// floorSettle completes ids in one complete_many, as the worker's
// completer does.
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

// floorClaimArgs is the one queue and one name the floor's claim draws
// from, which it is specialized for: a worker's claim in the same case.
func floorClaimArgs() protocol.Args {
	return protocol.Args{"queues": protocol.One("default"), "names": protocol.One(noopName)}
}

// floorClaim runs one claim and returns the ids it leased, read from the
// undecoded rows: a statement of its own when durable, as the worker's,
// else in a transaction that commits asynchronously.
func floorClaim(ctx context.Context, pool *pgxpool.Pool, claim *protocol.Statement, worker string, limit int, durable bool) ([]string, error) {
	a := floorClaimArgs()
	a["worker_id"], a["lease_ms"], a["limit"] = worker, int64(30_000), int64(limit)
	args, err := claim.Bind(a)
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
