-- Every paused queue's row (ours, beside the protocol's): the cairnq_meta
-- rows whose key starts with :prefix. The table holds a handful of rows.
SELECT key, value FROM cairnq_meta
WHERE substr(key, 1, length(:prefix)) = :prefix;
