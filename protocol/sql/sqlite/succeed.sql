-- Mark a task the caller still owns succeeded, whatever cancel says (complete
-- is the cancel-aware form). worker_id stays as the audit trail; the lease ends.
UPDATE cairnq_tasks
SET status          = 'succeeded',
    result          = :result,
    progress        = 1.0,
    message         = coalesce(:message, message),
    lease_until_ms  = NULL,
    completed_at_ms = :now_ms,
    updated_at_ms   = :now_ms
WHERE id = :id
  AND status = 'running'
  AND worker_id = :worker_id
  AND lease_until_ms > :now_ms
RETURNING *;
