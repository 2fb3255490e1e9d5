-- The steps of the workflow whose record is :record_id, narrowly: each
-- task a step's key (cairnq:workflow:<record>:<step>) points at whose
-- parent is the record, with the step's name (from its key), status,
-- attempt and last update. The keys of one record are one range of the keys' primary
-- key (BINARY collation: ';' follows ':'), which spares SQLite parsing
-- every step's metadata for the name, as reading by root would. The
-- record's own key (an empty step name) is left out.
SELECT task.id, task.status, task.attempt, task.updated_at_ms,
       substr(ptr.key, length('cairnq:workflow:' || :record_id || ':') + 1) AS step
FROM cairnq_task_keys AS ptr
JOIN cairnq_tasks AS task ON task.id = ptr.task_id
WHERE ptr.key > 'cairnq:workflow:' || :record_id || ':'
  AND ptr.key < 'cairnq:workflow:' || :record_id || ';'
  AND task.parent_id = :record_id;
