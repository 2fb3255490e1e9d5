-- A cairnq_meta row of ours deleted (ours, beside the protocol's): a
-- worker's as it stops, or a worker's or schedule's long silent.
DELETE FROM cairnq_meta WHERE key = :key;
