-- A queued task is canceled outright; a running one only gets the request
-- stamped, and its worker stops cooperatively. Terminal tasks match no row.
-- Time is the database clock.
UPDATE cairnq_tasks
SET status                 = CASE WHEN status = 'queued' THEN 'canceled' ELSE status END,
    cancel_requested_at_ms = CASE WHEN status = 'running' THEN CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint) ELSE cancel_requested_at_ms END,
    completed_at_ms        = CASE WHEN status = 'queued' THEN CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint) ELSE completed_at_ms END,
    updated_at_ms          = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
WHERE id = :id
  AND status IN ('queued', 'running')
RETURNING *;
