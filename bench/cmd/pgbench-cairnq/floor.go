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
const (
	floorSystem     = "floor"
	floorLeanSystem = "floor-lean"
)

// leanDrop lists the protocol v1 indexes the claim/complete path never
// reads.
var leanDrop = []string{
	"cairnq_tasks_name_idx", "cairnq_tasks_root_idx", "cairnq_tasks_correlation_idx",
	"cairnq_tasks_completed_idx", "cairnq_tasks_status_completed_idx", "cairnq_tasks_queue_completed_idx",
}

func floorLabel(sys string) string {
	if sys == floorLeanSystem {
		return "SQL floor, claim-path indexes only"
	}
	return "SQL floor, protocol v1 schema"
}

func floorBurnDown(ctx context.Context, cfg *config, lean bool, run int) (burnResult, error) {
	sys := floorSystem
	if lean {
		sys = floorLeanSystem
	}
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
					got, err := floorClaim(ctx, pool, claim, worker, cfg.floorBatch)
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
				workers := make([]string, len(ids))
				nulls := make([]any, len(ids))
				for i := range workers {
					workers[i] = worker
				}
				args, err := complete.Bind(protocol.Args{"ids": pgTextArray(ids), "worker_ids": pgTextArray(workers), "results": pgNullArray(len(nulls))})
				if err != nil {
					errs <- err
					return
				}
				tag, err := pool.Exec(ctx, complete.SQL, args...)
				if err != nil {
					errs <- err
					return
				}
				if tag.RowsAffected() != int64(len(ids)) {
					errs <- fmt.Errorf("complete_many settled %d of %d", tag.RowsAffected(), len(ids))
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cliCPU := clientCPU() - cliBefore
	srvCPU := cfg.srv.serverCPU(ctx).since(srvBefore)
	close(errs)
	if err := <-errs; err != nil {
		return burnResult{}, fmt.Errorf("%s: %w", sys, err)
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

// floorClaim runs one claim transaction as the worker does (asynchronous
// commit) and returns the ids it leased, read from the undecoded rows.
func floorClaim(ctx context.Context, pool *pgxpool.Pool, claim *protocol.Statement, worker string, limit int) ([]string, error) {
	args, err := claim.Bind(protocol.Args{
		"queues": nil, "queue": "default", "names": nil, "name": noopName,
		"worker_id": worker, "lease_ms": int64(30_000), "limit": int64(limit), "lease_expired_error": nil,
	})
	if err != nil {
		return nil, err
	}
	var ids []string
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, claim.SQL, args...)
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
	})
	return ids, err
}

// pgTextArray and pgNullArray write text[] literals the way the store
// binds arrays. Task ids need no escaping.
func pgTextArray(v []string) string { return `{"` + strings.Join(v, `","`) + `"}` }

func pgNullArray(n int) string {
	return "{" + strings.TrimSuffix(strings.Repeat("NULL,", n), ",") + "}"
}
