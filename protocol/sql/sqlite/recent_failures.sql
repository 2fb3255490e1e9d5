-- Per task name, the tasks that failed for good (status failed) within the
-- window: completed at or after :before_ms, which the SDK computes as its
-- clock minus the window (:older_than_ms, as in purge: here the failures no
-- older than it). Most failures first.
SELECT name,
       count(*) AS count,
       max(completed_at_ms) AS last_failed_at_ms
FROM cairnq_tasks
WHERE status = 'failed'
  AND completed_at_ms IS NOT NULL
  AND completed_at_ms >= :before_ms
GROUP BY name
ORDER BY count DESC, name ASC;
