-- Serves purge filtered by status: a range seek already in completion order.
CREATE INDEX IF NOT EXISTS cairnq_tasks_status_completed_idx ON cairnq_tasks (status, completed_at_ms);

UPDATE cairnq_meta SET value = '7' WHERE key = 'schema_version';
