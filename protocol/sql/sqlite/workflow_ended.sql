-- The records of workflows that ended, in the order they ended (at_ms is
-- completed_at_ms), after the one that ended at :from_ms with id
-- :from_id, at most :limit of them (ours, beside the protocol's): a Go
-- worker's sweep reads those that ended since its last, succeeded ones
-- too so that its floor passes them.
-- moved says whether a step moved since the workflow ended, which a Go
-- worker's sweep then advances under the workflow's lock: of a canceled
-- record, a step queued, or running and not yet asked to stop (another
-- SDK's plain cancel of the record reaches no step); of a failed record,
-- a step queued, running or succeeded that the ledger written when it
-- ended says failed or was canceled (someone retried it). Only a read.
-- The terminal-status list must stay literally
-- cairnq_tasks_queue_completed_idx's predicate, which the scan follows in
-- its order from the floor.
SELECT rec.id, rec.completed_at_ms AS at_ms,
       CASE WHEN rec.status = 'succeeded' THEN 0 ELSE EXISTS (
           SELECT 1
           FROM cairnq_tasks AS step
           WHERE step.root_id = rec.id
             AND step.parent_id = rec.id
             AND json_extract(step.metadata, '$.cairnq_workflow.record') = rec.id
             AND CASE WHEN rec.status = 'canceled'
                      THEN step.status = 'queued'
                           OR (step.status = 'running' AND step.cancel_requested_at_ms IS NULL)
                      ELSE step.status IN ('queued', 'running', 'succeeded')
                           AND (SELECT seen.value
                                FROM json_each(rec.payload, '$.seen') AS seen
                                WHERE seen.key = json_extract(step.metadata, '$.cairnq_workflow.step'))
                               IN ('failed', 'canceled')
                 END
       ) END AS moved
FROM cairnq_tasks AS rec
WHERE rec.queue = :name
  AND rec.status IN ('succeeded', 'failed', 'canceled')
  AND rec.name = :name
  AND rec.completed_at_ms >= :from_ms
  AND (rec.completed_at_ms > :from_ms OR rec.id > :from_id)
ORDER BY rec.completed_at_ms, rec.id
LIMIT :limit;
