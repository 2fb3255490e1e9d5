-- Status only: what wait polls, so it never drags the payload along.
SELECT id, status FROM cairnq_tasks WHERE id = :id;
