-- Ours, beside the protocol's: a workflow's queued record claimed and
-- completed in one statement, by the advance that found every step
-- succeeded, where claim_ids, workflow_revise, workflow_touch and
-- complete took four round trips under the workflow's lock. The definition (its ledger, and
-- ended) goes into the payload and the result beside it; the row ends as
-- those three statements leave it (the attempt counted, the worker
-- named, the lease cleared, a cancel request winning as in complete).
-- The record's own key moves with it, as workflow_touch moves it (the
-- definition changed). No row, and no key moved, when the record is no
-- longer queued (canceled meanwhile by another SDK, which takes no
-- workflow lock; this waits for its row rather than skip it).
WITH finished AS (
    UPDATE cairnq_tasks
    SET status          = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN 'canceled' ELSE 'succeeded' END,
        payload         = CAST(:payload AS jsonb),
        result          = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN result ELSE CAST(:result AS jsonb) END,
        progress        = CASE WHEN cancel_requested_at_ms IS NOT NULL THEN progress ELSE 1.0 END,
        worker_id       = :worker_id,
        lease_until_ms  = NULL,
        run_at_ms       = LEAST(run_at_ms, CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)),
        attempt         = attempt + 1,
        completed_at_ms = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint),
        updated_at_ms   = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
    WHERE id = :id
      AND status = 'queued'
    RETURNING *
), touched AS (
    UPDATE cairnq_task_keys
    SET updated_at_ms = GREATEST(updated_at_ms + 1, CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint))
    WHERE key = :key
      AND EXISTS (SELECT 1 FROM finished)
)
SELECT * FROM finished;
