-- Renew several leases in one write. Ownership is checked per row: an id that
-- does not come back is a lost lease. Only id and the cancel stamp return, so a
-- beat never re-reads payloads.
UPDATE cairnq_tasks
SET lease_until_ms = :lease_until_ms,
    updated_at_ms  = :now_ms
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status = 'running'
  AND worker_id = :worker_id
  AND lease_until_ms > :now_ms
RETURNING id, cancel_requested_at_ms;
