-- Lease to :worker_id, for :lease_ms, each task among :ids (text[]) that is
-- queued, whatever its queue, name or due time, setting what claim.sql
-- sets. A workflow's advance claims its record this way before settling it
-- with complete.sql or fail.sql, so that the record, like every task, goes
-- from queued through running to its end. A task claimed before it was due
-- (a record waiting for its next sweep) becomes due now, so that it never
-- ends with a run_at_ms after its completed_at_ms: now(), the
-- transaction's start, which complete.sql and fail.sql stamp too. SKIP
-- LOCKED: a record another advance holds is left to it. Ordered by id so
-- two such claims lock in one order.
UPDATE cairnq_tasks AS task
SET status         = 'running',
    worker_id      = :worker_id,
    lease_until_ms = CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint) + :lease_ms,
    run_at_ms      = LEAST(task.run_at_ms, CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)),
    attempt        = attempt + 1,
    updated_at_ms  = CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)
FROM (
    SELECT id
    FROM cairnq_tasks
    WHERE id = ANY (:ids::text[])
      AND status = 'queued'
    ORDER BY id
    FOR UPDATE SKIP LOCKED
) AS pick
WHERE task.id = pick.id
RETURNING task.*;
