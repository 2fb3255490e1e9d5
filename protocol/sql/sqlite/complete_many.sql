-- This SDK's own statement beside the protocol's (it moves no version):
-- settle several finished attempts with one statement, each row exactly
-- as complete.sql settles it, so the completions waiting for one group
-- commit are one statement instead of one each. :done is a JSON array
-- with one [id, worker_id, result] triple per attempt; result is the
-- result's JSON text as a JSON string (kept byte for byte), or null to
-- store none. Ids must be distinct. A task whose lease is gone is left
-- as it is and not returned, which is how its caller learns it lost the
-- lease; the others return their id and the status they took.
UPDATE cairnq_tasks
SET status          = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN 'canceled' ELSE 'succeeded' END,
    result          = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN result ELSE done.done_result END,
    progress        = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN progress ELSE 1.0 END,
    lease_until_ms  = NULL,
    completed_at_ms = :now_ms,
    updated_at_ms   = :now_ms
FROM (
    SELECT value ->> 0 AS done_id,
           value ->> 1 AS done_worker_id,
           value ->> 2 AS done_result
    FROM json_each(:done)
) AS done
WHERE cairnq_tasks.id = done.done_id
  AND +cairnq_tasks.status = 'running'
  AND +cairnq_tasks.worker_id = done.done_worker_id
  AND +cairnq_tasks.lease_until_ms > :now_ms
RETURNING id, status;
