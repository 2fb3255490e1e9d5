-- The tasks named :name that run under a lease not yet run out, counted
-- per value of the metadata member :tenant_key (text, or NULL to count
-- them all as one tenant, ''). A global limit reads this under the
-- name's lock (lock_key.sql, key 'cairnq:limit:' and the name), in a
-- statement of its own, so that its snapshot sees every claim committed
-- by the lock's earlier holders. The status and lease conditions are
-- cairnq_tasks_lease_idx's own, so the scan reads the leased rows only,
-- never the queue or the history; an expired lease stops counting at
-- once.
SELECT coalesce(metadata ->> CAST(:tenant_key AS text), '') AS tenant, count(*) AS running
FROM cairnq_tasks
WHERE status = 'running'
  AND lease_until_ms IS NOT NULL
  AND lease_until_ms > CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)
  AND name = :name
GROUP BY 1;
