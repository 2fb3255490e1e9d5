-- The status of several tasks in one read, for waits polling together. An id
-- with no row names no task (never written here, or purged).
SELECT id, status FROM cairnq_tasks WHERE id IN (SELECT value FROM json_each(:ids));
