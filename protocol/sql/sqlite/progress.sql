-- Report progress on a task the caller still owns. NULL leaves a field as it
-- was, so neither value can be cleared once set.
UPDATE cairnq_tasks
SET progress      = coalesce(:progress, progress),
    message       = coalesce(:message, message),
    updated_at_ms = :now_ms
WHERE id = :id
  AND status = 'running'
  AND worker_id = :worker_id
  AND lease_until_ms > :now_ms
RETURNING *;
