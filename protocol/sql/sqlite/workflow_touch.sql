-- Ours, beside the protocol's: move the record's own key :key (its
-- updated_at_ms) forward with every write of the workflow's definition,
-- past its last value even within one millisecond, so that a process
-- keeping the definition it parsed reads it again whenever it changed.
UPDATE cairnq_task_keys
SET updated_at_ms = MAX(updated_at_ms + 1, :now_ms)
WHERE key = :key;
