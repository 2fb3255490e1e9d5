-- The due tasks named :name in :queues (text[]) that a global limit per
-- tenant may claim: in claim order, leaving out the tenants in :full
-- (text[]: the values of the metadata member :tenant_key already at
-- their limit), at most :limit of them, locked (SKIP LOCKED: another
-- claim's rows are left to it). The caller keeps those its tenants have
-- room for and claims them by id (claim_ids.sql) in the same
-- transaction, under the name's lock.
SELECT id, coalesce(metadata ->> CAST(:tenant_key AS text), '') AS tenant
FROM cairnq_tasks
WHERE status = 'queued'
  AND queue = ANY (:queues::text[])
  AND name = :name
  AND run_at_ms <= CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)
  AND coalesce(metadata ->> CAST(:tenant_key AS text), '') <> ALL (:full::text[])
ORDER BY priority DESC, run_at_ms ASC, id ASC
LIMIT :limit
FOR UPDATE SKIP LOCKED;
