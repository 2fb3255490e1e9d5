-- This SDK's own statement, beside the protocol's (it moves no version).
-- Record a finished step of a durable handler: append :entry (a JSON
-- object) to the steps of the task's cairnq_durable metadata member,
-- keeping the member's other fields and the rest of the metadata, when the
-- caller still owns the task and the member holds exactly :position steps.
-- No row back means the lease was lost, or the step at :position is already
-- recorded (a retry of a write whose answer was lost): the caller reads the
-- row to tell which.
UPDATE cairnq_tasks
SET metadata      = json_set(metadata, '$.cairnq_durable',
                        json_set(coalesce(json_extract(metadata, '$.cairnq_durable'), json('{}')),
                            '$.v', 1,
                            '$.steps', json_insert(coalesce(json_extract(metadata, '$.cairnq_durable.steps'), json('[]')),
                                           '$[#]', json(:entry)))),
    updated_at_ms = :now_ms
WHERE id = :id
  AND status = 'running'
  AND worker_id = :worker_id
  AND lease_until_ms > :now_ms
  AND coalesce(json_array_length(metadata, '$.cairnq_durable.steps'), 0) = :position
RETURNING id;
