-- Ours, beside the protocol's: upsert_key for several keys at once.
-- :pairs is a JSON array of [key, task_id] pairs, each key once.
INSERT INTO cairnq_task_keys (key, task_id, created_at_ms, updated_at_ms)
SELECT p.value ->> 0, p.value ->> 1, :now_ms, :now_ms
FROM json_each(:pairs) AS p
WHERE true
ON CONFLICT (key) DO UPDATE
SET task_id       = excluded.task_id,
    updated_at_ms = excluded.updated_at_ms;
