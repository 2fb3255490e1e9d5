-- Read-only pre-check that spares an empty poll its transaction: is a task
-- this worker could claim due (has_work), and has any lease expired
-- (has_expired, which alone makes the claim run lease recovery first)? Two
-- EXISTS rather than one OR so each arm can use its own index. The clock
-- sits in a scalar subquery so it is evaluated once and can bound an index
-- scan.
SELECT probe.claimable OR probe.expired AS has_work, probe.expired AS has_expired
FROM (
    SELECT
        EXISTS (
            SELECT 1
            FROM cairnq_tasks
            WHERE status = 'queued'
              AND queue = ANY (:queues::text[])
              AND (:names::text[] IS NULL OR name = ANY (:names::text[]))
              AND run_at_ms <= (SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint))
        ) AS claimable,
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
