-- Per task name, the tasks that failed for good (status failed) within the
-- last :older_than_ms on the database clock (the same parameter as purge's:
-- here the failures no older than it). Most failures first.
SELECT name,
       count(*) AS count,
       max(completed_at_ms) AS last_failed_at_ms
FROM cairnq_tasks
WHERE status = 'failed'
  AND completed_at_ms IS NOT NULL
  AND completed_at_ms >= CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint) - :older_than_ms
GROUP BY name
ORDER BY count DESC, name ASC;
