-- This SDK's own statement, beside the protocol's (it moves no version).
-- Deliver the event :event to a task that has not ended: :entry (a JSON
-- object) becomes the member :event of the events of the task's
-- cairnq_durable metadata member, keeping the rest of the metadata, unless
-- that member is there already (an event counts once; a wait that timed
-- out holds its place too), or :entry is an event (not a timeout's mark,
-- which has timed_out) arriving after the end of a wait for it that the
-- task recorded: that wait has timed out, whether or not its mark is
-- written yet, or the metadata with the event would pass :max_bytes. When the task is queued and its last durable
-- step is a wait for :event, it is made due now, and the cairnq_queued
-- channel hears of it (the notify trigger fires only on a status change).
-- Metadata that is not an object, or a cairnq_durable member that is not
-- format 1's object, is left alone. No row back means one of those, a
-- task that ended or is gone, or an event delivered already: the caller
-- reads the row to tell which. No indexed column but run_at_ms is written.
-- The checks sit in IS TRUE so that the row is found by its key (package
-- protocol, "Ownership checks on Postgres").
WITH sent AS (
    UPDATE cairnq_tasks
    SET metadata      = jsonb_set(metadata, '{cairnq_durable}',
                            coalesce(metadata -> 'cairnq_durable', '{}'::jsonb)
                            || jsonb_build_object('v', 1, 'events',
                                   coalesce(metadata #> '{cairnq_durable,events}', '{}'::jsonb)
                                   || jsonb_build_object(CAST(:event AS text), CAST(:entry AS jsonb)))),
        run_at_ms     = CASE WHEN status = 'queued'
                                  AND metadata #>> '{cairnq_durable,steps,-1,kind}' = 'wait'
                                  AND metadata #>> '{cairnq_durable,steps,-1,name}' = CAST(:event AS text)
                             THEN LEAST(run_at_ms, CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint))
                             ELSE run_at_ms END,
        updated_at_ms = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
    WHERE id = :id
      AND (status IN ('queued', 'running')
           AND jsonb_typeof(metadata) = 'object'
           AND (metadata -> 'cairnq_durable' IS NULL
                OR (jsonb_typeof(metadata -> 'cairnq_durable') = 'object'
                    AND metadata #> '{cairnq_durable,v}' = '1'::jsonb
                    AND coalesce(jsonb_typeof(metadata #> '{cairnq_durable,events}'), 'object') = 'object'))
           AND metadata #> ARRAY['cairnq_durable', 'events', CAST(:event AS text)] IS NULL
           AND octet_length(CAST(metadata AS text)) + octet_length(CAST(:entry AS text))
               + octet_length(CAST(:event AS text)) <= CAST(:max_bytes AS bigint)
           AND (CAST(:entry AS jsonb) ? 'timed_out'
                OR jsonb_typeof(metadata #> '{cairnq_durable,steps}') IS DISTINCT FROM 'array'
                OR NOT EXISTS (
                    SELECT 1
                    FROM jsonb_array_elements(metadata #> '{cairnq_durable,steps}') AS each_step (step)
                    WHERE each_step.step ->> 'kind' = 'wait'
                      AND each_step.step ->> 'name' = CAST(:event AS text)
                      AND CAST(each_step.step ->> 'until_ms' AS bigint)
                          < CAST(CAST(:entry AS jsonb) ->> 'at_ms' AS bigint)))) IS TRUE
    RETURNING id, queue, status,
              (status = 'queued'
               AND metadata #>> '{cairnq_durable,steps,-1,kind}' = 'wait'
               AND metadata #>> '{cairnq_durable,steps,-1,name}' = CAST(:event AS text)) IS TRUE AS woke
), wake AS (
    SELECT pg_notify('cairnq_queued', queue) FROM sent WHERE woke
)
SELECT id, queue, status, woke, (SELECT count(*) FROM wake) AS notified FROM sent;
