-- The tasks named :name that run under a lease not yet run out (by
-- :now_ms), counted per value of the metadata member :tenant_key (text,
-- or NULL to count them all as one tenant, ''), the value read as text
-- (->> gives a JSON number as a number). A global limit reads this
-- inside the claim's BEGIN IMMEDIATE, which already serializes it with
-- every other claim. The status and lease conditions are
-- cairnq_tasks_lease_idx's own, so the scan reads the leased rows only;
-- an expired lease stops counting at once.
SELECT coalesce(CAST(metadata ->> :tenant_key AS TEXT), '') AS tenant, count(*) AS running
FROM cairnq_tasks
WHERE status = 'running'
  AND lease_until_ms IS NOT NULL
  AND lease_until_ms > :now_ms
  AND name = :name
GROUP BY 1;
