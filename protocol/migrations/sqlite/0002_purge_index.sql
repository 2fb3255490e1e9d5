-- Lets purge walk terminal tasks in completion order instead of scanning.
CREATE INDEX IF NOT EXISTS cairnq_tasks_completed_idx ON cairnq_tasks (completed_at_ms);

UPDATE cairnq_meta SET value = '2' WHERE key = 'schema_version';
