package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/protocol"
)

// The bulk benchmark (issue 30): --bulk-n unkeyed no-op tasks written in
// batches of each --bulk-batch size by --bulk-goroutines goroutines, by
// cairnq's SubmitMany through pgx, by River's InsertMany, and by the
// floors: the same rows by COPY into cairnq_tasks, each batch one COPY
// and one commit. The systems alternate within a run (their order
// reverses every other run) and each runs in a fresh database.

// The bulk systems.
const (
	bulkRiver  = "river"
	bulkCairnq = "cairnq"
	// bulkCopy is the floor: the protocol's schema, its ten indexes and
	// its notify trigger, as they are.
	bulkCopy = "copy"
	// bulkCopyRiver is the floor in a scratch database whose cairnq_tasks
	// carries River's index set instead of the protocol's (river_job's
	// pkey, kind, prioritized-fetching, partial finalized and partial
	// unique btrees and its GIN indexes on args and metadata, mapped onto
	// cairnq's columns); the trigger stays.
	bulkCopyRiver = "copy-river"
	// bulkCopyRiverBare is bulkCopyRiver without the notify trigger: what
	// River's own table costs a COPY (River has no row trigger).
	bulkCopyRiverBare = "copy-river-notrigger"
	// bulkCopyBare is the protocol's indexes without the trigger.
	bulkCopyBare = "copy-notrigger"
	// bulkCopyTx is the floor as SubmitMany sends it: BEGIN, the clock
	// read (clock_ms), the COPY, COMMIT; the rows built before, as the
	// floor's are. What SubmitMany takes beyond it is the store's own work.
	bulkCopyTx = "copy-tx"
	// bulkInsertMany runs insert_many's SQL (or --bulk-sql's) straight
	// through pgx, its rows left undecoded: the statement's own cost,
	// without the store.
	bulkInsertMany = "sql-insert-many"
	// bulkInsertManyAll is insert_many returning every column, as it did
	// before the store built the tasks from what it sent.
	bulkInsertManyAll = "sql-insert-many-all"
)

var bulkSystems = []string{bulkRiver, bulkCairnq, bulkCopy, bulkCopyTx, bulkCopyBare, bulkCopyRiver, bulkCopyRiverBare, bulkInsertMany, bulkInsertManyAll}

func bulkLabel(sys string) string {
	switch sys {
	case bulkRiver:
		return "River " + riverVersion + " InsertMany"
	case bulkCairnq:
		return "cairnq pgx SubmitMany"
	case bulkCopy:
		return "COPY floor (protocol schema)"
	case bulkCopyBare:
		return "COPY floor, no trigger"
	case bulkCopyTx:
		return "COPY floor in SubmitMany's transaction"
	case bulkCopyRiver:
		return "COPY floor, River's index set"
	case bulkCopyRiverBare:
		return "COPY floor, River's index set, no trigger"
	case bulkInsertMany:
		return "insert_many via pgx"
	case bulkInsertManyAll:
		return "insert_many via pgx, RETURNING *"
	}
	return sys
}

// riverIndexSet turns the protocol's cairnq_tasks into one indexed as
// river_job is (River 0.51.2): the protocol's indexes without a River
// counterpart go, GIN indexes on payload and metadata come (River's on
// args and metadata). pkey (id), name (kind), claim (River's
// prioritized-fetching index) stay. River's finalized_at and unique_key
// indexes are partial and a new job enters neither, nor would a queued
// task enter their cairnq counterparts, so they are left out.
var riverIndexSet = []string{
	"DROP INDEX cairnq_tasks_root_idx",
	"DROP INDEX cairnq_tasks_correlation_idx",
	"DROP INDEX cairnq_tasks_completed_idx",
	"DROP INDEX cairnq_tasks_lease_idx",
	"DROP INDEX cairnq_tasks_claim_name_idx",
	"DROP INDEX cairnq_tasks_status_completed_idx",
	"DROP INDEX cairnq_tasks_queue_completed_idx",
	"CREATE INDEX bench_payload_gin ON cairnq_tasks USING GIN (payload)",
	"CREATE INDEX bench_metadata_gin ON cairnq_tasks USING GIN (metadata)",
}

type bulkResult struct {
	system       string
	batch, run   int
	n            int
	elapsed      time.Duration
	cliCPU, sCPU time.Duration
}

func (r bulkResult) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

// bulkLoop writes n tasks in calls of fn with at most batch each, split
// over g goroutines, and returns the wall time.
func bulkLoop(ctx context.Context, n, batch, g int, fn func(ctx context.Context, size int) error) (time.Duration, error) {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, g)
	for w := range g {
		share := n / g
		if w < n%g {
			share++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done := 0; done < share && errs[w] == nil; done += batch {
				errs[w] = fn(ctx, min(batch, share-done))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return elapsed, nil
}

// bulkRun measures one system at one batch size.
func bulkRun(ctx context.Context, cfg *config, sys string, batch, run int) (bulkResult, error) {
	var write func(ctx context.Context, size int) error
	var count func(ctx context.Context) (int, error) // the rows written
	var cleanup []func()
	defer func() {
		for _, f := range slices.Backward(cleanup) {
			f()
		}
	}()
	switch sys {
	case bulkRiver:
		client, db, closeFn, err := riverInserter(ctx, cfg, "riverbulk")
		if err != nil {
			return bulkResult{}, err
		}
		cleanup = append(cleanup, closeFn)
		count = rowCount(db.DSN, "river_job")
		params := make([]river.InsertManyParams, batch)
		for i := range params {
			params[i] = river.InsertManyParams{Args: noopArgs{}}
		}
		write = func(ctx context.Context, size int) error {
			_, err := client.InsertMany(ctx, params[:size])
			return err
		}
	case bulkCairnq:
		a, err := findAdapter("pgx")
		if err != nil {
			return bulkResult{}, err
		}
		db, err := cfg.srv.FreshDatabase(ctx, "cqbulk")
		if err != nil {
			return bulkResult{}, err
		}
		cleanup = append(cleanup, db.Drop)
		count = rowCount(db.DSN, "cairnq_tasks")
		c, closeC, err := openClient(ctx, cfg, a, db.DSN, true, nil)
		if err != nil {
			return bulkResult{}, err
		}
		cleanup = append(cleanup, closeC)
		items := make([]cairnq.SubmitItem, batch)
		for i := range items {
			items[i] = cairnq.SubmitItem{Name: noopName}
		}
		write = func(ctx context.Context, size int) error {
			_, err := c.SubmitMany(ctx, items[:size])
			return err
		}
	default:
		pool, drop, err := bulkScratch(ctx, cfg, sys)
		if err != nil {
			return bulkResult{}, err
		}
		cleanup = append(cleanup, drop)
		if write, err = bulkSQLWriter(cfg, pool, sys); err != nil {
			return bulkResult{}, err
		}
		count = func(ctx context.Context) (n int, err error) {
			return n, pool.QueryRow(ctx, "SELECT count(*) FROM cairnq_tasks").Scan(&n)
		}
	}
	srvBefore := cfg.srv.serverCPU(ctx)
	cliBefore := clientCPU()
	elapsed, err := bulkLoop(ctx, cfg.bulkN, batch, cfg.bulkGoroutines, write)
	if err != nil {
		return bulkResult{}, fmt.Errorf("%s: %w", sys, err)
	}
	cliCPU, srvCPU := clientCPU()-cliBefore, cfg.srv.serverCPU(ctx).since(srvBefore)
	if n, err := count(ctx); err != nil || n != cfg.bulkN {
		return bulkResult{}, fmt.Errorf("%s: %d rows written of %d (%v)", sys, n, cfg.bulkN, err)
	}
	return bulkResult{system: sys, batch: batch, run: run, n: cfg.bulkN, elapsed: elapsed,
		cliCPU: cliCPU, sCPU: srvCPU}, nil
}

// rowCount counts table's rows in the database at dsn, on a connection
// of its own.
func rowCount(dsn, table string) func(ctx context.Context) (int, error) {
	return func(ctx context.Context) (n int, err error) {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return 0, err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		return n, conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n)
	}
}

// bulkScratch is a fresh database migrated by cairnq, reshaped for sys,
// and a pool on it.
func bulkScratch(ctx context.Context, cfg *config, sys string) (*pgxpool.Pool, func(), error) {
	db, err := cfg.srv.FreshDatabase(ctx, "cq_"+strings.ReplaceAll(sys, "-", "_"))
	if err != nil {
		return nil, nil, err
	}
	a, err := findAdapter("pgx")
	if err != nil {
		db.Drop()
		return nil, nil, err
	}
	_, closeC, err := openClient(ctx, cfg, a, db.DSN, false, nil) // migrates
	if err != nil {
		db.Drop()
		return nil, nil, err
	}
	closeC()
	pool, err := riverPool(ctx, db.DSN, cfg.pool)
	if err != nil {
		db.Drop()
		return nil, nil, err
	}
	drop := func() { pool.Close(); db.Drop() }
	var ddl []string
	if sys == bulkCopyRiver || sys == bulkCopyRiverBare {
		ddl = append(ddl, riverIndexSet...)
	}
	if sys == bulkCopyRiverBare || sys == bulkCopyBare {
		ddl = append(ddl, "DROP TRIGGER cairnq_tasks_notify ON cairnq_tasks")
	}
	for _, q := range ddl {
		if _, err := pool.Exec(ctx, q); err != nil {
			drop()
			return nil, nil, fmt.Errorf("%s: %s: %w", sys, q, err)
		}
	}
	return pool, drop, nil
}

// bulkCopyColumns are the columns insert_many writes; the floor copies
// the values SubmitMany gives them for a no-op task (the times from this
// process's clock instead of the server's).
var bulkCopyColumns = []string{"id", "name", "queue", "status", "payload", "metadata", "max_attempts", "priority", "run_at_ms", "parent_id", "root_id", "correlation_id", "created_at_ms", "updated_at_ms"}

// bulkSQLWriter writes one batch of sys's straight through pool.
func bulkSQLWriter(cfg *config, pool *pgxpool.Pool, sys string) (func(ctx context.Context, size int) error, error) {
	switch sys {
	case bulkInsertMany, bulkInsertManyAll:
		stmt := protocol.Statements(protocol.Postgres).Get("insert_many")
		if cfg.bulkSQL != "" && sys == bulkInsertMany {
			src, err := os.ReadFile(cfg.bulkSQL)
			if err != nil {
				return nil, err
			}
			if stmt, err = protocol.Compile("bulk-sql", string(src), protocol.Postgres); err != nil {
				return nil, err
			}
		}
		sql := stmt.SQL
		if sys == bulkInsertManyAll {
			at := strings.LastIndex(sql, "RETURNING ")
			sql = sql[:at] + "RETURNING *"
		}
		return func(ctx context.Context, size int) error {
			args, err := stmt.Bind(bulkInsertManyArgs(size))
			if err != nil {
				return err
			}
			rows, err := pool.Query(ctx, sql, args...)
			if err != nil {
				return err
			}
			for rows.Next() {
				_ = rows.RawValues()
			}
			return rows.Err()
		}, nil
	}
	return func(ctx context.Context, size int) error {
		now := time.Now().UnixMilli()
		rows := make([][]any, size)
		for i := range rows {
			id := cairnq.NewTaskID()
			rows[i] = []any{id, noopName, "default", "queued", "{}", "{}", int32(3), int32(0), now, nil, id, nil, now, now}
		}
		if sys == bulkCopyTx {
			return bulkCopyInTx(ctx, pool, rows)
		}
		n, err := pool.CopyFrom(ctx, pgx.Identifier{"cairnq_tasks"}, bulkCopyColumns, pgx.CopyFromRows(rows))
		if err == nil && n != int64(size) {
			err = fmt.Errorf("COPY wrote %d of %d rows", n, size)
		}
		return err
	}, nil
}

// bulkCopyInTx copies rows as SubmitMany does: in a transaction, after
// reading the clock.
func bulkCopyInTx(ctx context.Context, pool *pgxpool.Pool, rows [][]any) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var now int64
		if err := tx.QueryRow(ctx, protocol.Statements(protocol.Postgres).Get("clock_ms").SQL).Scan(&now); err != nil {
			return err
		}
		n, err := tx.CopyFrom(ctx, pgx.Identifier{"cairnq_tasks"}, bulkCopyColumns, pgx.CopyFromRows(rows))
		if err == nil && n != int64(len(rows)) {
			err = fmt.Errorf("COPY wrote %d of %d rows", n, len(rows))
		}
		return err
	})
}

// bulkInsertManyArgs are insert_many's arguments for size no-op tasks,
// text[] literals as the store binds them.
func bulkInsertManyArgs(size int) protocol.Args {
	ids := make([]string, size)
	for i := range ids {
		ids[i] = cairnq.NewTaskID()
	}
	same := func(v string) string {
		return pgTextArray(slices.Repeat([]string{v}, size))
	}
	return protocol.Args{
		"each_id": pgTextArray(ids), "each_name": same(noopName), "each_queue": same("default"),
		"each_payload": same("{}"), "each_metadata": same("{}"), "each_max_attempts": same("3"),
		"each_priority": same("0"), "each_delay_ms": same("0"), "each_parent_id": pgNullArray(size),
		"each_root_id": pgTextArray(ids), "each_correlation_id": pgNullArray(size),
	}
}

// benchBulk runs every system at every batch size, alternating: within a
// run the systems go in --bulk-systems order on odd runs and in reverse
// on even ones. It prints each measurement, a table of medians per batch
// size, and issue 30's ratio lines (medians over medians).
func benchBulk(ctx context.Context, cfg *config, rep *report) {
	var results []bulkResult
	for run := 1; run <= cfg.runs && ctx.Err() == nil; run++ {
		for _, batch := range cfg.bulkBatches {
			order := slices.Clone(cfg.bulkSystems)
			if run%2 == 0 {
				slices.Reverse(order)
			}
			for _, sys := range order {
				r, err := bulkRun(ctx, cfg, sys, batch, run)
				if err != nil {
					rep.fail(fmt.Sprintf("bulk run %d batch %d %s", run, batch, sys), err)
					continue
				}
				results = append(results, r)
				fmt.Printf("  bulk run %d batch %5d %-44s %8.0f tasks/s  (%d in %v; CPU µs/task client %.1f server %.1f)\n",
					run, batch, bulkLabel(sys), r.rate(), r.n, r.elapsed.Round(time.Millisecond),
					perTaskMicros(r.cliCPU, r.n), perTaskMicros(r.sCPU, r.n))
			}
		}
	}
	if len(results) == 0 {
		return
	}
	for _, batch := range cfg.bulkBatches {
		fmt.Printf("\n== Bulk submit: %d no-op tasks in batches of %d, %d goroutine(s) (tasks/s; CPU µs per task) ==\n",
			cfg.bulkN, batch, cfg.bulkGoroutines)
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "system\truns\tmedian\tclient CPU\tserver CPU\t")
		med := map[string]float64{}
		for _, sys := range cfg.bulkSystems {
			var rates, cli, srv []float64
			for _, r := range results {
				if r.system == sys && r.batch == batch {
					rates = append(rates, r.rate())
					cli = append(cli, perTaskMicros(r.cliCPU, r.n))
					srv = append(srv, perTaskMicros(r.sCPU, r.n))
				}
			}
			if len(rates) == 0 {
				continue
			}
			med[sys] = median(rates)
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\t%.1f\t\n", bulkLabel(sys), joinRates(rates), med[sys], median(cli), median(srv))
		}
		tw.Flush()
		if med[bulkCairnq] > 0 && med[bulkRiver] > 0 {
			fmt.Printf("SubmitMany/River InsertMany = %.2fx\n", med[bulkCairnq]/med[bulkRiver])
		}
		if med[bulkCairnq] > 0 && med[bulkCopy] > 0 {
			fmt.Printf("SubmitMany/COPY floor = %.2fx\n", med[bulkCairnq]/med[bulkCopy])
		}
	}
	fmt.Println()
}

func perTaskMicros(d time.Duration, n int) float64 {
	if d <= 0 || n == 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(n)
}
