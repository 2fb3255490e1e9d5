-- Where this connection resolves, and every schema already holding a cairnq
-- table, so a connect can notice it is about to start a second installation.
-- Always at least one row; schema is NULL when there is none anywhere.
SELECT CAST(current_schema() AS text) AS current_schema,
       found.schema
FROM (SELECT 1) AS anchor
LEFT JOIN (
    SELECT CAST(ns.nspname AS text) AS schema
    FROM pg_class AS rel
    JOIN pg_namespace AS ns ON ns.oid = rel.relnamespace
    WHERE rel.relname = 'cairnq_tasks'
      AND rel.relkind = 'r'
) AS found ON TRUE
ORDER BY found.schema;
