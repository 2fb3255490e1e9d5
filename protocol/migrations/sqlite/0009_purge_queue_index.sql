-- Serves purge filtered by queue. Partial on the terminal statuses, which
-- purge always states literally, so live rows never pay for it.
CREATE INDEX IF NOT EXISTS cairnq_tasks_queue_completed_idx ON cairnq_tasks (queue, completed_at_ms)
    WHERE status IN ('succeeded', 'failed', 'canceled');

UPDATE cairnq_meta SET value = '9' WHERE key = 'schema_version';
