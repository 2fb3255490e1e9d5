-- purge.sql from a floor, for the retention sweep (ours, beside the
-- protocol's; Postgres only): only tasks finished at :from_ms or later,
-- so that a sweep starts where its last batch ended, and each deleted
-- row's completed_at_ms comes back to say how far it got. The entries
-- before the floor are of tasks deleted already, which vacuum cannot
-- remove while a snapshot older than them lives, and a scan from the
-- oldest visits every one: batch after batch, sweep after sweep
-- (docs/benchmarks.md, "Sustained load").
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
    ORDER BY completed_at_ms ASC
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
RETURNING id, completed_at_ms;
