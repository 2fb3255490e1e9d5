-- The steps of the workflow whose record is :record_id, narrowly: each
-- task whose root and parent are the record and whose metadata says it is
-- one of the record's steps, with the step's name, status, attempt and
-- last update.
-- A step's own children share its root but not its parent. Read through
-- cairnq_tasks_root_idx.
SELECT id, status, attempt, updated_at_ms, metadata -> 'cairnq_workflow' ->> 'step' AS step
FROM cairnq_tasks
WHERE root_id = :record_id
  AND parent_id = :record_id
  AND metadata -> 'cairnq_workflow' ->> 'record' = :record_id;
