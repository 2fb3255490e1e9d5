-- This SDK's own statement, beside the protocol's (it moves no version).
-- Record a finished step of a durable handler: append :entry (a JSON
-- object) to the steps of the task's cairnq_durable metadata member,
-- keeping the member's other fields and the rest of the metadata, when the
-- caller's attempt (:attempt, which the claim counted) still owns the task
-- and the member holds exactly :position steps. Metadata that is not an
-- object, or a member that is not format 1's object with an array of
-- steps, is left alone. No row back means one of those, or the step at
-- :position is already recorded (a retry of a write whose answer was
-- lost): the caller reads the row to tell which.
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
  AND attempt = :attempt
  AND lease_until_ms > :now_ms
  AND json_type(metadata) = 'object'
  AND (json_type(metadata, '$.cairnq_durable') IS NULL
       OR (json_type(metadata, '$.cairnq_durable') = 'object'
           AND json_extract(metadata, '$.cairnq_durable.v') = 1
           AND coalesce(json_type(metadata, '$.cairnq_durable.steps'), 'array') = 'array'))
  AND coalesce(json_array_length(metadata, '$.cairnq_durable.steps'), 0) = :position
RETURNING id;
