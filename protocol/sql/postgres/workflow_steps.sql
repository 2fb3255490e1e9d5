-- The steps of the workflows whose records are :record_ids, narrowly:
-- each task whose root and parent are its record and whose metadata says
-- it is one of the record's steps, with its record, the step's name,
-- status, attempt and last update. A step's own children share its root
-- but not its parent. Each record's steps are read on their own through
-- cairnq_tasks_root_idx, behind OFFSET 0, as workflow_look reads its
-- keys.
SELECT found.record_id, found.id, found.status, found.attempt, found.updated_at_ms, found.step
FROM unnest(:record_ids::text[]) AS rec (id)
CROSS JOIN LATERAL (
    SELECT task.root_id AS record_id, task.id, task.status, task.attempt, task.updated_at_ms,
           task.metadata -> 'cairnq_workflow' ->> 'step' AS step
    FROM cairnq_tasks AS task
    WHERE task.root_id = rec.id
      AND task.parent_id = rec.id
      AND task.metadata -> 'cairnq_workflow' ->> 'record' = rec.id
    OFFSET 0
) AS found;
