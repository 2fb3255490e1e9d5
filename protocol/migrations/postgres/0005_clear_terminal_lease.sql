-- Establish "a lease exists only while running" for rows written before the
-- statements began clearing it on every exit from running.
UPDATE cairnq_tasks
SET lease_until_ms = NULL
WHERE status <> 'running' AND lease_until_ms IS NOT NULL;

UPDATE cairnq_meta SET value = '5' WHERE key = 'schema_version';
