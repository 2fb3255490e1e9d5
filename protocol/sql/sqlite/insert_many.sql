-- Ours, beside the protocol's: several new queued tasks in one statement,
-- each row as insert_task.sql writes it. :rows is a JSON array of one
-- array per task, [id, name, queue, payload, metadata, max_attempts,
-- priority, delay_ms, parent_id, root_id, correlation_id], payload and
-- metadata as JSON text, null for NULL. Every task of the statement is
-- created at :now_ms, due its delay_ms after it.
INSERT INTO cairnq_tasks (
    id, name, queue, status, payload, metadata,
    max_attempts, priority, run_at_ms,
    parent_id, root_id, correlation_id,
    created_at_ms, updated_at_ms
)
SELECT r.value ->> 0, r.value ->> 1, r.value ->> 2, 'queued', r.value ->> 3, r.value ->> 4,
       r.value ->> 5, r.value ->> 6, :now_ms + (r.value ->> 7),
       r.value ->> 8, r.value ->> 9, r.value ->> 10,
       :now_ms, :now_ms
FROM json_each(:rows) AS r;
