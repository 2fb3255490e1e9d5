-- This SDK's own statement, beside the protocol's (it moves no version).
-- Deliver the event :event to a task that has not ended: :entry (a JSON
-- object) becomes the member :event of the events of the task's
-- cairnq_durable metadata member, keeping the rest of the metadata, unless
-- that member is there already (an event counts once; a wait that timed
-- out holds its place too), or :entry is an event (not a timeout's mark,
-- which has timed_out) arriving after the end of a wait for it that the
-- task recorded: that wait has timed out, whether or not its mark is
-- written yet, or the metadata with the event would pass :max_bytes. When the task is queued and its last durable
-- step is a wait for :event, it is made due now; other processes see the
-- commit through the database file. :event holds no double quote (the
-- SDK refuses one), so it can be quoted into a JSON path. Metadata that is
-- not an object, or a cairnq_durable member that is not format 1's
-- object, is left alone. No row back means one of those, a task that
-- ended or is gone, or an event delivered already: the caller reads the
-- row to tell which.
UPDATE cairnq_tasks
SET metadata      = json_set(metadata, '$.cairnq_durable',
                        json_set(coalesce(json_extract(metadata, '$.cairnq_durable'), json('{}')),
                            '$.v', 1,
                            '$.events', json_set(coalesce(json_extract(metadata, '$.cairnq_durable.events'), json('{}')),
                                            '$."' || :event || '"', json(:entry)))),
    run_at_ms     = CASE WHEN status = 'queued'
                              AND json_extract(metadata, '$.cairnq_durable.steps[#-1].kind') = 'wait'
                              AND json_extract(metadata, '$.cairnq_durable.steps[#-1].name') = :event
                         THEN min(run_at_ms, :now_ms)
                         ELSE run_at_ms END,
    updated_at_ms = :now_ms
WHERE id = :id
  AND status IN ('queued', 'running')
  AND json_type(metadata) = 'object'
  AND (json_type(metadata, '$.cairnq_durable') IS NULL
       OR (json_type(metadata, '$.cairnq_durable') = 'object'
           AND json_extract(metadata, '$.cairnq_durable.v') = 1
           AND coalesce(json_type(metadata, '$.cairnq_durable.events'), 'object') = 'object'))
  AND NOT EXISTS (SELECT 1 FROM json_each(metadata, '$.cairnq_durable.events') WHERE key = :event)
  AND length(CAST(metadata AS BLOB)) + length(CAST(:entry AS BLOB)) + length(CAST(:event AS BLOB)) <= :max_bytes
  AND (json_type(:entry, '$.timed_out') IS NOT NULL
       OR coalesce(json_type(metadata, '$.cairnq_durable.steps'), '') <> 'array'
       OR NOT EXISTS (SELECT 1
                      FROM json_each(metadata, '$.cairnq_durable.steps')
                      WHERE json_extract(value, '$.kind') = 'wait'
                        AND json_extract(value, '$.name') = :event
                        AND json_extract(value, '$.until_ms') < json_extract(:entry, '$.at_ms')))
RETURNING id, queue, status,
          coalesce(status = 'queued'
                   AND json_extract(metadata, '$.cairnq_durable.steps[#-1].kind') = 'wait'
                   AND json_extract(metadata, '$.cairnq_durable.steps[#-1].name') = :event, 0) AS woke;
