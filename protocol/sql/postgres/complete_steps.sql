-- Ours, beside the protocol's: complete_many for a group that holds
-- steps of this SDK's workflows, and in the same statement each step's
-- succeeded key pointed at its record, as upsert_keys would point it:
-- :marked_keys[i] at :marked_records[i] for the task :marked_ids[i], if
-- the update left that task succeeded (a cancel requested leaves it
-- canceled; a lease gone leaves it out) and the record lives (one ended
-- needs no ledger, and one purged has no row a key may point at). A
-- group of steps then costs one round trip fewer. What it returns is
-- complete_many's. A task twice in the group marks its key once. The
-- update is complete_many's to the letter
-- (TestCompleteStepsUpdatesAsCompleteMany).
WITH settled AS (
    UPDATE cairnq_tasks AS task
    SET status          = CASE WHEN task.cancel_requested_at_ms IS NOT NULL THEN 'canceled' ELSE 'succeeded' END,
        result          = CASE WHEN task.cancel_requested_at_ms IS NOT NULL THEN task.result ELSE CAST(done.result AS jsonb) END,
        progress        = CASE WHEN task.cancel_requested_at_ms IS NOT NULL THEN task.progress ELSE 1.0 END,
        lease_until_ms  = NULL,
        completed_at_ms = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint),
        updated_at_ms   = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
    FROM (SELECT *
          FROM unnest(:ids::text[], :worker_ids::text[], :results::text[]) AS each_task (id, worker_id, result)
          LIMIT cardinality(:ids::text[])) AS done
    WHERE task.id = done.id
      AND (task.status = 'running'
           AND task.worker_id = done.worker_id
           AND task.lease_until_ms > CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)) IS TRUE
    RETURNING task.id, task.status
), marked AS (
    INSERT INTO cairnq_task_keys (key, task_id, created_at_ms, updated_at_ms)
    SELECT DISTINCT ON (mark.key) mark.key, mark.record_id,
           CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint), CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
    FROM unnest(:marked_ids::text[], :marked_keys::text[], :marked_records::text[]) AS mark (id, key, record_id)
    JOIN settled ON settled.id = mark.id AND settled.status = 'succeeded'
    JOIN cairnq_tasks AS rec ON rec.id = mark.record_id AND rec.status IN ('queued', 'running')
    ON CONFLICT (key) DO UPDATE
    SET task_id       = excluded.task_id,
        updated_at_ms = excluded.updated_at_ms
)
SELECT settled.id, settled.status FROM settled;
