-- The cairnq_meta rows whose key starts with :prefix (ours, beside the
-- protocol's): the queues paused for the fleet (cairnq:paused:), the
-- workers' beats (cairnq:worker:). The table holds a row per paused
-- queue and per live worker.
SELECT key, value FROM cairnq_meta
WHERE substr(key, 1, length(:prefix)) = :prefix;
