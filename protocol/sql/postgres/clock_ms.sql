-- Our addition beside the protocol's statements: the database clock in
-- epoch milliseconds, read as insert_many reads it, for rows the SDK
-- writes by COPY (which evaluates no expression per row): a SubmitMany
-- batch's new tasks are created at this moment, due :delay_ms after it.
SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint) AS now_ms;
