-- Headroom under :max_depth for one queue. Counting through a LIMIT bounds the
-- read to :max_depth index entries, and the result never drops below zero.
SELECT :max_depth - count(*) AS headroom
FROM (
    SELECT 1
    FROM cairnq_tasks
    WHERE queue = :queue AND status = 'queued'
    LIMIT :max_depth
) AS capped;
