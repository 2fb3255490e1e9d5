-- Our addition beside the protocol's statements (adding one moves no
-- version): settle several finished attempts in one statement, each row
-- exactly as complete.sql would, so N settlements cost one round trip and
-- one commit. :ids, :worker_ids and :results are parallel text[]; a NULL
-- result element stores no result. It returns each settled row's id and
-- the status it took; a row whose lease is gone is not returned, which is
-- how each caller learns it lost its own. Only those two columns: the
-- settling worker needs nothing else, and whole rows cost the server
-- their output and the client their decoding on every task.
--
-- The ownership check sits in IS TRUE so that each row is found by its
-- key (package protocol, "Ownership checks on Postgres"). The call's rows
-- are limited to their own count for the same reason: the planner then
-- takes them for a single row, for which a lookup by key is cheaper than
-- reading the table even while the table is new and small, so the plan a
-- connection caches in the table's first seconds still serves it grown.
UPDATE cairnq_tasks AS task
SET status          = CASE WHEN task.cancel_requested_at_ms IS NOT NULL THEN 'canceled' ELSE 'succeeded' END,
    result          = CASE WHEN task.cancel_requested_at_ms IS NOT NULL THEN task.result ELSE CAST(done.result AS jsonb) END,
    progress        = CASE WHEN task.cancel_requested_at_ms IS NOT NULL THEN task.progress ELSE 1.0 END,
    lease_until_ms  = NULL,
    completed_at_ms = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint),
    updated_at_ms   = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
FROM (SELECT *
      FROM unnest(:ids::text[], :worker_ids::text[], :results::text[]) AS each_task (id, worker_id, result)
      LIMIT cardinality(:ids::text[])) AS done
WHERE task.id = done.id
  AND (task.status = 'running'
       AND task.worker_id = done.worker_id
       AND task.lease_until_ms > CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)) IS TRUE
RETURNING task.id, task.status;
