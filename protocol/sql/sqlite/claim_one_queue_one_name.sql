-- claim for one queue and one task name, both as equalities, so the draw is
-- a bounded seek on cairnq_tasks_claim_name_idx. Otherwise identical to claim.sql.
UPDATE cairnq_tasks
SET status         = 'running',
    worker_id      = :worker_id,
    lease_until_ms = :lease_until_ms,
    attempt        = attempt + 1,
    updated_at_ms  = :now_ms
WHERE id IN (
    SELECT id
    FROM cairnq_tasks
    WHERE status = 'queued'
      AND queue = :queue
      AND name = :name
      AND run_at_ms <= :now_ms
    ORDER BY priority DESC, run_at_ms ASC, id ASC
    -- ":limit + 0", not ":limit": SQLite reads a bare bound LIMIT while
    -- planning and then recompiles the statement whenever the value
    -- changes, which for a worker's claims (sized by its free slots) is
    -- most of them. The sum is evaluated when the statement runs.
    LIMIT :limit + 0
)
RETURNING *;
