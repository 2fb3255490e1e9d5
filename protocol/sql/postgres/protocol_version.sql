-- No row before the first migration has run.
SELECT value FROM cairnq_meta WHERE key = 'protocol_version';
