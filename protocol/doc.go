// Package protocol holds the cairnq v1 wire protocol as data: the schema
// migrations and the state-transition statements, one embedded SQL file per
// statement and dialect, plus the small compiler that turns their :name
// parameters into the positional form a driver binds.
//
// # What it promises
//
// The schema the migrations build is the one every other cairnq SDK builds:
// the same tables, columns, types, defaults, CHECK constraints, foreign key,
// index names and shapes, trigger (Postgres), cairnq_meta rows, and the same
// migration names, which is what a shared ledger records. Each statement has
// the same effect and the same result columns as its counterpart in the other
// SDKs, so processes written in different languages can share one database.
// The texts are this package's own; the behaviour is the contract.
//
// # Files
//
//	sql/<dialect>/<name>.sql        one statement each, :name parameters
//	migrations/<dialect>/NNNN_*.sql  multi-statement scripts, no parameters,
//	                                 applied in file name order
//
// A statement goes by its file's base name, Statements(d).Get("claim"):
// the names are the files', not a vocabulary this package exports.
//
// Both dialects ship the same statements, except installations, which exists
// on Postgres only. Migration ordinals are shared: 0003 (the notify trigger)
// exists on Postgres only. Beside the protocol's statements are a few of this
// SDK's own, which move no version: complete_many (both; grouped
// settlements, taking the group in each dialect's list form), insert_many
// (both, in each dialect's list form: a text[] per column on Postgres, a
// JSON array of rows on SQLite; grouped submits and the new tasks of a
// SubmitMany batch on Postgres where COPY does not carry them, a
// workflow's new steps on both, on Postgres likewise),
// upsert_keys (both, likewise: upsert_key for several keys, each pointed
// at the task id at its place in a parallel array on Postgres, as
// [key, task_id] pairs on SQLite), the rest of a batch's statements,
// Postgres only: complete_steps (complete_many for a group holding
// workflows' steps, which in the same statement points the succeeded key
// of each step its update left succeeded, whose record lives, at that
// record), lock_keys (lock_key's advisory lock on each of several
// keys, taken in ascending order of the lock's hash so that transactions
// locking overlapping keys wait instead of deadlocking), get_by_keys
// (get_by_key for several keys, each row the task a key points at with
// that key as task_key; a key without a task has no row), clock_ms
// (the database clock, for a batch's new tasks, or a workflow's new
// steps and their free keys, written by COPY) and
// task_json (the JSON of some of those tasks as the server keeps it),
// expired_leases, queue_ages and
// recent_failures (both; read-only, for operators: cairnq doctor),
// get_status_many (both; read-only, the status of many tasks at once for
// waits polling together), and
// snooze (both; a worker write, ownership-checked like fail, that puts a
// running task back to queued with its attempt given back; for a durable
// wait, :event names an event whose arrival keeps the task running), two
// that read past what a held snapshot keeps (Postgres only): claim_window
// and claimable_probe_window (claim and claimable_probe from a known
// front of the queue), purge_from (both; purge for the SDK's own
// purges, which keeps every task of a workflow whose record has not
// ended, and on Postgres starts from a floor of completion times,
// returning each row's completed_at_ms), eleven for a workflow's advance
// and sweep (both; internal/engine's workflow files): claim_ids (claim's
// lease on the queued tasks among ids, whatever their due time, due now
// if they were not yet), workflow_steps (the steps of a list of records:
// each one's record, id, status, attempt, last update and the step's
// name, on Postgres by root and from
// metadata's cairnq_workflow member, on SQLite through the range of the
// steps' keys), workflow_look (the id and status of the tasks some keys
// point at, with when each key last moved, reading no payload: an
// advance from one settled step), workflow_touch (a record's own key
// moved past its last value: its definition changed), workflow_forget
// (keys deleted: the ledger keys of steps a resume runs again),
// workflow_finish (a queued record claimed and completed at once, with
// its definition written: every step succeeded), workflow_heads (the
// records some workflows' own keys point at, whole, with when each key
// last moved: a process's first read of a workflow),
// workflow_revise (a live record's payload rewritten), workflow_due (the
// ids of the records due for a sweep, a read), workflow_ended (the
// records of ended workflows from a floor of completion times, each with
// whether a step moved since, a read) and workflow_ended_by_status
// (workflow_ended over every record that ended failed, or canceled, in
// the claim index's order), and two for a global
// limit's claim (both): limit_running (a name's tasks running under a
// live lease, per value of a metadata member) and limit_pick (the due
// candidates of the tenants with room, in claim order), and two for a
// durable handler (both; issue 48): durable_step (a worker write,
// ownership-checked like progress, that appends a finished step to the
// steps of metadata's cairnq_durable member when it holds exactly
// :position of them; durable_step_many, Postgres only, appends the steps
// of many tasks in one statement) and durable_event (an event delivered to a task that
// has not ended, once per name, into the member's events, waking the task
// when it waits for it); the format is in docs/plans/durable-execution.md;
// and three for a queue paused for every Go worker (both; issue 50), on
// cairnq_meta rather than the tasks: queue_pause (insert the queue's
// row, keeping one there, and return the row in force), meta_rows (read the rows under a key
// prefix: the pauses, and the workers' beats) and queue_resume (delete the queue's row, returning it); the
// format is in internal/engine/pause.go; meta_put and meta_delete (both;
// issue 50: write a cairnq_meta row over what it held, delete one), for
// a Go worker's beat and a periodic schedule's row (docs/operators.md
// has their formats); and delete_task (both; issue 50), an operator's
// delete of one task no worker holds and no live workflow needs, its
// keys going with it, cancel_matching (both; issue 50), a bulk cancel's
// cancel of one task while it still matches, and fail_recorded (both;
// issue 50), fail with the attempt's error appended to metadata's
// cairnq_errors member (internal/engine/attempt_errors.go has the format).
//
// # Parameters
//
// A caller passes one dialect-neutral Args superset and each statement binds
// the names its own text uses (Statement.Params). The dialects differ only in
// where time comes from:
//
//   - SQLite takes absolute times from the SDK clock: now_ms, lease_until_ms
//     (claim and heartbeat statements), run_at_ms (insert_task) and before_ms
//     (purge, recent_failures). List-valued parameters (queues, names, ids) are JSON array text
//     read with json_each. Booleans (retryable, reset_attempt) are 0/1.
//   - Postgres takes time from the database clock and relative durations from
//     the caller: lease_ms, delay_ms (insert_task; fail has it on both),
//     older_than_ms (purge, recent_failures). List-valued parameters are text[]; booleans are
//     booleans; JSON values are cast to jsonb. lock_key takes key (lock_keys:
//     keys) on Postgres only, since on SQLite BEGIN IMMEDIATE already
//     serializes. claimable_probe and claimable_probe_window take
//     look_for_expired on Postgres only: false leaves out the read for an
//     expired lease (has_expired is then false), which grows under a held
//     snapshot and which a worker paces; on SQLite that read is one index
//     seek.
//
// # Filters Specialize rewrites
//
// SQLite plans a statement before its parameters have values, and neither
// planner seeks an index through a predicate that must also serve every
// other value its parameter might take. So the filters that narrow a draw
// or a listing are written in exactly one shape each, which Specialize
// recognizes token by token (keywords in any case, whitespace free, col
// optionally qualified as alias.col or quoted) and rewrites, for the
// arguments at hand, to an equality an index can serve:
//
//	optional filter: (col = :p) when :p is non-NULL
//	  SQLite:   (:p IS NULL OR col = :p)
//	  Postgres: (:p::text IS NULL OR col = :p)
//	list filter: col = :p when :p's argument is One(v)
//	  SQLite:   col IN (SELECT value FROM json_each(:p))
//	            (:p IS NULL OR col IN (SELECT value FROM json_each(:p)))
//	  Postgres: col = ANY (:p::text[])
//	            (:p::text[] IS NULL OR col = ANY (:p::text[]))
//
// list (status, queue, name, root_id, correlation_id), purge (queue, status,
// name) and stats (queue) carry optional filters; claim and claimable_probe
// carry list filters on queues and names, get_status_many and
// heartbeat_batch on ids. A list filter counts only as a term of an AND/OR
// chain and only when its parameter appears nowhere else in the statement,
// since a single value cannot stand in for the list anywhere else; Bind
// refuses a One the statement was not specialized for.
//
// # Ownership checks on Postgres
//
// Every write a worker makes to a task it holds (complete, complete_many,
// complete_steps, fail, succeed, snooze, progress, heartbeat,
// heartbeat_batch) matches the
// task by id and checks that it is running, held by the worker and within
// its lease. On Postgres that check is written as one (... AND ...) IS TRUE,
// which selects the same rows as the bare conjunction but is a predicate no
// index serves, so the planner finds each row through the primary key
// (heartbeat_batch's generic plan on a table never analyzed may scan it
// instead, until the first ANALYZE: its id = ANY list filter is what
// Specialize rewrites, and it runs once a beat, not once a task).
// Bare, the planner, counting few running tasks, reads
// cairnq_tasks_lease_idx for every unexpired lease and filters the ids out
// of those; while a long transaction holds back vacuum, that index keeps an
// entry for every task claimed within a lease, each one read back from the
// heap: with 20,000 tasks claimed and settled under a held snapshot, a
// settlement of 20 read 492 buffers, and 88 by the key
// (TestCompleteManySkipsLeaseEntriesAHeldSnapshotKeeps in internal/engine;
// docs/benchmarks.md, "Sustained load", for what it costs a worker).
//
// # Claims on Postgres
//
// A draw of one queue reads cairnq_tasks_claim_idx (claim_name_idx for
// one name) from where it starts, in claim order, and stops at its limit.
// With status = 'queued' written as a constant the planner prices that
// against reading every queued task through
// cairnq_tasks_status_completed_idx and sorting them, by statistics that
// count the queued tasks as of the last ANALYZE: when those say few (a
// backlog that formed since, or a table of mostly finished tasks), both
// cost about one row and the smaller index wins, by the depth of the
// tree alone. Each draw then reads the whole backlog; draws slow, the
// backlog grows, and it feeds itself until the next ANALYZE (in a held
// snapshot's hold, 27,152 queued rows read and sorted for 4 taken:
// docs/benchmarks.md, "Sustained load"). So claim_window and
// claimable_probe_window compare status with (SELECT 'queued'::text), a
// value the planner cannot look up in the statistics: it counts a share
// of the table per status instead, and a draw that stops at its limit in
// index order costs far less than one that reads them all. The probe's
// legs take the first task in claim order (ORDER BY ... LIMIT 1), not
// EXISTS, for which a scan of the table that expects a match soon would
// cost least. claim and claimable_probe, the full draws (a draw shape's
// first, then one at least every second and one after a draw that came
// back short; internal/engine's claim_front.go spaces slow ones), keep
// the constant. For several queues no index gives claim order (queue =
// ANY gives none) and, with a share of the table counted per status, a
// scan of the whole table would cost least. And the hidden value does not
// help a table never analyzed, whose statistics are defaults that count
// every status as rare: there the status index, a single page while the
// claim index has a root above its leaves, still wins. A worker whose
// full draws went through the window statements from its first claim
// cached that plan and fell seconds behind until the first autovacuum
// ANALYZE (pickup p99 5.8 s in its first minute at 2,400 tasks/s, 11.9
// ms with claim.sql's). TestClaimsReadTheClaimIndexes in internal/engine
// checks the window statements' plans.
//
// # Compiled text
//
// Compile strips comments, collapses whitespace and numbers parameters in
// first-use order: ?1..?N on SQLite and $1..$N on Postgres, a repeated name
// reusing its number. Statement.Write tells reads (SELECT) from everything
// else, which the SQLite store routes to its single writer.
package protocol
