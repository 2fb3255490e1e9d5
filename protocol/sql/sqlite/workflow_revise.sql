-- Write a workflow's definition back into its record's payload (the
-- advance's ledger, steps a step added), while the record has not ended;
-- no row back means it has.
UPDATE cairnq_tasks
SET payload       = :payload,
    updated_at_ms = :now_ms
WHERE id = :id
  AND status IN ('queued', 'running')
RETURNING id;
