-- A new queued task. The SDK supplies the id, root_id (the id itself for a
-- top-level task) and the absolute due time :run_at_ms.
INSERT INTO cairnq_tasks (
    id, name, queue, status, payload, metadata,
    max_attempts, priority, run_at_ms,
    parent_id, root_id, correlation_id,
    created_at_ms, updated_at_ms
)
VALUES (
    :id, :name, :queue, 'queued', :payload, :metadata,
    :max_attempts, :priority, :run_at_ms,
    :parent_id, :root_id, :correlation_id,
    :now_ms, :now_ms
)
RETURNING *;
