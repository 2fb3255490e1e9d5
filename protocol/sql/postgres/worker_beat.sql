-- A Go worker's beat (ours, beside the protocol's): its cairnq_meta row,
-- keyed cairnq:worker:<worker id>, its value who it is and when it last
-- beat, as JSON, written over the last beat.
INSERT INTO cairnq_meta (key, value) VALUES (:key, :value)
ON CONFLICT (key) DO UPDATE SET value = excluded.value;
