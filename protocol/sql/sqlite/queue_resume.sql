-- Lift a queue's pause (ours, beside the protocol's): delete its
-- cairnq_meta row, returning it.
DELETE FROM cairnq_meta WHERE key = :key
RETURNING value;
