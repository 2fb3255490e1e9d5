-- claimable_probe.sql for a worker that knows where its queue's front
-- stands (claim_window.sql says why): has_work looks at higher
-- priorities, then :priority from (:floor_ms, :floor_id) on, then lower
-- priorities, stopping at the first that has a due task. Like
-- claim_window.sql, it compares status with a subquery.
SELECT probe.claimable OR probe.expired AS has_work, probe.expired AS has_expired
FROM (
    SELECT
        -- Each leg takes the first task in claim order, not any: for an
        -- EXISTS, a scan of the table that expects a match soon costs least.
        (
            SELECT 1
            FROM cairnq_tasks
            WHERE status = (SELECT 'queued'::text)
              AND queue = ANY (:queues::text[])
              AND (:names::text[] IS NULL OR name = ANY (:names::text[]))
              AND priority > :priority::integer
              AND run_at_ms <= (SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint))
            ORDER BY priority DESC, run_at_ms ASC, id ASC
            LIMIT 1
        ) IS NOT NULL
        OR (
            SELECT 1
            FROM cairnq_tasks
            WHERE status = (SELECT 'queued'::text)
              AND queue = ANY (:queues::text[])
              AND (:names::text[] IS NULL OR name = ANY (:names::text[]))
              AND priority = :priority::integer
              AND (run_at_ms, id) >= (:floor_ms::bigint, :floor_id::text)
              AND run_at_ms <= (SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint))
            ORDER BY priority DESC, run_at_ms ASC, id ASC
            LIMIT 1
        ) IS NOT NULL
        OR (
            SELECT 1
            FROM cairnq_tasks
            WHERE status = (SELECT 'queued'::text)
              AND queue = ANY (:queues::text[])
              AND (:names::text[] IS NULL OR name = ANY (:names::text[]))
              AND priority < :priority::integer
              AND run_at_ms <= (SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint))
            ORDER BY priority DESC, run_at_ms ASC, id ASC
            LIMIT 1
        ) IS NOT NULL AS claimable,
        -- look_for_expired false leaves this read out (has_expired is
        -- false): it grows under a held snapshot, so workers pace it.
        :look_for_expired::boolean AND EXISTS (
            SELECT 1
            FROM cairnq_tasks
            WHERE status = 'running'
              AND lease_until_ms IS NOT NULL
              AND lease_until_ms <= (SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint))
        ) AS expired
) AS probe;
