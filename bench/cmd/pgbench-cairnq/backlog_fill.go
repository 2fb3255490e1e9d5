package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The backlog benchmark's fills: set-based INSERT ... SELECT over
// generate_series, writing the rows the systems' own calls would have
// written (TestBacklogRowsMatchTheSystems compares them with rows a
// Submit and a worker wrote, column by column). Queued rows are the
// newest, one per millisecond up to now; finished rows are older still,
// each completed 20ms after it was created.

// fillChunk bounds the rows of one INSERT statement, each in a
// transaction of its own, as a system that wrote them over time would have
// had them committed.
const fillChunk = 1_000_000

// backlogFinishedWorker is the worker id the finished rows carry.
const backlogFinishedWorker = "bench-backlog-worker"

// crockford is the Crockford base32 alphabet of ULIDs.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// ulidSQL is a SQL expression for a task id, "task_" and a 26-character
// ULID: 10 characters of the millisecond time msExpr, then 16 of the
// 80-bit randomness, here 40 random bits followed by the 40-bit sequence
// number seqExpr, so that ids are unique and, within a millisecond, in
// sequence order.
func ulidSQL(msExpr, seqExpr string) string {
	var b strings.Builder
	b.WriteString("'task_'")
	digit := func(expr string, shift int) {
		fmt.Fprintf(&b, " || substr('%s', (((%s) >> %d) & 31)::int + 1, 1)", crockford, expr, shift)
	}
	for k := 9; k >= 0; k-- {
		digit(msExpr, 5*k)
	}
	for k := 7; k >= 0; k-- {
		digit("rnd", 5*k)
	}
	for k := 7; k >= 0; k-- {
		digit(seqExpr, 5*k)
	}
	return b.String()
}

// cairnqFillSQL inserts the rows g = $1 .. $2 - 1 of a backlog whose
// queued part starts at g = $3: rows below it are finished (succeeded
// with no result, as a no-op handler's completion leaves them), the rest
// queued. $4 is the time of g = 0 in epoch ms; row g was created g ms
// later.
func cairnqFillSQL() string {
	return `INSERT INTO cairnq_tasks (
    id, name, queue, status, payload, result, error, metadata, progress, message,
    attempt, max_attempts, priority, worker_id, lease_until_ms, run_at_ms,
    cancel_requested_at_ms, parent_id, root_id, correlation_id,
    created_at_ms, updated_at_ms, completed_at_ms)
SELECT id, '` + noopName + `', 'default',
       CASE WHEN fin THEN 'succeeded' ELSE 'queued' END,
       '{}'::jsonb, NULL, NULL, '{}'::jsonb,
       CASE WHEN fin THEN 1.0 END, NULL,
       CASE WHEN fin THEN 1 ELSE 0 END, 3, 0,
       CASE WHEN fin THEN '` + backlogFinishedWorker + `' END, NULL, ms,
       NULL, NULL, id, NULL,
       ms, CASE WHEN fin THEN ms + 20 ELSE ms END, CASE WHEN fin THEN ms + 20 END
FROM (
    SELECT ` + ulidSQL("ms", "g") + ` AS id, ms, fin
    FROM (
        SELECT g, $4::bigint + g AS ms, g < $3 AS fin, (random() * 1099511627775)::bigint AS rnd
        FROM generate_series($1::bigint, $2::bigint - 1) AS g
    ) AS s
) AS r`
}

// riverFillSQL is cairnqFillSQL for River's river_job: available jobs at
// priority 2 (one below the trickle's, see backlog.go) and, below $3,
// jobs completed on their first attempt, as River's completer leaves a
// no-op job. $4 is the time of g = 0 (timestamptz).
func riverFillSQL() string {
	return `INSERT INTO river_job (
    args, attempt, attempted_at, attempted_by, created_at, errors, finalized_at,
    kind, max_attempts, metadata, priority, queue, state, scheduled_at, tags,
    unique_key, unique_states)
SELECT '{}'::jsonb,
       CASE WHEN fin THEN 1 ELSE 0 END,
       CASE WHEN fin THEN at + interval '5 ms' END,
       CASE WHEN fin THEN ARRAY['` + backlogFinishedWorker + `'] END,
       at, NULL,
       CASE WHEN fin THEN at + interval '20 ms' END,
       '` + noopName + `', 25, '{}'::jsonb, 2, 'default',
       CASE WHEN fin THEN 'completed' ELSE 'available' END::river_job_state,
       at, '{}'::varchar(255)[], NULL, NULL
FROM (
    SELECT $4::timestamptz + g * interval '1 ms' AS at, g < $3 AS fin
    FROM generate_series($1::bigint, $2::bigint - 1) AS g
) AS s`
}

// fillBacklog writes finished + queued rows with fillSQL in chunks, then
// vacuums and analyzes table as autovacuum would have after that many
// inserts, and checkpoints, so that the copies start clean.
func fillBacklog(ctx context.Context, dsn, fillSQL, table string, start any, finished, queued int) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	total := finished + queued
	for lo := 0; lo < total; lo += fillChunk {
		hi := min(lo+fillChunk, total)
		if _, err := conn.Exec(ctx, fillSQL, lo, hi, finished, start); err != nil {
			return fmt.Errorf("fill %s rows %d-%d: %w", table, lo, hi, err)
		}
	}
	if _, err := conn.Exec(ctx, "VACUUM (ANALYZE) "+table); err != nil {
		return fmt.Errorf("vacuum %s: %w", table, err)
	}
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}
