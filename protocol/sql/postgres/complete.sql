-- Finish a running task the caller still owns. A pending cancel request wins:
-- the task ends canceled and :result is dropped. Either way the lease ends.
-- The ownership check sits in IS TRUE so that the row is found by its
-- key (package protocol, "Ownership checks on Postgres").
UPDATE cairnq_tasks
SET status          = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN 'canceled' ELSE 'succeeded' END,
    result          = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN result ELSE :result::jsonb END,
    progress        = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN progress ELSE 1.0 END,
    lease_until_ms  = NULL,
    completed_at_ms = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint),
    updated_at_ms   = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
WHERE id = :id
  AND (status = 'running'
       AND worker_id = :worker_id
       AND lease_until_ms > CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)) IS TRUE
RETURNING *;
