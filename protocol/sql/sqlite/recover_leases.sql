-- Settle every running task whose lease has expired, in the claim transaction
-- just before claiming: cancel requested -> canceled; attempts left -> queued
-- now with worker and progress cleared; else failed with :lease_expired_error.
UPDATE cairnq_tasks
SET status = CASE
        WHEN cancel_requested_at_ms IS NOT NULL THEN 'canceled'
        WHEN attempt < max_attempts THEN 'queued'
        ELSE 'failed'
    END,
    worker_id = CASE
        WHEN cancel_requested_at_ms IS NULL AND attempt < max_attempts THEN NULL
        ELSE worker_id
    END,
    lease_until_ms = NULL,
    run_at_ms = CASE
        WHEN cancel_requested_at_ms IS NULL AND attempt < max_attempts THEN :now_ms
        ELSE run_at_ms
    END,
    error = CASE
        WHEN cancel_requested_at_ms IS NULL AND attempt >= max_attempts THEN :lease_expired_error
        ELSE error
    END,
    completed_at_ms = CASE
        WHEN cancel_requested_at_ms IS NULL AND attempt < max_attempts THEN completed_at_ms
        ELSE :now_ms
    END,
    progress = CASE
        WHEN cancel_requested_at_ms IS NULL AND attempt < max_attempts THEN NULL
        ELSE progress
    END,
    message = CASE
        WHEN cancel_requested_at_ms IS NULL AND attempt < max_attempts THEN NULL
        ELSE message
    END,
    updated_at_ms = :now_ms
-- These two predicates repeat cairnq_tasks_lease_idx's WHERE so SQLite can use it.
WHERE status = 'running'
  AND lease_until_ms IS NOT NULL
  AND lease_until_ms <= :now_ms
RETURNING *;
