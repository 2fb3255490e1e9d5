-- The task a key currently points at.
SELECT task.*
FROM cairnq_task_keys AS ptr
JOIN cairnq_tasks AS task ON task.id = ptr.task_id
WHERE ptr.key = :key;
