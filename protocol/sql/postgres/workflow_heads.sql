-- Ours, beside the protocol's: the records some workflows' own keys
-- point at, whole (their payloads are the definitions), each with when
-- its key last moved: what a process reads of a workflow before it
-- caches its definition, for every workflow a group of settlements
-- meets that its cache lacks, in one statement. A key without a task has
-- no row. Each key is looked up on its own, as in workflow_look.
SELECT found.*
FROM unnest(:keys::text[]) AS asked (key)
CROSS JOIN LATERAL (
    SELECT ptr.updated_at_ms AS key_updated_at_ms, task.*
    FROM cairnq_task_keys AS ptr
    JOIN cairnq_tasks AS task ON task.id = ptr.task_id
    WHERE ptr.key = asked.key
    OFFSET 0
) AS found;
