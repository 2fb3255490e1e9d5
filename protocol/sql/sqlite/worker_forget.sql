-- A Go worker's row deleted (ours, beside the protocol's): by the worker
-- as it stops, or by another long after its last beat.
DELETE FROM cairnq_meta WHERE key = :key;
