-- Every record of a workflow that ended :status (failed or canceled), in
-- cairnq_tasks_claim_name_idx's order (records keep priority 0; at_ms is
-- run_at_ms), after the one at :from_ms with id :from_id, at most :limit
-- of them (ours, beside the protocol's): a Go worker's sweep reads them
-- all every few minutes, for a step retried long after its workflow
-- ended, and reads no succeeded record to do it.
-- moved says whether a step moved since the workflow ended, which a Go
-- worker's sweep then advances under the workflow's lock: of a canceled
-- record, a step queued, or running and not yet asked to stop (another
-- SDK's plain cancel of the record reaches no step); of a failed record,
-- a step queued, running or succeeded that the ledger written when it
-- ended says failed or was canceled (someone retried it). Only a read.
SELECT rec.id, rec.run_at_ms AS at_ms,
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
  AND rec.status = :status
  AND rec.name = :name
  AND rec.priority = 0
  AND rec.run_at_ms >= :from_ms
  AND (rec.run_at_ms > :from_ms OR rec.id > :from_id)
ORDER BY rec.run_at_ms, rec.id
LIMIT :limit;
