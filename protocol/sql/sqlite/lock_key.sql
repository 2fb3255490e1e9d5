-- Nothing to lock: BEGIN IMMEDIATE already serializes keyed transactions.
-- Kept so keyed operations can take the key lock the same way on every dialect.
SELECT 1 AS locked;
