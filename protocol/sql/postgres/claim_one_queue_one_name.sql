-- claim for one queue and one task name, both as equalities, so the draw is
-- a bounded scan of cairnq_tasks_claim_name_idx. Otherwise identical to claim.sql.
UPDATE cairnq_tasks AS task
SET status         = 'running',
    worker_id      = :worker_id,
    lease_until_ms = CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint) + :lease_ms,
    attempt        = attempt + 1,
    updated_at_ms  = CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)
FROM (
    SELECT id
    FROM cairnq_tasks
    WHERE status = 'queued'
      AND queue = :queue
      AND name = :name
      AND run_at_ms <= CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)
    ORDER BY priority DESC, run_at_ms ASC, id ASC
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
) AS pick
WHERE task.id = pick.id
RETURNING task.*;
