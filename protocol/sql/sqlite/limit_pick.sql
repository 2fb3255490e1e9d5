-- The due tasks named :name in the :queues JSON array that a global limit
-- per tenant may claim: in claim order, leaving out the tenants in :full
-- (a JSON array of the values of the metadata member :tenant_key already
-- at their limit), at most :limit of them. The caller keeps those its
-- tenants have room for and claims them by id (claim_ids.sql) inside the
-- same BEGIN IMMEDIATE.
SELECT id, coalesce(CAST(metadata ->> :tenant_key AS TEXT), '') AS tenant
FROM cairnq_tasks
WHERE status = 'queued'
  AND queue IN (SELECT value FROM json_each(:queues))
  AND name = :name
  AND run_at_ms <= :now_ms
  AND coalesce(CAST(metadata ->> :tenant_key AS TEXT), '') NOT IN (SELECT value FROM json_each(:full))
ORDER BY priority DESC, run_at_ms ASC, id ASC
LIMIT :limit + 0;
