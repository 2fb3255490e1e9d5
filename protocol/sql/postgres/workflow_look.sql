-- Ours, beside the protocol's: the tasks some keys point at, narrowly,
-- for a workflow's advance from one settled step: the record (through
-- its own key, whose updated_at_ms each rewrite of the definition moves)
-- and the steps it asks about (through theirs). Each row is a key, when
-- it last moved, and its task's id and status; a key without a task
-- (never written, or its task purged) has no row. Nothing of the task
-- past its status is read: a wide workflow's record carries its whole
-- definition in its payload, which this look must not touch.
SELECT ptr.key AS task_key, ptr.updated_at_ms AS key_updated_at_ms, task.id, task.status
FROM cairnq_task_keys AS ptr
JOIN cairnq_tasks AS task ON task.id = ptr.task_id
WHERE ptr.key = ANY (:keys::text[]);
