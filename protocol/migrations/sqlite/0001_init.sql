-- Protocol v1 schema. Re-runnable: everything is IF NOT EXISTS and the meta
-- rows are only seeded when missing. Times are epoch milliseconds; JSON
-- columns are text checked with json_valid().
CREATE TABLE IF NOT EXISTS cairnq_tasks (
    id                     text PRIMARY KEY,
    name                   text NOT NULL,
    queue                  text NOT NULL DEFAULT 'default',
    status                 text NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'canceled')),
    payload                text NOT NULL CHECK (json_valid(payload)),
    result                 text CHECK (result IS NULL OR json_valid(result)),
    error                  text CHECK (error IS NULL OR json_valid(error)),
    metadata               text NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
    progress               real,
    message                text,
    attempt                integer NOT NULL DEFAULT 0,
    max_attempts           integer NOT NULL DEFAULT 3,
    priority               integer NOT NULL DEFAULT 0,
    worker_id              text,
    lease_until_ms         integer,
    run_at_ms              integer NOT NULL,
    cancel_requested_at_ms integer,
    parent_id              text,
    root_id                text,
    correlation_id         text,
    created_at_ms          integer NOT NULL,
    updated_at_ms          integer NOT NULL,
    completed_at_ms        integer
);

-- Original claim index; 0008 rebuilds it under the same name.
CREATE INDEX IF NOT EXISTS cairnq_tasks_claim_idx ON cairnq_tasks (queue, status, priority DESC, created_at_ms);
-- Dropped again by 0010.
CREATE INDEX IF NOT EXISTS cairnq_tasks_status_idx ON cairnq_tasks (status);
CREATE INDEX IF NOT EXISTS cairnq_tasks_name_idx ON cairnq_tasks (name);
CREATE INDEX IF NOT EXISTS cairnq_tasks_root_idx ON cairnq_tasks (root_id);
CREATE INDEX IF NOT EXISTS cairnq_tasks_correlation_idx ON cairnq_tasks (correlation_id);

-- A key points at the task that currently answers for it. A separate table
-- rather than a unique column, so a key can be repointed; it dies with its task.
CREATE TABLE IF NOT EXISTS cairnq_task_keys (
    key           text PRIMARY KEY,
    task_id       text NOT NULL REFERENCES cairnq_tasks (id) ON DELETE CASCADE,
    created_at_ms integer NOT NULL,
    updated_at_ms integer NOT NULL
);

CREATE TABLE IF NOT EXISTS cairnq_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

INSERT INTO cairnq_meta (key, value) VALUES ('protocol_version', '1') ON CONFLICT (key) DO NOTHING;
INSERT INTO cairnq_meta (key, value) VALUES ('schema_version', '1') ON CONFLICT (key) DO NOTHING;
