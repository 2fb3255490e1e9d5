-- Finish a running task the caller still owns. A pending cancel request wins:
-- the task ends canceled and :result is dropped. Either way the lease ends.
UPDATE cairnq_tasks
SET status          = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN 'canceled' ELSE 'succeeded' END,
    result          = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN result ELSE :result END,
    progress        = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN progress ELSE 1.0 END,
    lease_until_ms  = NULL,
    completed_at_ms = :now_ms,
    updated_at_ms   = :now_ms
WHERE id = :id
  AND status = 'running'
  AND worker_id = :worker_id
  AND lease_until_ms > :now_ms
RETURNING *;
