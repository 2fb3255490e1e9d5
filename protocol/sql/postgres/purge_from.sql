-- purge.sql from a floor, for the retention sweep (ours, beside the
-- protocol's; Postgres only): only tasks finished at :from_ms or later,
-- so that a sweep starts where its last batch ended, and each deleted
-- row's completed_at_ms comes back to say how far it got. The entries
-- before the floor are of tasks deleted already, which vacuum cannot
-- remove while a snapshot older than them lives, and a scan from the
-- oldest visits every one: batch after batch, sweep after sweep
-- (docs/benchmarks.md, "Sustained load"). It keeps every task of a
-- workflow whose record has not ended (root_id is the record, queued or
-- running under the workflows' name), so that a step still running reads
-- the results of the steps it waited for, and the ledger never loses a
-- step: the SDK's retention and Client.Purge run it, the protocol's
-- purge.sql knows nothing of workflows. A scalar subquery, read by id for
-- each row the scan meets: as NOT EXISTS the planner may read every live
-- task instead, to build an anti-join.
DELETE FROM cairnq_tasks
WHERE id IN (
    SELECT id
    FROM cairnq_tasks
    WHERE status IN ('succeeded', 'failed', 'canceled')
      AND (:queue::text IS NULL OR queue = :queue)
      AND (:status::text IS NULL OR status = :status)
      AND (:name::text IS NULL OR name = :name)
      AND completed_at_ms IS NOT NULL
      AND completed_at_ms >= :from_ms::bigint
      AND completed_at_ms < CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint) - :older_than_ms
      AND NOT coalesce((
          SELECT wf.status IN ('queued', 'running')
          FROM cairnq_tasks AS wf
          WHERE wf.id = cairnq_tasks.root_id
            AND wf.name = 'cairnq.workflow'), false)
    ORDER BY completed_at_ms ASC
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
RETURNING id, completed_at_ms;
