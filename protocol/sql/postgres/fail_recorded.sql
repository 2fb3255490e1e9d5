-- A Go worker's failed attempt (ours, beside the protocol's): as fail.sql
-- records one on a task the caller still owns, and besides, the attempt's
-- error appended to metadata's cairnq_errors member, an array of
-- {"attempt", "at_ms", "type", "code", "message"} (:entry gives the last
-- three, the message cut short), of which the newest ten are kept, so
-- that every attempt's error can be read after the next overwrites the
-- error column. Metadata that is no JSON object, or past a mebibyte, is
-- left as it is.
UPDATE cairnq_tasks
SET status = CASE
        WHEN cancel_requested_at_ms IS NOT NULL THEN 'canceled'
        WHEN :retryable AND attempt < max_attempts THEN 'queued'
        ELSE 'failed'
    END,
    error = :error::jsonb,
    metadata = CASE
        WHEN jsonb_typeof(coalesce(metadata, '{}'::jsonb)) <> 'object' THEN metadata
        -- Past a mebibyte (a durable task's record) the history is not
        -- kept: each failure would rewrite it all, and push it towards
        -- the value limit its own writes check.
        WHEN pg_column_size(metadata) > 1048576 THEN metadata
        ELSE jsonb_set(coalesce(metadata, '{}'::jsonb), '{cairnq_errors}', (
            SELECT coalesce(jsonb_agg(kept.e ORDER BY kept.i), '[]'::jsonb)
            FROM (
                SELECT all_.e, all_.i
                FROM jsonb_array_elements(
                    CASE WHEN jsonb_typeof(metadata -> 'cairnq_errors') = 'array'
                         THEN metadata -> 'cairnq_errors' ELSE '[]'::jsonb END
                    || jsonb_build_array(:entry::jsonb || jsonb_build_object(
                        'attempt', attempt,
                        'at_ms', CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)))
                ) WITH ORDINALITY AS all_(e, i)
                WHERE jsonb_typeof(all_.e) = 'object' -- an entry of another writer's that is none is dropped
                ORDER BY all_.i DESC
                LIMIT 10
            ) AS kept))
    END,
    worker_id = CASE
        WHEN cancel_requested_at_ms IS NULL AND :retryable AND attempt < max_attempts THEN NULL
        ELSE worker_id
    END,
    lease_until_ms = NULL,
    run_at_ms = CASE
        WHEN cancel_requested_at_ms IS NULL AND :retryable AND attempt < max_attempts THEN CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint) + :delay_ms
        ELSE run_at_ms
    END,
    completed_at_ms = CASE
        WHEN cancel_requested_at_ms IS NULL AND :retryable AND attempt < max_attempts THEN NULL
        ELSE CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
    END,
    progress = CASE
        WHEN cancel_requested_at_ms IS NULL AND :retryable AND attempt < max_attempts THEN NULL
        ELSE progress
    END,
    message = CASE
        WHEN cancel_requested_at_ms IS NULL AND :retryable AND attempt < max_attempts THEN NULL
        ELSE message
    END,
    updated_at_ms = CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)
WHERE id = :id
  AND (status = 'running'
       AND worker_id = :worker_id
       AND lease_until_ms > CAST(EXTRACT(EPOCH FROM now()) * 1000 AS bigint)) IS TRUE
RETURNING *;
