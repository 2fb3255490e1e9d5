-- Put a failed or canceled task back in the queue, due now, with every trace
-- of the last attempt cleared. :reset_attempt (boolean) also zeroes the counter.
UPDATE cairnq_tasks
SET status                 = 'queued',
    error                  = NULL,
    worker_id              = NULL,
    lease_until_ms         = NULL,
    run_at_ms              = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint),
    cancel_requested_at_ms = NULL,
    completed_at_ms        = NULL,
    progress               = NULL,
    message                = NULL,
    attempt                = CASE WHEN :reset_attempt THEN 0 ELSE attempt END,
    updated_at_ms          = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
WHERE id = :id
  AND status IN ('failed', 'canceled')
RETURNING *;
