-- Lease to :worker_id, until :lease_until_ms, each task among the :ids JSON
-- array that is queued, whatever its queue, name or due time, setting what
-- claim.sql sets. A workflow's advance claims its record this way before
-- settling it with complete.sql or fail.sql, so that the record, like
-- every task, goes from queued through running to its end. A task claimed
-- before it was due (a record waiting for its next sweep) becomes due now,
-- so that it never ends with a run_at_ms after its completed_at_ms. The
-- caller runs it under BEGIN IMMEDIATE.
UPDATE cairnq_tasks
SET status         = 'running',
    worker_id      = :worker_id,
    lease_until_ms = :lease_until_ms,
    run_at_ms      = MIN(run_at_ms, :now_ms),
    attempt        = attempt + 1,
    updated_at_ms  = :now_ms
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status = 'queued'
RETURNING *;
