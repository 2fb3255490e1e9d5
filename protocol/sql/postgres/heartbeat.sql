-- Renew the lease of a task the caller still owns, to now + :lease_ms. No row
-- means the lease was lost. The whole row comes back so a pending cancel is seen.
-- The ownership check sits in IS TRUE so that the row is found by its
-- key (package protocol, "Ownership checks on Postgres").
UPDATE cairnq_tasks
SET lease_until_ms = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint) + :lease_ms,
    updated_at_ms  = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
WHERE id = :id
  AND (status = 'running'
       AND worker_id = :worker_id
       AND lease_until_ms > CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)) IS TRUE
RETURNING *;
