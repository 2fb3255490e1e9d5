-- Delete at most :limit terminal tasks finished before :before_ms, oldest
-- first; key rows cascade away. The limit sits in a subquery because SQLite
-- builds usually lack DELETE ... LIMIT. The terminal-status list must stay
-- literally the predicate of cairnq_tasks_queue_completed_idx.
DELETE FROM cairnq_tasks
WHERE id IN (
    SELECT id
    FROM cairnq_tasks
    WHERE status IN ('succeeded', 'failed', 'canceled')
      AND (:queue IS NULL OR queue = :queue)
      AND (:status IS NULL OR status = :status)
      AND (:name IS NULL OR name = :name)
      AND completed_at_ms IS NOT NULL
      AND completed_at_ms < :before_ms
    ORDER BY completed_at_ms ASC
    LIMIT :limit
)
RETURNING id;
