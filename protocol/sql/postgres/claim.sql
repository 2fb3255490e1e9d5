-- Lease up to :limit due tasks from :queues (text[]) for :lease_ms. :names
-- (text[], or NULL for any name) limits the draw to names the worker can run.
-- Either may be One(v): specialized, its filter is then an equality, which
-- lets one queue walk cairnq_tasks_claim_idx in claim order instead of
-- sorting, and one name read cairnq_tasks_claim_name_idx.
-- SKIP LOCKED keeps concurrent claimers off each other's rows. clock_timestamp()
-- rather than now(): the transaction may have waited on locks since it began.
-- Order: priority, then due time, then id, so ties resolve deterministically.
-- status stays a constant here, unlike claim_window.sql's (package
-- protocol, "Claims on Postgres" says why).
-- A claim commits durably like every other write: the worker starts
-- handlers on the rows it returns, so a claim lost in a server crash would
-- run those tasks again on the same attempt.
-- Inside the statement rather than a SET LOCAL before it, so a claim can
-- be a single round trip.
UPDATE cairnq_tasks AS task
SET status         = 'running',
    worker_id      = :worker_id,
    lease_until_ms = CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint) + :lease_ms,
    attempt        = attempt + 1,
    updated_at_ms  = CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)
FROM (
    SELECT id
    FROM cairnq_tasks
    WHERE status = 'queued'
      AND queue = ANY (:queues::text[])
      AND (:names::text[] IS NULL OR name = ANY (:names::text[]))
      AND run_at_ms <= CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)
    ORDER BY priority DESC, run_at_ms ASC, id ASC
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
) AS pick
WHERE task.id = pick.id
RETURNING task.*;
