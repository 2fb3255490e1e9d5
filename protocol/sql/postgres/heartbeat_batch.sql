-- Renew several leases in one write. Ownership is checked per row: an id that
-- does not come back is a lost lease. Only id and the cancel stamp return, so a
-- beat never re-reads payloads.
-- The ownership check sits in IS TRUE so that the rows are found by their
-- keys (package protocol, "Ownership checks on Postgres").
UPDATE cairnq_tasks
SET lease_until_ms = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint) + :lease_ms,
    updated_at_ms  = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
WHERE id = ANY (:ids::text[])
  AND (status = 'running'
       AND worker_id = :worker_id
       AND lease_until_ms > CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)) IS TRUE
RETURNING id, cancel_requested_at_ms;
