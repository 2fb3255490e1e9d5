-- Pause a queue for every Go worker on the database (ours, beside the
-- protocol's): a cairnq_meta row keyed cairnq:paused:<queue>, its value
-- the pause as JSON. A queue paused already keeps its first row.
INSERT INTO cairnq_meta (key, value) VALUES (:key, :value)
ON CONFLICT (key) DO NOTHING;
