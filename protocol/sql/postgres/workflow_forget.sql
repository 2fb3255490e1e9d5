-- Ours, beside the protocol's: delete the keys :keys (a workflow's ledger
-- and succeeded keys of steps a resume runs again, which their marks
-- would otherwise keep from being submitted).
DELETE FROM cairnq_task_keys
WHERE key = ANY (:keys::text[]);
