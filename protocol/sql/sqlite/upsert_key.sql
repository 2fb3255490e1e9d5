-- Point a key at a task, creating the key or repointing it.
INSERT INTO cairnq_task_keys (key, task_id, created_at_ms, updated_at_ms)
VALUES (:key, :task_id, :now_ms, :now_ms)
ON CONFLICT (key) DO UPDATE
SET task_id       = excluded.task_id,
    updated_at_ms = excluded.updated_at_ms;
