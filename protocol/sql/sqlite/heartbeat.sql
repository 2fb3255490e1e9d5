-- Renew the lease of a task the caller still owns. No row means the lease was
-- lost. The whole row comes back so a pending cancel is seen.
UPDATE cairnq_tasks
SET lease_until_ms = :lease_until_ms,
    updated_at_ms  = :now_ms
WHERE id = :id
  AND status = 'running'
  AND worker_id = :worker_id
  AND lease_until_ms > :now_ms
RETURNING *;
