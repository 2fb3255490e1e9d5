-- claim.sql for a worker that knows where its queue's front stands: of
-- the tasks its last draw took at the highest priority it took,
-- :priority, the first in claim order had due time :floor_ms and id
-- :floor_id. The draw keeps claim.sql's order, read in three legs: higher
-- priorities, this priority from (:floor_ms, :floor_id) on, lower
-- priorities. (A bulk submit gives thousands of tasks one due time, so
-- the id is part of the floor.) What it passes over is this priority's
-- index entries before the floor: the tasks claimed already. Vacuum
-- removes those, but not while a snapshot older than them lives (a long
-- transaction, a replica's hot_standby_feedback), and then a scan from
-- the start of the queue visits every one, so that the claim's cost grows
-- with everything claimed since the snapshot began (docs/benchmarks.md,
-- "Sustained load"). A task committed behind the floor (a long
-- transaction's submit, a run_at moved back) waits for the worker's next
-- full claim (internal/engine/claim_front.go says when).
-- status is compared with a subquery so that the planner reads the claim
-- index in order whatever the statistics count (package protocol,
-- "Claims on Postgres").
-- Postgres refuses FOR UPDATE beside UNION, so each leg is a CTE; a leg
-- runs only when the legs before it came up short of :limit.
WITH higher AS (
    SELECT id
    FROM cairnq_tasks
    WHERE status = (SELECT 'queued'::text)
      AND queue = ANY (:queues::text[])
      AND (:names::text[] IS NULL OR name = ANY (:names::text[]))
      AND priority > :priority::integer
      AND run_at_ms <= CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)
    ORDER BY priority DESC, run_at_ms ASC, id ASC
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
), level AS (
    SELECT id
    FROM cairnq_tasks
    WHERE status = (SELECT 'queued'::text)
      AND queue = ANY (:queues::text[])
      AND (:names::text[] IS NULL OR name = ANY (:names::text[]))
      AND priority = :priority::integer
      AND (run_at_ms, id) >= (:floor_ms::bigint, :floor_id::text)
      AND run_at_ms <= CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)
    ORDER BY priority DESC, run_at_ms ASC, id ASC
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
), lower AS (
    SELECT id
    FROM cairnq_tasks
    WHERE status = (SELECT 'queued'::text)
      AND queue = ANY (:queues::text[])
      AND (:names::text[] IS NULL OR name = ANY (:names::text[]))
      AND priority < :priority::integer
      AND run_at_ms <= CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)
    ORDER BY priority DESC, run_at_ms ASC, id ASC
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE cairnq_tasks AS task
SET status         = 'running',
    worker_id      = :worker_id,
    lease_until_ms = CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint) + :lease_ms,
    attempt        = attempt + 1,
    updated_at_ms  = CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)
WHERE task.id = ANY (ARRAY(
    SELECT legs.id
    FROM (
        SELECT id FROM higher
        UNION ALL
        SELECT id FROM level
        UNION ALL
        SELECT id FROM lower
    ) AS legs
    LIMIT :limit
))
RETURNING task.*;
