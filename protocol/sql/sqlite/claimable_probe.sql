-- Read-only pre-check so an idle worker never takes the write lock: is a task
-- this worker could claim due (has_work), and has any lease expired
-- (has_expired, which alone makes the claim run lease recovery first)? The
-- lease arm ignores queues and names on purpose; recovery is every worker's
-- job. Two separate EXISTS rather than one with an OR, so each arm reaches its
-- own index (claim order for the queued arm, the partial lease index for the
-- other); the single-OR form scans the table, a cost that grows with the
-- backlog.
SELECT probe.claimable OR probe.expired AS has_work, probe.expired AS has_expired
FROM (
    SELECT
        EXISTS (
            SELECT 1
            FROM cairnq_tasks
            WHERE status = 'queued'
              AND queue IN (SELECT value FROM json_each(:queues))
              AND (:names IS NULL OR name IN (SELECT value FROM json_each(:names)))
              AND run_at_ms <= :now_ms
        ) AS claimable,
        EXISTS (
            SELECT 1
            FROM cairnq_tasks
            WHERE status = 'running'
              AND lease_until_ms IS NOT NULL
              AND lease_until_ms <= :now_ms
        ) AS expired
) AS probe;
