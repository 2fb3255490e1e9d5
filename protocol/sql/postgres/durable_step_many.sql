-- This SDK's own statement, beside the protocol's (it moves no version):
-- durable_step for several tasks at once, each row exactly as
-- durable_step.sql would write it, so the checkpoints of many handlers
-- cost one round trip and one commit. :ids, :worker_ids, :attempts,
-- :positions and :entries are parallel arrays (text, text, integer,
-- integer and jsonb), one element per task; a task appears once (a
-- handler's steps run one at a time). It returns the id of each task
-- whose step it appended; a task left out is one durable_step would have
-- left alone, and its caller reads the row to tell why.
-- The checks sit in IS TRUE, and the call's rows are limited to their
-- own count, so that each row is found by its key (complete_many.sql
-- says why).
UPDATE cairnq_tasks AS task
SET metadata      = jsonb_set(task.metadata, '{cairnq_durable}',
                        coalesce(task.metadata -> 'cairnq_durable', '{}'::jsonb)
                        || jsonb_build_object('v', 1, 'steps',
                               coalesce(task.metadata #> '{cairnq_durable,steps}', '[]'::jsonb)
                               || jsonb_build_array(step.entry))),
    updated_at_ms = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
FROM (SELECT *
      FROM unnest(:ids::text[], :worker_ids::text[], :attempts::integer[], :positions::integer[], :entries::jsonb[])
           AS each_step (id, worker_id, attempt, position, entry)
      LIMIT cardinality(:ids::text[])) AS step
WHERE task.id = step.id
  AND (task.status = 'running'
       AND task.worker_id = step.worker_id
       AND task.attempt = step.attempt
       AND task.lease_until_ms > CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
       AND jsonb_typeof(task.metadata) = 'object'
       AND (task.metadata -> 'cairnq_durable' IS NULL
            OR (jsonb_typeof(task.metadata -> 'cairnq_durable') = 'object'
                AND task.metadata #> '{cairnq_durable,v}' = '1'::jsonb
                AND coalesce(jsonb_typeof(task.metadata #> '{cairnq_durable,steps}'), 'array') = 'array'))
       AND jsonb_array_length(coalesce(task.metadata #> '{cairnq_durable,steps}', '[]'::jsonb))
           = step.position) IS TRUE
RETURNING task.id;
