-- This SDK's own statement, beside the protocol's (it moves no version).
-- Record a finished step of a durable handler: append :entry (a JSON
-- object) to the steps of the task's cairnq_durable metadata member,
-- keeping the member's other fields and the rest of the metadata, when the
-- caller's attempt (:attempt, which the claim counted) still owns the task
-- and the member holds exactly :position steps. Metadata that is not an
-- object, or a member that is not format 1's object with an array of
-- steps, is left alone. No row back means one of those, or the step at
-- :position is already recorded (a retry of a write whose answer was
-- lost): the caller reads the row to tell which. Neither the lease nor any
-- indexed column is written.
-- The ownership check sits in IS TRUE so that the row is found by its
-- key (package protocol, "Ownership checks on Postgres").
UPDATE cairnq_tasks
SET metadata      = jsonb_set(metadata, '{cairnq_durable}',
                        coalesce(metadata -> 'cairnq_durable', '{}'::jsonb)
                        || jsonb_build_object('v', 1, 'steps',
                               coalesce(metadata #> '{cairnq_durable,steps}', '[]'::jsonb)
                               || jsonb_build_array(CAST(:entry AS jsonb)))),
    updated_at_ms = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
WHERE id = :id
  AND (status = 'running'
       AND worker_id = :worker_id
       AND attempt = CAST(:attempt AS integer)
       AND lease_until_ms > CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
       AND jsonb_typeof(metadata) = 'object'
       AND (metadata -> 'cairnq_durable' IS NULL
            OR (jsonb_typeof(metadata -> 'cairnq_durable') = 'object'
                AND metadata #> '{cairnq_durable,v}' = '1'::jsonb
                AND coalesce(jsonb_typeof(metadata #> '{cairnq_durable,steps}'), 'array') = 'array'))
       AND jsonb_array_length(coalesce(metadata #> '{cairnq_durable,steps}', '[]'::jsonb))
           = CAST(:position AS integer)) IS TRUE
RETURNING id;
