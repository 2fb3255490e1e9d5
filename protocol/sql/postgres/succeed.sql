-- Mark a task the caller still owns succeeded, whatever cancel says (complete
-- is the cancel-aware form). worker_id stays as the audit trail; the lease ends.
-- The ownership check sits in IS TRUE so that the row is found by its
-- key (package protocol, "Ownership checks on Postgres").
UPDATE cairnq_tasks
SET status          = 'succeeded',
    result          = :result::jsonb,
    progress        = 1.0,
    message         = coalesce(:message, message),
    lease_until_ms  = NULL,
    completed_at_ms = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint),
    updated_at_ms   = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
WHERE id = :id
  AND (status = 'running'
       AND worker_id = :worker_id
       AND lease_until_ms > CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)) IS TRUE
RETURNING *;
