-- Our addition beside the protocol's statements (adding one moves no
-- version): several new queued tasks in one statement, each row as
-- insert_task.sql writes it, so the submits arriving together cost one
-- round trip and one commit. Each parameter :each_X is the text[] of
-- insert_task's :X across the group (parallel arrays of one length; a
-- NULL element is a NULL value), unnested side by side in the select
-- list, which spares the rows the tuplestore a FROM unnest(...) fills.
-- The clock is read once for the statement (the lateral subquery refers
-- to no row): every task of the group is created at that moment, due
-- :delay_ms after it. It returns only what the server decides or
-- rewrites, the time and the JSON (jsonb keeps its own text of the JSON
-- sent), with the id to match rows to submits: every other column of a
-- new task is what the submit sent or the column's default, and the
-- store fills them in, sparing each row's other columns the wire and
-- the decoding.
INSERT INTO cairnq_tasks (
    id, name, queue, status, payload, metadata,
    max_attempts, priority, run_at_ms,
    parent_id, root_id, correlation_id,
    created_at_ms, updated_at_ms
)
SELECT n.id, n.name, n.queue, 'queued', CAST(n.payload AS jsonb), CAST(n.metadata AS jsonb),
       CAST(n.max_attempts AS integer), CAST(n.priority AS integer),
       c.now_ms + CAST(n.delay_ms AS bigint),
       n.parent_id, n.root_id, n.correlation_id,
       c.now_ms, c.now_ms
FROM (SELECT unnest(:each_id::text[]) AS id,
             unnest(:each_name::text[]) AS name,
             unnest(:each_queue::text[]) AS queue,
             unnest(:each_payload::text[]) AS payload,
             unnest(:each_metadata::text[]) AS metadata,
             unnest(:each_max_attempts::text[]) AS max_attempts,
             unnest(:each_priority::text[]) AS priority,
             unnest(:each_delay_ms::text[]) AS delay_ms,
             unnest(:each_parent_id::text[]) AS parent_id,
             unnest(:each_root_id::text[]) AS root_id,
             unnest(:each_correlation_id::text[]) AS correlation_id) AS n
     CROSS JOIN LATERAL (SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint) AS now_ms) AS c
RETURNING id, payload, metadata, created_at_ms;
