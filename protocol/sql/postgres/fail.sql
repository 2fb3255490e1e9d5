-- Record a failed attempt on a task the caller still owns. Outcomes, in order:
-- cancel requested -> canceled; :retryable (boolean) with attempts left ->
-- queued again at now + :delay_ms with worker and progress cleared; else
-- failed. :error (jsonb) is kept on every outcome, and the lease always ends.
-- The ownership check sits in IS TRUE so that the row is found by its
-- key (package protocol, "Ownership checks on Postgres").
UPDATE cairnq_tasks
SET status = CASE
        WHEN cancel_requested_at_ms IS NOT NULL THEN 'canceled'
        WHEN :retryable AND attempt < max_attempts THEN 'queued'
        ELSE 'failed'
    END,
    error = :error::jsonb,
    worker_id = CASE
        WHEN cancel_requested_at_ms IS NULL AND :retryable AND attempt < max_attempts THEN NULL
        ELSE worker_id
    END,
    lease_until_ms = NULL,
    run_at_ms = CASE
        WHEN cancel_requested_at_ms IS NULL AND :retryable AND attempt < max_attempts THEN CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint) + :delay_ms
        ELSE run_at_ms
    END,
    completed_at_ms = CASE
        WHEN cancel_requested_at_ms IS NULL AND :retryable AND attempt < max_attempts THEN NULL
        ELSE CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
    END,
    progress = CASE
        WHEN cancel_requested_at_ms IS NULL AND :retryable AND attempt < max_attempts THEN NULL
        ELSE progress
    END,
    message = CASE
        WHEN cancel_requested_at_ms IS NULL AND :retryable AND attempt < max_attempts THEN NULL
        ELSE message
    END,
    updated_at_ms = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
WHERE id = :id
  AND (status = 'running'
       AND worker_id = :worker_id
       AND lease_until_ms > CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)) IS TRUE
RETURNING *;
