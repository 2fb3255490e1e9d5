-- Ours, beside the protocol's: upsert_key for several keys at once,
-- :keys[i] pointed at :task_ids[i] (parallel text[]; each key once).
INSERT INTO cairnq_task_keys (key, task_id, created_at_ms, updated_at_ms)
SELECT k.key, k.task_id,
       CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint), CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
FROM unnest(:keys::text[], :task_ids::text[]) AS k (key, task_id)
ON CONFLICT (key) DO UPDATE
SET task_id       = excluded.task_id,
    updated_at_ms = excluded.updated_at_ms;
