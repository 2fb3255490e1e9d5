-- Our addition beside the protocol's statements (adding one moves no
-- version): several new queued tasks in one statement, each row exactly
-- as insert_task.sql writes it, so the submits arriving together cost one
-- round trip and one commit. Each parameter :each_X is the text[] of
-- insert_task's :X across the group (parallel arrays; a NULL element is a
-- NULL value). Each row reads the clock for
-- itself, as insert_task does. It returns only the columns the server
-- decides (the id, to match rows to submits; the times) or rewrites (jsonb
-- keeps its own text of the JSON sent): every other column of a new task
-- is what the submit sent or the column's default, and the store fills
-- them in, sparing each row's twenty other columns the wire and decoding.
INSERT INTO cairnq_tasks (
    id, name, queue, status, payload, metadata,
    max_attempts, priority, run_at_ms,
    parent_id, root_id, correlation_id,
    created_at_ms, updated_at_ms
)
SELECT n.id, n.name, n.queue, 'queued', CAST(n.payload AS jsonb), CAST(n.metadata AS jsonb),
       CAST(n.max_attempts AS integer), CAST(n.priority AS integer),
       CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint) + CAST(n.delay_ms AS bigint),
       n.parent_id, n.root_id, n.correlation_id,
       CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint),
       CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)
FROM unnest(:each_id::text[], :each_name::text[], :each_queue::text[], :each_payload::text[], :each_metadata::text[],
            :each_max_attempts::text[], :each_priority::text[], :each_delay_ms::text[],
            :each_parent_id::text[], :each_root_id::text[], :each_correlation_id::text[])
     AS n (id, name, queue, payload, metadata, max_attempts, priority, delay_ms, parent_id, root_id, correlation_id)
RETURNING id, payload, metadata, run_at_ms, created_at_ms, updated_at_ms;
