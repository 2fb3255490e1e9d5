-- Ours, beside the protocol's: get_by_key for several keys at once, each
-- row the task a key points at with that key as task_key. A key without
-- a row, or whose task is gone (purged), has no row.
SELECT ptr.key AS task_key, task.*
FROM cairnq_task_keys AS ptr
JOIN cairnq_tasks AS task ON task.id = ptr.task_id
WHERE ptr.key = ANY (:keys::text[]);
