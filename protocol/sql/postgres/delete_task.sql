-- Delete one task no worker holds (ours, beside the protocol's): queued
-- or finished, never running, and never a task of a workflow whose record
-- is queued or running (the record, or one of its steps, root_id naming
-- the record), which purge_from keeps for the same reasons. Key rows
-- cascade away. No row back: the id is running, of a live workflow, or
-- gone, or no longer of :status (NULL: any), a bulk delete's filter.
DELETE FROM cairnq_tasks
WHERE id = :id
  AND status <> 'running'
  AND (:status::text IS NULL OR status = :status)
  AND NOT (name = 'cairnq.workflow' AND status = 'queued')
  AND NOT coalesce((
      SELECT wf.status IN ('queued', 'running')
      FROM cairnq_tasks AS wf
      WHERE wf.id = cairnq_tasks.root_id
        AND wf.name = 'cairnq.workflow'), false)
RETURNING *;
