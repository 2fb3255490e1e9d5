-- Lease up to :limit due tasks from the :queues JSON array. :names is a JSON
-- array of runnable task names, or NULL to take any name. Either may be
-- One(v): specialized, its filter is then an equality, which lets one queue
-- walk cairnq_tasks_claim_idx in claim order instead of sorting, and one
-- name seek cairnq_tasks_claim_name_idx. The caller runs this under BEGIN
-- IMMEDIATE, which is what makes the pick-and-update atomic.
-- Order: priority, then due time, then id, so ties resolve deterministically.
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
      AND queue IN (SELECT value FROM json_each(:queues))
      AND (:names IS NULL OR name IN (SELECT value FROM json_each(:names)))
      AND run_at_ms <= :now_ms
    ORDER BY priority DESC, run_at_ms ASC, id ASC
    -- ":limit + 0", not ":limit": SQLite reads a bare bound LIMIT while
    -- planning and then recompiles the statement whenever the value
    -- changes, which for a worker's claims (sized by its free slots) is
    -- most of them. The sum is evaluated when the statement runs.
    LIMIT :limit + 0
)
RETURNING *;
