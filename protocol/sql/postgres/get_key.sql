-- Which task a key points at, for submit's conflict handling.
SELECT task_id FROM cairnq_task_keys WHERE key = :key;
