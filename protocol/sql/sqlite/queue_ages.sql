-- Per queue, the queued tasks that are due (run_at_ms has come) and how long
-- the longest-waiting of them has been claimable. Delayed tasks not yet due
-- are left out: they are not waiting on a worker.
SELECT queue,
       count(*) AS due,
       min(run_at_ms) AS oldest_run_at_ms,
       :now_ms - min(run_at_ms) AS oldest_age_ms
FROM cairnq_tasks
WHERE status = 'queued'
  AND run_at_ms <= :now_ms
GROUP BY queue
ORDER BY queue ASC;
