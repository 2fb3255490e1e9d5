-- Point a key at a task, creating the key or repointing it.
INSERT INTO cairnq_task_keys (key, task_id, created_at_ms, updated_at_ms)
VALUES (:key, :task_id, CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint), CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint))
ON CONFLICT (key) DO UPDATE
SET task_id       = excluded.task_id,
    updated_at_ms = excluded.updated_at_ms;
