-- The records of workflows due for a sweep: queued in the workflows'
-- queue under their own name, due by now, the longest due first, at most
-- :limit of them. Only a read: a sweep then claims each by id under its
-- workflow's lock (claim_ids.sql), where one another sweep took meanwhile
-- is no longer queued. Records keep priority 0, so the scan follows
-- cairnq_tasks_claim_name_idx in its order.
SELECT id
FROM cairnq_tasks
WHERE queue = :name
  AND status = 'queued'
  AND name = :name
  AND priority = 0
  AND run_at_ms <= CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)
ORDER BY run_at_ms, id
LIMIT :limit;
