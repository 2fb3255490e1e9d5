-- Newest first. Each filter is optional (NULL skips it; the ::text cast gives
-- the parameter a type for the IS NULL test); id breaks timestamp ties so
-- offset paging neither repeats nor skips.
SELECT *
FROM cairnq_tasks
WHERE (:status::text IS NULL OR status = :status)
  AND (:queue::text IS NULL OR queue = :queue)
  AND (:name::text IS NULL OR name = :name)
  AND (:root_id::text IS NULL OR root_id = :root_id)
  AND (:correlation_id::text IS NULL OR correlation_id = :correlation_id)
ORDER BY created_at_ms DESC, id DESC
LIMIT :limit OFFSET :offset;
