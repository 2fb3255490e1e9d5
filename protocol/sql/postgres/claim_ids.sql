-- Lease to :worker_id, for :lease_ms, each task among :ids (text[]) that is
-- queued, whatever its queue, name or due time, setting what claim.sql
-- sets. A workflow's advance claims its record this way before settling it
-- with complete.sql or fail.sql, so that the record, like every task, goes
-- from queued through running to its end. SKIP LOCKED: a record another
-- advance holds is left to it. Ordered by id so two such claims lock in
-- one order.
UPDATE cairnq_tasks AS task
SET status         = 'running',
    worker_id      = :worker_id,
    lease_until_ms = CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint) + :lease_ms,
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
