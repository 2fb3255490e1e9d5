-- Row counts per queue and status, terminal rows included. :queue is an
-- optional filter (NULL means every queue).
SELECT queue, status, count(*) AS count
FROM cairnq_tasks
WHERE (:queue::text IS NULL OR queue = :queue)
GROUP BY queue, status
ORDER BY queue ASC, status ASC;
