-- get_status through a key, resolved on every call so a replaced key moves
-- the wait to the new task.
SELECT task.id, task.status
FROM cairnq_task_keys AS ptr
JOIN cairnq_tasks AS task ON task.id = ptr.task_id
WHERE ptr.key = :key;
