-- The status index is a prefix of cairnq_tasks_status_completed_idx, so no
-- query needs it, yet every status change maintains it.
DROP INDEX IF EXISTS cairnq_tasks_status_idx;

UPDATE cairnq_meta SET value = '10' WHERE key = 'schema_version';
