-- A bulk cancel's cancel of one task (ours, beside the protocol's): as
-- cancel.sql cancels, but only while the task still has :status (NULL:
-- queued or running), and never a running task already asked to stop,
-- so that a bulk cancel run again counts it once. No row back: the task
-- no longer matches.
UPDATE cairnq_tasks
SET status                 = CASE WHEN status = 'queued' THEN 'canceled' ELSE status END,
    cancel_requested_at_ms = CASE WHEN status = 'running' THEN :now_ms ELSE cancel_requested_at_ms END,
    completed_at_ms        = CASE WHEN status = 'queued' THEN :now_ms ELSE completed_at_ms END,
    updated_at_ms          = :now_ms
WHERE id = :id
  AND (status = 'queued' OR (status = 'running' AND cancel_requested_at_ms IS NULL))
  AND (:status IS NULL OR status = :status)
RETURNING *;
