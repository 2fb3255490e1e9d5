-- A cairnq_meta row of ours written over what it held (ours, beside the
-- protocol's): a Go worker's beat (cairnq:worker:<id>), a periodic
-- schedule's (cairnq:schedule:<entry id>). The value is JSON.
INSERT INTO cairnq_meta (key, value) VALUES (:key, :value)
ON CONFLICT (key) DO UPDATE SET value = excluded.value;
