-- A queued task is canceled outright; a running one only gets the request
-- stamped, and its worker stops cooperatively. Terminal tasks match no row.
UPDATE cairnq_tasks
SET status                 = CASE WHEN status = 'queued' THEN 'canceled' ELSE status END,
    cancel_requested_at_ms = CASE WHEN status = 'running' THEN :now_ms ELSE cancel_requested_at_ms END,
    completed_at_ms        = CASE WHEN status = 'queued' THEN :now_ms ELSE completed_at_ms END,
    updated_at_ms          = :now_ms
WHERE id = :id
  AND status IN ('queued', 'running')
RETURNING *;
