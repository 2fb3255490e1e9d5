-- Serialize keyed operations on one key for the rest of the transaction: with
-- no key row yet there is nothing else to lock. Every SDK must take this same
-- advisory lock for the serialization to hold across languages.
SELECT pg_advisory_xact_lock(hashtextextended(:key::text, 0));
