-- This SDK's own statement, beside the protocol's (it moves no version).
-- Hand a running task the caller still owns back to the queue, due again
-- :delay_ms after the database's now, as if this attempt had never been
-- claimed: the claim's attempt increment is undone (never below 0), and
-- worker, lease, progress and message go back to NULL, the values every queued
-- row holds. error is left alone: it still describes the last attempt that
-- failed, if one did. A pending cancel request wins here as on every exit from
-- running: the task ends canceled, keeping its attempt, worker, progress and
-- message. The notify trigger sees running -> queued (or -> canceled) like any
-- other such update. A durable wait (:event not empty) hands the task back
-- only while the cairnq_durable member of its metadata holds no event of
-- that name, so an event that committed first keeps the attempt running.
-- No row back means the lease was lost, or that event is there.
-- The ownership check sits in IS TRUE so that the row is found by its
-- key (package protocol, "Ownership checks on Postgres").
UPDATE cairnq_tasks
SET status          = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN 'canceled' ELSE 'queued' END,
    attempt         = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN attempt ELSE GREATEST(attempt - 1, 0) END,
    worker_id       = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN worker_id ELSE NULL END,
    lease_until_ms  = NULL,
    run_at_ms       = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN run_at_ms
                           ELSE CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint) + :delay_ms END,
    completed_at_ms = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint) ELSE NULL END,
    progress        = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN progress ELSE NULL END,
    message         = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN message ELSE NULL END,
    updated_at_ms   = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
WHERE id = :id
  AND (status = 'running'
       AND worker_id = :worker_id
       AND lease_until_ms > CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
       AND (CAST(:event AS text) = ''
            OR metadata #> ARRAY['cairnq_durable', 'events', CAST(:event AS text)] IS NULL)) IS TRUE
RETURNING *;
