-- Report progress on a task the caller still owns. NULL leaves a field as it
-- was, so neither value can be cleared once set.
-- The ownership check sits in IS TRUE so that the row is found by its
-- key (package protocol, "Ownership checks on Postgres").
UPDATE cairnq_tasks
SET progress      = coalesce(:progress, progress),
    message       = coalesce(:message, message),
    updated_at_ms = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
WHERE id = :id
  AND (status = 'running'
       AND worker_id = :worker_id
       AND lease_until_ms > CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)) IS TRUE
RETURNING *;
