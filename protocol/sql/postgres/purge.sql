-- Delete at most :limit terminal tasks finished more than :older_than_ms ago,
-- oldest first; key rows cascade away. The row locks are for correctness: they
-- keep a concurrently retried task from being deleted on a stale snapshot.
-- The terminal-status list must stay the predicate of
-- cairnq_tasks_queue_completed_idx.
DELETE FROM cairnq_tasks
WHERE id IN (
    SELECT id
    FROM cairnq_tasks
    WHERE status IN ('succeeded', 'failed', 'canceled')
      AND (:queue::text IS NULL OR queue = :queue)
      AND (:status::text IS NULL OR status = :status)
      AND (:name::text IS NULL OR name = :name)
      AND completed_at_ms IS NOT NULL
      AND completed_at_ms < CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint) - :older_than_ms
    ORDER BY completed_at_ms ASC
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
RETURNING id;
