-- The steps of the workflows whose records are :record_ids, narrowly:
-- each task a step's key (cairnq:workflow:<record>:<step>) points at
-- whose parent is the record, with its record, the step's name (from its
-- key), status, attempt and last update. The keys of one record are one
-- range of the keys' primary key (BINARY collation: ';' follows ':'),
-- which spares SQLite parsing every step's metadata for the name, as
-- reading by root would. The record's own key (an empty step name) is
-- left out. Each record's id and key range are worked out once, in a
-- subquery DISTINCT keeps from being flattened into the join: read from
-- json_each in the join, they were parsed again for every step row,
-- about a tenth of a wide workflow's read (docs/benchmarks.md, "Workflows
-- at scale").
SELECT rec.id AS record_id, task.id, task.status, task.attempt, task.updated_at_ms,
       substr(ptr.key, length(rec.low) + 1) AS step
FROM (SELECT DISTINCT value AS id, 'cairnq:workflow:' || value || ':' AS low,
             'cairnq:workflow:' || value || ';' AS high
      FROM json_each(:record_ids)) AS rec
JOIN cairnq_task_keys AS ptr ON ptr.key > rec.low AND ptr.key < rec.high
JOIN cairnq_tasks AS task ON task.id = ptr.task_id
WHERE task.parent_id = rec.id;
