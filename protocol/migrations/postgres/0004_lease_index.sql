-- Expired-lease lookup for recover_leases, which runs on every claim. Partial,
-- so it only ever holds running rows. Not CONCURRENTLY: migrations run inside
-- a transaction.
CREATE INDEX IF NOT EXISTS cairnq_tasks_lease_idx ON cairnq_tasks (lease_until_ms)
    WHERE status = 'running' AND lease_until_ms IS NOT NULL;

-- 0003 predates recording its ordinal, hence the jump from 2.
UPDATE cairnq_meta SET value = '4' WHERE key = 'schema_version';
