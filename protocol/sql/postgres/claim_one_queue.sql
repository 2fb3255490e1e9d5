-- claim for exactly one queue: the equality on :queue lets the draw walk
-- cairnq_tasks_claim_idx in claim order instead of sorting. Otherwise
-- identical to claim.sql.
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
      AND (:names::text[] IS NULL OR name = ANY (:names::text[]))
      AND run_at_ms <= CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)
    ORDER BY priority DESC, run_at_ms ASC, id ASC
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
) AS pick
WHERE task.id = pick.id
RETURNING task.*;
