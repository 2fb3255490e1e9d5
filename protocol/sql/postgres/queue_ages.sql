-- Per queue, the queued tasks that are due (run_at_ms has come) and how long
-- the longest-waiting of them has been claimable. The clock is the
-- statement's start, one value for every row: clock_timestamp() here was
-- read again for each row whenever the plan rescanned the clock's side of
-- the join, and a millisecond passing mid-scan split a queue into two rows.
-- Delayed tasks not yet due are left out: they are not waiting on a worker.
SELECT tasks.queue,
       count(*) AS due,
       min(tasks.run_at_ms) AS oldest_run_at_ms,
       clock.now_ms - min(tasks.run_at_ms) AS oldest_age_ms
FROM cairnq_tasks AS tasks
CROSS JOIN (SELECT CAST(EXTRACT(EPOCH FROM statement_timestamp()) * 1000 AS bigint) AS now_ms) AS clock
WHERE tasks.status = 'queued'
  AND tasks.run_at_ms <= clock.now_ms
GROUP BY tasks.queue, clock.now_ms
ORDER BY tasks.queue ASC;
