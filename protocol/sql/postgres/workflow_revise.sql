-- Write a workflow's definition back into its record's payload (the
-- advance's ledger, steps a step added), while the record has not ended;
-- no row back means it has.
UPDATE cairnq_tasks
SET payload       = CAST(:payload AS jsonb),
    updated_at_ms = CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)
WHERE id = :id
  AND status IN ('queued', 'running')
RETURNING id;
