-- Ours, beside the protocol's: workflows' queued records claimed and
-- completed in one statement, by the advance that found every step of
-- each succeeded, where claim_ids, workflow_revise, workflow_touch and
-- complete took four round trips per record under the workflows' locks.
-- Each record's definition (its ledger, and ended) goes into its payload
-- and its result beside it; each row ends as those statements leave it
-- (the attempt counted, the worker named, the lease cleared, a cancel
-- request winning as in complete), and the record's own key (:keys, in
-- the order of :ids) moves as workflow_touch moves it. A record no
-- longer queued (canceled meanwhile by another SDK, which takes no
-- workflow lock) is left as it is and has no row; this waits for its
-- row rather than skip it.
WITH done AS (
    SELECT *
    FROM unnest(:ids::text[], :payloads::text[], :results::text[], :worker_ids::text[], :keys::text[])
         AS each_record (id, payload, result, worker_id, key)
    LIMIT cardinality(:ids::text[])
), finished AS (
    UPDATE cairnq_tasks AS task
    SET status          = CASE WHEN task.cancel_requested_at_ms IS NOT NULL THEN 'canceled' ELSE 'succeeded' END,
        payload         = CAST(done.payload AS jsonb),
        result          = CASE WHEN task.cancel_requested_at_ms IS NOT NULL THEN task.result ELSE CAST(done.result AS jsonb) END,
        progress        = CASE WHEN task.cancel_requested_at_ms IS NOT NULL THEN task.progress ELSE 1.0 END,
        worker_id       = done.worker_id,
        lease_until_ms  = NULL,
        run_at_ms       = LEAST(task.run_at_ms, CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)),
        attempt         = task.attempt + 1,
        completed_at_ms = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint),
        updated_at_ms   = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
    FROM done
    WHERE task.id = done.id
      AND task.status = 'queued'
    RETURNING task.*
), touched AS (
    UPDATE cairnq_task_keys AS ptr
    SET updated_at_ms = GREATEST(ptr.updated_at_ms + 1, CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint))
    FROM done
    JOIN finished ON finished.id = done.id
    WHERE ptr.key = done.key
)
SELECT * FROM finished;
