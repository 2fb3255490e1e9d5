-- purge.sql for the SDK's retention and Client.Purge (ours, beside the
-- protocol's): the same deletes, but it keeps every task of a workflow
-- whose record has not ended (root_id is the record, queued or running
-- under the workflows' name), so that a step still running reads the
-- results of the steps it waited for, and the ledger never loses a step.
-- The protocol's purge.sql knows nothing of workflows. Unlike Postgres's
-- purge_from.sql it reads no floor: SQLite deletes index entries with
-- their rows, so a scan from the oldest meets none of the rows already
-- deleted. The terminal-status list must stay literally the predicate of
-- cairnq_tasks_queue_completed_idx.
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
      AND NOT coalesce((
          SELECT wf.status IN ('queued', 'running')
          FROM cairnq_tasks AS wf
          WHERE wf.id = cairnq_tasks.root_id
            AND wf.name = 'cairnq.workflow'), 0)
    ORDER BY completed_at_ms ASC
    LIMIT :limit
)
RETURNING id;
