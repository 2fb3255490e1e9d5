-- Wake sleeping workers and waiters, whichever SDK wrote the row:
--   cairnq_queued, payload = queue, when a task is inserted queued or moves
--     back to queued from another status;
--   cairnq_done, payload = task id, when a task enters a terminal status.
-- Listeners treat these as hints only; polling stays the guarantee.
-- The WHEN clause keeps claims (-> running) out of plpgsql entirely, and
-- UPDATE OF status keeps heartbeats and progress from firing at all.
-- Leaves schema_version alone.
CREATE OR REPLACE FUNCTION cairnq_notify() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    IF NEW.status = 'queued' AND (TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM NEW.status) THEN
        PERFORM pg_notify('cairnq_queued', NEW.queue);
    ELSIF TG_OP = 'UPDATE'
          AND NEW.status IN ('succeeded', 'failed', 'canceled')
          AND OLD.status NOT IN ('succeeded', 'failed', 'canceled') THEN
        PERFORM pg_notify('cairnq_done', NEW.id);
    END IF;
    RETURN NULL;
END;
$fn$;

DROP TRIGGER IF EXISTS cairnq_tasks_notify ON cairnq_tasks;
CREATE TRIGGER cairnq_tasks_notify
    AFTER INSERT OR UPDATE OF status ON cairnq_tasks
    FOR EACH ROW
    WHEN (NEW.status IS DISTINCT FROM 'running')
    EXECUTE FUNCTION cairnq_notify();
