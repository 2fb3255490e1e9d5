-- Running tasks whose lease ran out and that no claim has recovered yet
-- (recover_leases runs only inside a claim, so these mean no worker has
-- claimed on this database since), longest expired first, at most :limit.
-- A read for operators; it changes nothing and locks nothing.
SELECT *
FROM cairnq_tasks
WHERE status = 'running'
  AND lease_until_ms IS NOT NULL
  AND lease_until_ms <= (SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint))
ORDER BY lease_until_ms ASC, id ASC
LIMIT :limit;
