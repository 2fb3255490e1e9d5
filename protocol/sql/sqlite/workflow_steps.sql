-- The steps of the workflows whose records are :record_ids, narrowly:
-- each task a step's key (cairnq:workflow:<record>:<step>) points at
-- whose parent is the record, with its record, the step's name (from its
-- key), status, attempt and last update. The keys of one record are one
-- range of the keys' primary key (BINARY collation: ';' follows ':'),
-- which spares SQLite parsing every step's metadata for the name, as
-- reading by root would. The record's own key (an empty step name) is
-- left out.
SELECT rec.value AS record_id, task.id, task.status, task.attempt, task.updated_at_ms,
       substr(ptr.key, length('cairnq:workflow:' || rec.value || ':') + 1) AS step
FROM json_each(:record_ids) AS rec
JOIN cairnq_task_keys AS ptr
  ON ptr.key > 'cairnq:workflow:' || rec.value || ':'
 AND ptr.key < 'cairnq:workflow:' || rec.value || ';'
JOIN cairnq_tasks AS task ON task.id = ptr.task_id
WHERE task.parent_id = rec.value;
