-- Ours, beside the protocol's: send one notification, as the 0003 trigger
-- does for a task, so that a process can prove its LISTEN connection
-- receives what the server sends (behind a transaction-mode pooler it
-- never does). The cast gives the void result a type every driver reads.
SELECT CAST(pg_notify(:channel, :payload) AS text) AS sent;
