-- Ours, beside the protocol's: the tasks some keys point at, narrowly,
-- for a workflow's advance from one settled step: the record (through
-- its own key, whose updated_at_ms each rewrite of the definition moves)
-- and the steps it asks about (through theirs). Each row is a key, when
-- it last moved, and its task's id and status; a key without a task
-- (never written, or its task purged) has no row. Nothing of the task
-- past its status is read: a wide workflow's record carries its whole
-- definition in its payload, which this look must not touch.
-- Each key is looked up on its own, behind OFFSET 0: written as
-- "key = ANY (:keys)", a prepared statement's generic plan, made on a
-- fresh database before any ANALYZE, scanned the whole table on every
-- call long after it had grown (8 ms a look at 15,000 keys). Planned
-- one key at a time, an unanalyzed table is read by its primary key at
-- any size. (A table analyzed while it held a handful of rows can still
-- get a scan, per key, until autovacuum analyzes it again, which
-- replans the statement.) Callers ask for each key once.
SELECT found.task_key, found.key_updated_at_ms, found.id, found.status
FROM unnest(:keys::text[]) AS asked (key)
CROSS JOIN LATERAL (
    SELECT ptr.key AS task_key, ptr.updated_at_ms AS key_updated_at_ms, task.id, task.status
    FROM cairnq_task_keys AS ptr
    JOIN cairnq_tasks AS task ON task.id = ptr.task_id
    WHERE ptr.key = asked.key
    OFFSET 0
) AS found;
