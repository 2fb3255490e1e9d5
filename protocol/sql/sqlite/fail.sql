-- Record a failed attempt on a task the caller still owns. Outcomes, in order:
-- cancel requested -> canceled; :retryable (0/1) with attempts left -> queued
-- again at now + :delay_ms with worker and progress cleared; else failed.
-- :error (JSON) is kept on every outcome, and the lease always ends.
UPDATE cairnq_tasks
SET status = CASE
        WHEN cancel_requested_at_ms IS NOT NULL THEN 'canceled'
        WHEN :retryable = 1 AND attempt < max_attempts THEN 'queued'
        ELSE 'failed'
    END,
    error = :error,
    worker_id = CASE
        WHEN cancel_requested_at_ms IS NULL AND :retryable = 1 AND attempt < max_attempts THEN NULL
        ELSE worker_id
    END,
    lease_until_ms = NULL,
    run_at_ms = CASE
        WHEN cancel_requested_at_ms IS NULL AND :retryable = 1 AND attempt < max_attempts THEN :now_ms + :delay_ms
        ELSE run_at_ms
    END,
    completed_at_ms = CASE
        WHEN cancel_requested_at_ms IS NULL AND :retryable = 1 AND attempt < max_attempts THEN NULL
        ELSE :now_ms
    END,
    progress = CASE
        WHEN cancel_requested_at_ms IS NULL AND :retryable = 1 AND attempt < max_attempts THEN NULL
        ELSE progress
    END,
    message = CASE
        WHEN cancel_requested_at_ms IS NULL AND :retryable = 1 AND attempt < max_attempts THEN NULL
        ELSE message
    END,
    updated_at_ms = :now_ms
WHERE id = :id
  AND status = 'running'
  AND worker_id = :worker_id
  AND lease_until_ms > :now_ms
RETURNING *;
