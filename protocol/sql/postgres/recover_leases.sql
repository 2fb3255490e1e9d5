-- Settle every running task whose lease has expired, in the claim transaction
-- just before claiming: cancel requested -> canceled; attempts left -> queued
-- now with worker and progress cleared; else failed with :lease_expired_error.
-- SKIP LOCKED lets recoverers pass rows another transaction holds, and keeps
-- them from deadlocking each other.
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
        WHEN cancel_requested_at_ms IS NULL AND attempt < max_attempts THEN CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)
        ELSE run_at_ms
    END,
    error = CASE
        WHEN cancel_requested_at_ms IS NULL AND attempt >= max_attempts THEN :lease_expired_error::jsonb
        ELSE error
    END,
    completed_at_ms = CASE
        WHEN cancel_requested_at_ms IS NULL AND attempt < max_attempts THEN completed_at_ms
        ELSE CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)
    END,
    progress = CASE
        WHEN cancel_requested_at_ms IS NULL AND attempt < max_attempts THEN NULL
        ELSE progress
    END,
    message = CASE
        WHEN cancel_requested_at_ms IS NULL AND attempt < max_attempts THEN NULL
        ELSE message
    END,
    updated_at_ms = CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)
WHERE id IN (
    SELECT id
    FROM cairnq_tasks
    WHERE status = 'running'
      AND lease_until_ms IS NOT NULL
      -- A scalar subquery, so the volatile clock is read once and can bound
      -- a scan of cairnq_tasks_lease_idx instead of filtering every row.
      AND lease_until_ms <= (SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint))
    FOR UPDATE SKIP LOCKED
)
RETURNING *;
