-- Ours, beside the protocol's: a workflow's queued record claimed and
-- completed in one statement, by the advance that found every step
-- succeeded, where claim_ids, workflow_revise and complete took three
-- statements. One record per statement, where Postgres's takes a list:
-- statements cost no round trip here, and an UPDATE ... FROM a JSON
-- list measured slower (its join is planned without the primary key).
-- The definition (its ledger, and ended) goes into the payload and the
-- result beside it; the row ends as those three statements leave it (the
-- attempt counted, the worker named, the lease cleared, a cancel request
-- winning as in complete). No row when the record is not queued. The
-- record's own key is moved by workflow_touch after it (Postgres's
-- statement moves it too: SQLite has no writes in WITH).
UPDATE cairnq_tasks
SET status          = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN 'canceled' ELSE 'succeeded' END,
    payload         = :payload,
    result          = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN result ELSE :result END,
    progress        = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN progress ELSE 1.0 END,
    worker_id       = :worker_id,
    lease_until_ms  = NULL,
    run_at_ms       = MIN(run_at_ms, :now_ms),
    attempt         = attempt + 1,
    completed_at_ms = :now_ms,
    updated_at_ms   = :now_ms
WHERE id = :id
  AND status = 'queued'
RETURNING *;
