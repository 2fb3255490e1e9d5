-- Pause a queue for every Go worker on the database (ours, beside the
-- protocol's): a cairnq_meta row keyed cairnq:paused:<queue>, its value
-- the pause as JSON. A queue paused already keeps its row, and either way
-- the row in force comes back, read in the same statement so that a
-- resume in between cannot leave nothing to return.
INSERT INTO cairnq_meta (key, value) VALUES (:key, :value)
ON CONFLICT (key) DO UPDATE SET value = cairnq_meta.value
RETURNING value;
