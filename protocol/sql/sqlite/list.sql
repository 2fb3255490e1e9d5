-- Newest first. Each filter is optional (NULL skips it); id breaks timestamp
-- ties so offset paging neither repeats nor skips.
SELECT *
FROM cairnq_tasks
WHERE (:status IS NULL OR status = :status)
  AND (:queue IS NULL OR queue = :queue)
  AND (:name IS NULL OR name = :name)
  AND (:root_id IS NULL OR root_id = :root_id)
  AND (:correlation_id IS NULL OR correlation_id = :correlation_id)
ORDER BY created_at_ms DESC, id DESC
LIMIT :limit OFFSET :offset;
