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
        WHEN :retryable = 1 AND attempt < max_attempts THEN 'queued'
        ELSE 'failed'
    END,
    error = :error,
    metadata = CASE
        WHEN json_type(coalesce(metadata, '{}')) <> 'object' THEN metadata
        -- Past a mebibyte (a durable task's record) the history is not
        -- kept: each failure would rewrite it all, and push it towards
        -- the value limit its own writes check.
        WHEN length(metadata) > 1048576 THEN metadata
        -- json(): a subquery's value reaches json_set as text, which it
        -- would store as a JSON string.
        ELSE json_set(coalesce(metadata, '{}'), '$.cairnq_errors', json((
            SELECT json_group_array(json(kept.value) ORDER BY kept.k)
            FROM (
                SELECT all_.value, all_.k
                FROM (
                    SELECT value, CAST(key AS INTEGER) AS k
                    FROM json_each(CASE WHEN json_type(metadata, '$.cairnq_errors') = 'array'
                                        THEN json_extract(metadata, '$.cairnq_errors') ELSE '[]' END)
                    WHERE type = 'object' -- an entry of another writer's that is none is dropped
                    UNION ALL
                    SELECT json_set(json(:entry), '$.attempt', attempt, '$.at_ms', :now_ms), 2147483647
                ) AS all_
                ORDER BY all_.k DESC
                LIMIT 10
            ) AS kept)))
    END,
    worker_id = CASE
        WHEN cancel_requested_at_ms IS NULL AND :retryable = 1 AND attempt < max_attempts THEN NULL
        ELSE worker_id
    END,
    lease_until_ms = NULL,
    run_at_ms = CASE
        WHEN cancel_requested_at_ms IS NULL AND :retryable = 1 AND attempt < max_attempts THEN :now_ms + :delay_ms
        ELSE run_at_ms
    END,
    completed_at_ms = CASE
        WHEN cancel_requested_at_ms IS NULL AND :retryable = 1 AND attempt < max_attempts THEN NULL
        ELSE :now_ms
    END,
    progress = CASE
        WHEN cancel_requested_at_ms IS NULL AND :retryable = 1 AND attempt < max_attempts THEN NULL
        ELSE progress
    END,
    message = CASE
        WHEN cancel_requested_at_ms IS NULL AND :retryable = 1 AND attempt < max_attempts THEN NULL
        ELSE message
    END,
    updated_at_ms = :now_ms
WHERE id = :id
  AND status = 'running'
  AND worker_id = :worker_id
  AND lease_until_ms > :now_ms
RETURNING *;
