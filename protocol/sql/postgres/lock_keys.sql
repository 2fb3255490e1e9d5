-- Ours, beside the protocol's: lock_key's advisory lock on each of several
-- keys for the rest of the transaction, taken one at a time in ascending
-- order of the lock's hash, so that two transactions locking overlapping
-- sets of keys wait for each other instead of deadlocking. The order is
-- the hash's, not the key's: two keys may hash to one lock. The ORDER BY
-- keeps the subquery from being flattened, so the outer query takes the
-- locks in its order. One row per lock.
SELECT pg_advisory_xact_lock(sorted.lock) AS locked
FROM (SELECT DISTINCT hashtextextended(k, 0) AS lock
      FROM unnest(:keys::text[]) AS k
      ORDER BY 1) AS sorted;
