-- A new queued task, due :delay_ms from now by the database clock. The SDK
-- supplies the id and root_id (the id itself for a top-level task).
-- clock_timestamp() rather than now(): a keyed submit may have waited on the
-- key lock since its transaction began.
INSERT INTO cairnq_tasks (
    id, name, queue, status, payload, metadata,
    max_attempts, priority, run_at_ms,
    parent_id, root_id, correlation_id,
    created_at_ms, updated_at_ms
)
VALUES (
    :id, :name, :queue, 'queued', :payload::jsonb, :metadata::jsonb,
    :max_attempts, :priority, CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint) + :delay_ms,
    :parent_id, :root_id, :correlation_id,
    CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint), CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)
)
RETURNING *;
