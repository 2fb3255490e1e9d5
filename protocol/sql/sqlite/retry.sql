-- Put a failed or canceled task back in the queue, due now, with every trace
-- of the last attempt cleared. :reset_attempt (0/1) also zeroes the counter.
UPDATE cairnq_tasks
SET status                 = 'queued',
    error                  = NULL,
    worker_id              = NULL,
    lease_until_ms         = NULL,
    run_at_ms              = :now_ms,
    cancel_requested_at_ms = NULL,
    completed_at_ms        = NULL,
    progress               = NULL,
    message                = NULL,
    attempt                = CASE WHEN :reset_attempt = 1 THEN 0 ELSE attempt END,
    updated_at_ms          = :now_ms
WHERE id = :id
  AND status IN ('failed', 'canceled')
RETURNING *;
