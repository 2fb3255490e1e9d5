// Package cairnq is the Go SDK of cairnq, a durable task runtime whose API
// processes and worker processes coordinate only through one database:
// SQLite as the embedded default, Postgres when the work outgrows one host.
//
// It speaks cairnq protocol v1, so a Go process shares a database with the
// TypeScript and Python SDKs in either role: a Go API with a Python worker,
// a TypeScript API with a Go worker. Task names, queues, payloads (JSON)
// and the error envelope are the protocol's; nothing in a row is Go's own.
//
// # Quick start
//
// A Client submits tasks and reads them back; a Worker claims them and runs
// the handler registered for their name. Both open the same database,
// usually from different processes. In outline, errors unchecked (the
// package example quickStart is the whole program, run by go test):
//
//	// The API process.
//	c, err := cairnq.Open(ctx, "tasks.db", nil) // created if absent
//	defer c.Close()
//	t, err := c.Submit(ctx, "render", map[string]any{"page": 1}, nil)
//	done, err := c.Wait(ctx, t.ID, nil) // or c.Call: submit and wait
//
//	// The worker process, on the same file.
//	c, err := cairnq.Open(ctx, "tasks.db", nil)
//	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Concurrency: 8})
//	w.Handle("render", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
//		var p struct{ Page int }
//		if err := tc.Decode(&p); err != nil {
//			return nil, cairnq.Permanent(err) // retrying will not help
//		}
//		return map[string]int{"pages": 1}, nil // stored as the task's result
//	}, nil)
//	err = w.Run(ctx) // until ctx ends, then drains what is running
//
// Wait returns the task once it ends, whatever its status, and
// [*TaskTimeoutError] when no worker finished it in time: check the error
// before reading the task. [Define] binds a name to Go types at both ends
// ([TaskDef.Submit], [TaskDef.Handle], [TaskDef.Call]); another SDK uses
// just the name.
//
// # Submitting
//
// [Client.Submit] stores a task and returns it queued. [SubmitOptions] picks
// the queue (default [DefaultQueue]), a priority (higher is claimed first),
// a delay, the number of attempts (default 3), metadata, and links to a
// parent, root and correlation id. A Key deduplicates: while a task with
// that key exists, a second submit follows Conflict ([ConflictReuse], the
// default, returns the existing task; [ConflictReject] fails with
// [ErrAlreadyExists]; [ConflictReplace] and [ConflictReuseSucceeded] as
// documented on them). [Options.MaxQueueDepth] makes Submit wait for room
// on a full queue, then fail with [ErrQueueFull].
//
// Values are JSON. A Go value is encoded with encoding/json; a
// json.RawMessage or a []byte is taken as JSON text. Values past the
// limits ([MaxValueBytes], [MaxJSONDepth], [MaxNameBytes], [MaxKeyBytes],
// NUL characters, invalid UTF-8) are refused before anything is written,
// identically on both backends (see Limits below).
//
// A Client reads tasks back ([Client.Get], [Client.GetByKey]; without the
// payload [Client.GetStatus], [Client.GetStatusByKey]; [Client.List] with
// filters; [Client.Stats], counts per queue and status), cancels
// ([Client.Cancel], [Client.CancelByKey]), queues failed and canceled tasks
// again ([Client.Retry], [Client.RetryByKey]) and deletes finished ones
// ([Client.Purge], or in the background with [Options].Retention).
// [Client.QueueHeadroom] says how much room a queue has below a depth.
//
// # Submitting many tasks
//
// [Client.SubmitMany] stores a batch of [SubmitItem]s (Submit's arguments
// as a value: a name, a payload, the item's own [SubmitOptions]) in one
// call and one transaction, and returns the tasks in the items' order;
// the ids of the tasks it writes sort in that order too. A batch does
// what the same Submits would do one after another in one transaction:
// an item whose key an earlier item used meets the task that item left,
// so [ConflictReuse] and [ConflictReuseSucceeded] return it (the same
// task twice in the result), [ConflictReplace] cancels it and writes a
// new one (the earlier item's result is that task as written, queued),
// and [ConflictReject] fails the batch. A bad item (an invalid argument,
// a key taken under reject, a hook refusing it) fails the whole call
// with a [*SubmitItemError] naming its Index and wrapping its Err, and
// nothing is written. At most [MaxSubmitMany] (10000) items go in one
// call; a longer batch is an [*ArgumentError], an empty one writes
// nothing. Submit hooks run once per item. [TaskDef.SubmitMany] submits
// one task per payload with the same options, [TaskDef.Item] makes a
// typed item for a batch of its own.
//
// [Client.SubmitManyTx] writes a batch inside a transaction the
// application holds, under a savepoint of it, so a batch that fails
// leaves nothing of itself and the transaction usable. It is Postgres
// only: on SQLite it returns [ErrUnsupported]. On Postgres a batch is a
// handful of statements whatever its size, its keys' advisory locks
// taken first in one fixed order, so that batches naming the same keys
// in different orders never deadlock. From the shell, cairnq submit
// --from FILE submits a task per line of a JSON Lines file this way.
//
// # Workers
//
// A [Worker] claims only the names it has handlers for, so workers with
// different handler sets, in any SDK, can share a queue. A claim leases the
// task ([WorkerOptions].LeaseDuration); the worker renews every lease it
// holds in one statement per heartbeat, and a task whose worker vanished is
// claimed again once its lease runs out. The handler's return settles the
// task:
//
//   - a value: succeeded, with the value as the result;
//   - an error: the attempt failed, and the task runs again after an
//     exponential backoff while attempts remain, unless the error is a
//     non-retryable [*TaskError] or wrapped by [Permanent];
//   - a panic: recovered and recorded as a retryable failure.
//
// A [TaskContext] carries the task and what a handler may do besides
// returning: decode the payload, report progress, heartbeat, submit child
// tasks, settle early, and, on Postgres, settle inside a transaction it
// shares with the application's own writes ([TaskContext.SucceedIn]).
// Cancellation is cooperative: [Client.Cancel] on a running task cancels
// its handler's context and the task ends canceled whatever it returns.
// [Worker.HandleBatch] delivers several tasks of one name per call.
// Per-name and shared capacities ([HandlerOptions], WorkerOptions.Resources)
// bound what runs at once; a per-name [RateLimit] bounds how fast tasks
// start, in this process. [Worker.Pause] and [Worker.Resume] stop and
// restart claiming on queues of a running worker; [Client.PauseQueue]
// and [Client.ResumeQueue] on a queue of every Go worker on the database.
//
// When Run's context ends it stops claiming and waits
// WorkerOptions.ShutdownTimeout for running calls, then cancels their
// contexts; a handler that ignores its context is reported and left to its
// lease, so a deployment's stop never hangs on one handler.
//
// # Leases, retries and shutdown
//
// A claim leases its task for WorkerOptions.LeaseDuration (30s, at least
// [MinLeaseDuration]). One heartbeat_batch statement per beat
// (HeartbeatInterval: a third of the lease by default, always under half
// of it) renews every lease the worker holds. A task whose lease was lost
// has only its own context flagged ([TaskContext.LostLease], and its ctx
// canceled); the worker records nothing for it. A settlement that fails on
// a busy database or a dropped connection is retried while the lease
// lasts, so finished work is not run again.
//
// A returned error fails the attempt. While attempts remain
// ([SubmitOptions].MaxAttempts, default 3) the task is retried after an
// equal-jitter exponential backoff, 1s doubling to 30s
// (WorkerOptions.RetryBackoff, RetryBackoffMax; [NoRetryBackoff] requeues
// at once), unless the error is a non-retryable [*TaskError] or wrapped
// by [Permanent]. A panic is recovered and recorded as a retryable
// handler_panic failure. A result JSON cannot hold fails the task for good
// as unserializable_result. A handler's error is read under recover too:
// a typed nil *TaskError, or an error whose methods panic, fails the task,
// never the process.
//
// Cancel is cooperative and wins: a cancel requested while a task runs
// cancels its handler's context, and whatever the handler returns, the
// task ends canceled.
//
// At shutdown Run waits ShutdownTimeout (30s) for running calls, then
// cancels their contexts and waits as long again, at most 5s. A handler
// that still ignores its context is reported to WorkerOptions.OnError
// ([PhaseShutdown]) and left behind, its task to its lease. WorkerOptions.MaxRun
// does the same for one attempt that runs too long, recorded as a
// retryable handler_timeout failure.
//
// [Worker.HandleBatch](name, n, ...) delivers up to n tasks per call; the
// tasks the handler did not settle itself ([TaskContext.Succeed],
// [TaskContext.Fail], both idempotent) are settled by how the call ended.
// [HandlerOptions].Concurrency bounds the calls of one name at once,
// WorkerOptions.Resources capacities shared by several names ({"gpu": 1},
// named by HandlerOptions.Resource), and WorkerOptions.MaxInFlightBytes
// the payload bytes held by running calls.
//
// # Snooze, rate limits and pausing
//
// A handler that cannot do its work yet (an upstream not ready, a report
// still being built) returns [Snooze](d): the task goes back to queued,
// due d from now (0: at once), and the attempt it used is given back, so
// snoozing spends none of MaxAttempts and records no error and no
// backoff. A TypeScript or Python worker on the same database sees an
// ordinary queued task. [TaskContext.Snooze] settles so from inside the
// handler. On Postgres the requeue sends the cairnq_queued notification
// as a retry does, so idle workers take one extra probe, and find the task
// by polling once it is due.
//
//	w.Handle("await-report", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
//		if !reportReady(ctx) {
//			return nil, cairnq.Snooze(30 * time.Second)
//		}
//		return fetchReport(ctx)
//	}, nil)
//
// A [RateLimit] in [HandlerOptions] is a token bucket per name in the
// worker: Rate starts a second, Burst at once. The claim takes only what
// the bucket lets start now, so no task sits claimed in the process with
// its lease running while it waits its turn; an idle worker wakes when the
// next start is allowed and runs no statement before. The limit is per
// process: N workers with Rate 50 start up to 50·N a second.
//
// A [GlobalLimit] in [HandlerOptions] is the bound across processes: at
// most Max tasks of the name running at once on the whole database, or
// per value of a metadata member (per tenant). It is counted from the
// running rows under a lock per name at each claim of the name, so it
// needs no state of its own and an expired lease stops counting; see
// GlobalLimit for its cost, and that other SDKs' workers do not honour it.
//
// [Worker.Pause] stops claiming from queues (calls in flight finish as
// usual) and returns once no claim on them is in progress;
// [Worker.Resume] claims again (with no arguments, every queue of the
// worker) and [Worker.Paused] lists them. A paused queue's expired leases
// are recovered by other workers' claims, not this one's. A Rate that is
// not > 0, a negative Burst, or a queue the worker does not claim from is
// an [*ArgumentError].
//
// [Client.PauseQueue] pauses a queue for every Go worker on the database,
// from any process: each stops claiming from it within its PollInterval,
// and one started meanwhile never claims from it, until
// [Client.ResumeQueue]; [Client.PausedQueues] lists the pauses. A pause is
// a row of the protocol's cairnq_meta table (docs/operators.md has its
// format), so it outlives every process; the TypeScript and Python SDKs'
// workers do not read it and go on claiming from a paused queue.
//
// # Periodic tasks
//
// A [Scheduler] submits a task for every slot of its entries' cron specs
// ([Scheduler.Add]; five fields, six with seconds, the @ descriptors, or
// "@every D"). Run it in as many processes as should keep the entries
// going, in Go or in any SDK that derives the same keys: there is no
// leader.
//
//	s := cairnq.NewScheduler(c, nil)
//	_, err := s.Add("0 9 * * MON-FRI", "report", map[string]any{"kind": "daily"}, &cairnq.ScheduleOptions{
//		ID:       "daily-report",       // the same in every process; names the keys
//		Location: paris,                // the zone the fields are read in; default UTC
//		Missed:   cairnq.MissedCatchUp, // or MissedSkip (default), MissedRunOnce
//		CatchUp:  3,
//		Submit:   &cairnq.SubmitOptions{Queue: "reports", MaxAttempts: 5},
//	})
//	err = s.Run(ctx) // until ctx ends; Add works while it runs
//
// How the schedulers agree:
//
//   - Keys: slot t of entry id is submitted with the key [SlotKey](id, t),
//     "cairnq:periodic:<id>:<t in Unix milliseconds>", and the
//     [ConflictReject] strategy: the first submit of a slot makes its task,
//     every other finds the key taken. ([ConflictReuse] would not do: once a
//     slot's task has finished, it inserts a new one.) Another SDK schedules
//     the same entry by submitting the same keys with reject at the same
//     slots; c.GetByKey(ctx, cairnq.SlotKey(id, t)) finds a slot's task.
//   - Missed slots: a slot at most [ScheduleOptions].Grace late (one minute)
//     is on time and submitted whatever the policy. Older slots without a
//     task are missed: walking back from the newest slot, every slot without
//     a task up to the first slot with one. [MissedSkip] submits none,
//     [MissedRunOnce] the newest, [MissedCatchUp] the newest CatchUp (1 to
//     [MaxCatchUp]), oldest first. A starting scheduler counts slots as
//     missed only when it finds a slot with a task among the last
//     MaxCatchUp, so a new entry has missed nothing, and schedulers starting
//     at different moments agree, since each reads the same keys.
//   - Clock: slots are computed on the database's clock. On Postgres each
//     scheduler measures its offset from the server's clock_timestamp()
//     (taken as read halfway through the round trip) when it starts and
//     every minute; its error is half a round trip plus a minute's drift.
//     The clock never decides whether a slot runs twice (the key does); a
//     skewed one only moves when a slot is submitted.
//   - Retention: a purged task frees its key. Keep finished periodic tasks
//     longer than a scheduler may still submit their slot (the grace, and
//     for catch-up the CatchUp slots before a restart).
//   - A Client's submit hooks see every periodic submit, and must keep its
//     key and conflict strategy.
//
// # Workflows
//
// [Client.SubmitWorkflow] submits steps that wait for other steps
// ([WorkflowStep].After): a fan-out, a fan-in, a diamond. The README's
// "Workflows" shows one; examples/etl-workflow and examples/saga are
// whole programs. Each step is an ordinary task a worker of its name
// runs, in any SDK; [StepResult] reads, in a step's handler, the result
// of a step it waited for; [TaskContext.AddSteps] adds steps while one
// runs; [Client.CallWorkflow], [Client.GetWorkflow],
// [Client.CancelWorkflow] and [Client.RetryWorkflow] follow and steer it,
// and `cairnq workflow get|cancel|retry` does from a shell.
//
// How a workflow is kept, so that another SDK could advance one too (no
// table or column beyond protocol v1's):
//
//   - The record: one task named and queued [WorkflowName]
//     ("cairnq.workflow"), keyed [StepKey](id, "") (the record's own id
//     for id), max_attempts 2147483647. Its payload is the definition:
//     {"v": 1, "on_failure": "cancel" | "continue", "steps": [{"step",
//     "task", "payload", "options", "after": [step, ...]}], "seen":
//     {step: status}, "ended": status, "changed_ms": ms}. A step's
//     options are {"queue", "max_attempts", "priority", "delay_ms",
//     "metadata", "correlation_id"}, each optional. seen is the ledger as
//     the last full advance (below) wrote it: the steps it found
//     submitted, with the status it read for each; an advance from one
//     settled step leaves it (and the whole payload) as it is. ended is
//     written in the transaction that settles the record. The
//     record stays queued while the workflow runs (due at its next
//     sweep), and ends succeeded (its result {"steps": {step: {"id",
//     "status"}}}), failed (envelope type "WorkflowFailed", details
//     failed, skipped and lost) or canceled.
//   - A step: a task inserted when every step of its after has
//     succeeded, with the key [StepKey](record, step),
//     "cairnq:workflow:<record id>:<step>", and the [ConflictReject]
//     strategy; parent_id and root_id are the record's id, and its
//     metadata carries the member "cairnq_workflow": {"v": 1, "record",
//     "step", "after": {step: task id}}. Step names hold no ':', so a key
//     splits at its last colon. With the step, its ledger key,
//     "cairnq:workflow-ledger:<record id>:<step>", pointing at the record,
//     says the step was submitted, even once a purge took its task and
//     its own key. A success that a Go worker advances from also writes
//     "cairnq:workflow-ledger:<record id>:<step>:succeeded", pointing at
//     the record (a step one of whose dependents was submitted succeeded
//     too, key or none). The record's own key moves (its updated_at_ms,
//     past its last value) with every write of the definition: readers
//     that keep a parsed definition read it again. A resume that runs a
//     lost step again deletes its two keys.
//   - A full advance, in one write transaction: take lock_key on the
//     record's key (an advisory lock on Postgres), read the record and
//     its steps, count a step with no task as submitted if seen or its
//     ledger key says so (and as succeeded if a step waiting for it was
//     submitted, or its succeeded key says so), insert each ready step
//     not submitted, cancel the live steps when a step failed for good
//     under "cancel" or the record was canceled, write seen back when it
//     decided something or a step failed; once nothing is live or ready,
//     claim the record by id and complete or fail it.
//   - An advance from one settled step, in the transaction of a Go
//     worker's settlement of a success that added no steps: under the
//     same lock, read by their keys only the record's status and the
//     steps that the settled step's dependents wait for, and insert each
//     dependent now ready; the record is not written. Each process keeps
//     the definitions it parsed, read again when the record's key moved,
//     and what it read of the steps that cannot change back (a success),
//     so a fan-in of 10,000 steps costs a few reads per settled step, not
//     10,000. The workflow's end, a canceled record, AddSteps and a
//     failure go to a full advance: a Go worker's settlement of a step
//     that failed or was canceled, a Client.Cancel of a queued step, a
//     lease recovery that fails a step, and a walk that reads a failure
//     the ledger does not hold (another SDK's, which a Go worker's
//     success may otherwise only meet at the next sweep). Such successes are written as plain
//     ones are, with the worker's other completions (its grouped writes
//     on Postgres, its next claim on SQLite), sharing one transaction and
//     its reads; on Postgres their workflows are locked first, in one
//     lock_keys.
//   - A sweep does a full advance for the records due (every
//     [WorkerOptions].WorkflowSweep), then hands the record back due
//     again (snooze: no attempt spent), 1 s after progress, waiting
//     longer the longer no step changed, up to 5 min. A process's sweep
//     skips the full advance of a workflow its own steps' successes
//     advanced less than 1 s before, for up to 5 s after its last full
//     advance of it (a wide workflow's full advance holds its lock for
//     100 ms and more): what only a full advance sees (steps another
//     SDK's settlement left ready, its failure under CancelRest, the end
//     it reached, a step lease recovery failed) then waits up to about
//     6 s and a sweep interval, not 1 s.
//
// Plain task operations on a workflow's tasks, from any SDK:
//
//   - A retry of a failed step's task ([Client.Retry], or another SDK's)
//     resumes its failed workflow from that step, as
//     [Client.RetryWorkflow] says: by default as RetryWorkflow does, with
//     ContinueOnFailure only the retried step's branch. Client.Retry
//     revives the workflow at once, in the retry's transaction; another
//     SDK's retry is seen when a Go worker settles the step, or else at a
//     Go worker's look over the ended workflows (each sweep reads those
//     that ended since the last; about every 5 minutes, one sweep of all
//     a Client's workers reads all of them, the first within a minute of
//     the first sweep). A step of a canceled workflow stays canceled:
//     Client.Retry refuses it with an [*ArgumentError] (RetryWorkflow
//     resumes the workflow), and one another SDK retried is canceled
//     again by the first look that reads its record, unless it ran first.
//   - A cancel of the record (Client.Cancel cancels as CancelWorkflow
//     does; another SDK's plain cancel reaches only the record) stops
//     the steps: a Go worker's next sweep cancels those still queued and
//     asks the running ones to stop.
//   - Retention ([RetentionOptions]) and [Client.Purge] never purge a task
//     of a workflow that has not ended. Another SDK's purge (and
//     Client.Store().Purge, the protocol's) knows nothing of workflows
//     and may purge a finished step of a running workflow. The ledger
//     and the ledger keys keep what they knew: the step is not submitted
//     again (though its key is free), and a success is known from the
//     steps submitted after it or its succeeded key. But its result is
//     gone: a step reading it gets an error wrapping [ErrNotFound] from
//     [StepResult] (and fails unless its handler copes), and a step
//     purged before anything recorded how it ended (a success no Go
//     worker settled, or a failure no full advance read) counts as lost,
//     which fails the workflow. A step waiting for a purged one is
//     submitted by the next sweep (a full advance), not by the success
//     that made it ready. Where other SDKs purge, keep their retention longer than
//     a workflow lives.
//
// What protocol v1 cannot carry: there is no waiting status, so a step
// not submitted yet is no row, and other SDKs' lists and stats do not
// show it; a step settled by another SDK's worker is advanced at the next
// sweep, not in its settlement, and cannot add steps. A handler
// registered for [WorkflowName] is refused.
//
// # Durable steps, sleeps and events
//
// A handler's steps can outlive its attempt. [Once] runs a function as
// a named step and records its output in the task's own row when it
// returns; a later attempt (after a failure, a crash, a lost lease, on
// any process) gets the output back without running it again. [Sleep]
// and [SleepUntil] park the task until a time, and [WaitEvent] until an
// event arrives or a timeout passes: the task is queued again, due then,
// with its attempt given back and no worker slot or lease held, and the
// handler returns the [*SuspendedError] they return. A later attempt
// replays the steps before and goes on.
//
//	receipt, err := cairnq.Once(ctx, tc, "charge", chargeCard)
//	if err != nil {
//		return nil, err
//	}
//	ok, err := cairnq.WaitEvent[Approval](ctx, tc, "approval", 48*time.Hour)
//	if err != nil {
//		return nil, err // parked
//	}
//
// Steps are matched by name and order: a handler calls the same steps in
// the same order on every attempt, deciding from its payload and from
// what earlier steps returned. One whose steps differ from those recorded
// fails the task for good with a [*DurableMismatchError]: register
// changed code under a new task name. [Client.SendEvent] (by id),
// [Client.SendEventByKey], and [Client.SendEventTx] in the application's
// transaction deliver an event once per task and name; one sent before
// the wait is kept for it, and one after its wait timed out is an
// [*EventRefusedError]. A [StepPolicy] given to Once retries a step's
// errors within the attempt before the handler sees one. [DurableOf]
// reads a task's record; [WorkerOptions.DurableStepMiddleware] wraps
// each step that runs.
//
// The record is the cairnq_durable member of the task's metadata
// (docs/plans/durable-execution.md has its format), which no statement
// of any SDK rewrites, so it survives retries, recovered leases and
// purges of other tasks. TypeScript and Python workers serving the same
// name would run the handler from the top: serve durable names from Go
// workers only.
//
// # Middleware and hooks
//
// WorkerOptions.Middleware wraps every handler call, single and batch:
// a [Middleware] receives the [Call] (its TaskContexts) and a next
// function that runs the rest of the chain and then the handler, and
// returns what the worker settles the tasks with, so it may time a call,
// put values in the handler's context, refuse to run it, or change its
// outcome. Options.SubmitHooks wrap every submit of a Client the same
// way: a [SubmitHook] may add metadata ([Submission.SetMetadata]), refuse
// the submit (nothing is written), or observe the stored task. Both run
// in declared order, the first outermost. Middleware runs around single and
// batch calls alike ([Call].Batch, [Call].Tasks); it may derive the
// handler's context, skip the handler (its own result or error then settles
// the tasks as a handler's would) or replace the outcome, and a panic in it
// is recorded like a handler's; the tasks settle after the outermost
// middleware returns. Submit hooks run around every submit: [Client.Submit],
// [Client.SubmitTx], [Client.Call], [TaskDef.Submit] and a handler's child
// submits. [EnvelopeOf] names an error the way the worker will record it.
// Package otelcairnq (module .../otelcairnq) builds tracing and metrics on
// these two seams.
//
// # Logging
//
// cairnq logs through log/slog, and is quiet by default: given no logger,
// it logs WARN and above, to the handler slog.Default() has at the time.
// So a healthy program prints nothing of cairnq's, and an application that
// installs its own default handler (slog.SetDefault) receives cairnq's
// warnings and errors there. A logger given is used as it is, at its
// handler's level: Options.Logger: slog.Default() shows INFO too (a worker
// starting and stopping, notifications taking effect), and a logger whose
// handler is at slog.LevelDebug shows everything.
//
//	c, err := cairnq.Open(ctx, "tasks.db", &cairnq.SQLiteOptions{
//		Options: cairnq.Options{Logger: slog.Default()},
//	})
//
// That rule holds wherever cairnq takes a logger: Options.Logger; a
// worker's and a scheduler's (WorkerOptions.Logger,
// SchedulerOptions.Logger), which default to the client's; and the
// adapters' Options.Logger, for their LISTEN connections.
//
// Messages are fixed strings, so a pipeline can match them; task events
// carry task_id, task_name, queue, attempt and worker_id as attributes:
//
//   - info "cairnq: worker started" (queues, concurrency, names) and
//     "cairnq: worker stopped";
//   - info "cairnq: queue paused for the fleet; not claiming from it" and
//     "cairnq: queue resumed for the fleet" (queue, worker_id), when a
//     worker sees [Client.PauseQueue]'s pause of one of its queues come
//     or go;
//   - warn "cairnq: task attempt failed; will retry" (error_type,
//     error_code, error, max_attempts, retry_in);
//   - warn "cairnq: task failed": the last attempt, or a non-retryable
//     error (the same attributes but retry_in);
//   - warn "cairnq: task lease lost": the lease expired, or the attempt
//     was abandoned at MaxRun or at shutdown;
//   - error "cairnq: worker error": what the worker survives, through the
//     default WorkerOptions.OnError (phase, err);
//   - info "cairnq: listening for notifications" the first time
//     notifications are in effect (LISTEN on Postgres, the watch of the WAL
//     file on SQLite; debug when they restart after an idle linger), info
//     "cairnq: notifications unavailable; waiting by polling", info
//     "cairnq: behind a transaction-mode connection pooler ..." once per
//     client where LISTEN cannot work, and the adapters' "LISTEN connection lost; reconnecting" (warn) and "LISTEN
//     connection restored" (info);
//   - debug "cairnq: task snoozed" (snooze, run_at_ms), for a handler's
//     [Snooze];
//   - debug "cairnq: database busy; backing off" (phase, backoff);
//   - a workflow's: debug "cairnq: workflow advanced" (workflow, step,
//     inserted, canceled, workflow_status once it ended), when a step's
//     settlement submitted steps, canceled them or ended the workflow;
//     warn "cairnq: workflow record left alone" (workflow, reason), for a
//     record whose definition this SDK cannot read;
//   - the [Scheduler]'s, with entry, name and slot attributes: debug
//     "cairnq: periodic task submitted", info "cairnq: periodic slots
//     missed while no scheduler ran", debug "cairnq: periodic entry has no
//     earlier slot in the database; nothing counted as missed", warn
//     "cairnq: scheduler error; retrying" and "cairnq: reading the
//     database clock failed; retrying".
//
// A task that succeeds logs nothing at info or above.
//
// # Waiting and watching
//
// [Client.Wait] returns the task once it ends, whatever its status
// (succeeded, failed with its error envelope in Task.Error, or canceled),
// with a nil error; [*TaskTimeoutError] (the task keeps running) if it did
// not end in time. [Client.Call] submits and waits, and turns the outcome
// into its error: nil if the task succeeded, [*TaskFailedError] with the
// stored envelope if it failed, [*TaskCanceledError] if it was canceled. [Client.Watch] calls a function whenever tasks may have changed,
// for dashboards and streams. A notification ends a wait at once (LISTEN
// on Postgres; on a SQLite file, the filesystem's change notifications on
// its WAL, for commits made by other processes); polling is always behind
// it.
//
// # Errors
//
// Every error the package returns is a value to test with errors.Is or
// errors.As. Sentinels: [ErrNotFound], [ErrAlreadyExists], [ErrQueueFull],
// [ErrLostLease], [ErrTaskCanceled], [ErrInvalidArgument], [ErrBusy],
// [ErrClosed], [ErrUnsupported], [ErrStorageFull], [ErrStorageMemory],
// [ErrStorageReadOnly], [ErrValueTooLarge],
// [ErrSchemaMismatch], [ErrForeignDatabase], [ErrNoDatabase]
// ([Options].OpenExisting found nothing to open), [ErrUnavailable] (on
// Postgres, whatever the adapter: the connection was lost, the server is
// starting up or shutting down, or no connection could be made; an outage
// to wait out, not a bug. A write whose answer was lost may have been
// committed: a keyed submit retries safely, an unkeyed one may be stored
// twice), [ErrDatabaseReplaced] (on SQLite: the file the client opened
// was deleted, moved away or replaced under it, so every call fails with
// it and [Worker.Run] and [Scheduler.Run] return it (the store logs the
// loss once at ERROR; a busy worker abandons its calls at once): a
// supervisor restarts the process onto the file now at the path, rather
// than this process running a queue nobody else sees). Typed errors carry the
// details: [*ArgumentError] (which call, which argument, why; every
// invalid argument is one, a nil context too, never a panic),
// [*SerializationError] (a value JSON or the limits cannot hold, such as
// NaN), [*TaskFailedError] (the stored error envelope),
// [*TaskTimeoutError] (the task id and a snapshot; the task keeps
// running), [*StorageError] (a full disk, an out-of-memory statement:
// nothing of that write was kept), [*ProtocolVersionMismatchError] (a
// database of another protocol major, left untouched). Bad input leaves
// the database as it was.
//
// # Limits
//
// The same on SQLite and Postgres, checked before anything is written, so
// both backends accept exactly the same values, and so do the other SDKs
// reading them:
//
//   - a task name, queue, worker id, parent, root or correlation id: 1 to
//     [MaxNameBytes] (255) bytes; a key: 1 to [MaxKeyBytes] (1024); all
//     valid UTF-8 without NUL, as is a progress message, of at most
//     [MaxMessageBytes] (64 KiB). Past them: [*ArgumentError].
//   - a priority: a 32-bit integer; max attempts: 1 to 2^31-1
//     ([*ArgumentError]).
//   - a payload, metadata, result or error envelope: at most
//     [MaxValueBytes] (16 MiB) of encoded JSON (errors.Is
//     [ErrValueTooLarge]), nested at most [MaxJSONDepth] (512) levels, its
//     strings valid UTF-8 with no \u0000 and no lone surrogate, its numbers
//     at most 1000 characters with an exponent within ±1000. Past them:
//     [*SerializationError].
//
// A json.RawMessage or a []byte is taken as JSON text and stored as the
// JSON it holds (never as encoding/json's base64 string, which the other
// SDKs would read as a string); bytes that are not JSON are a
// *SerializationError, so binary data must be encoded by the caller. Every
// refusal satisfies errors.Is(err, [ErrInvalidArgument]). Where the value
// comes from a handler, the task fails for good as unserializable_result;
// an error envelope past the limits is stored cut down to fit (its details
// replaced by a details_error note, NUL and invalid UTF-8 by U+FFFD), so a
// failure is always recorded. Worker and wait timings that would guarantee
// duplicate runs or busy polling are refused the same way: a lease under
// [MinLeaseDuration], a heartbeat not under half the lease, a poll interval
// under [MinPollInterval], a negative timeout.
//
// # SQLite
//
// [Open] opens or creates a SQLite file (pure Go, no cgo) with
// [SQLiteOptions]: one file, WAL mode, synchronous=NORMAL (an application
// crash loses nothing; SQLiteOptions.FullSync makes commits survive a
// power cut). One goroutine owns the write connection and commits every
// write that is waiting in one transaction (group commit), each in its own
// savepoint, so a failing write fails only its caller; reads use their own
// connections. Another process holding the write lock is waited out with
// backoff up to SQLiteOptions.BusyTimeout (5s), then [ErrBusy]. Processes
// on one host, in any SDK, may share the file, which must not live on a
// network filesystem. A file that already holds another application's
// tables and no cairnq ones is refused with [ErrForeignDatabase] and left
// as it was, unless SQLiteOptions.AllowOtherTables. A statement that runs
// the embedded SQLite out of memory fails alone ([ErrStorageMemory]); its
// connection is replaced and every other write goes on.
//
// Other processes' commits wake this process's idle workers and waiters
// through the filesystem's change notifications on the -wal file
// (fsnotify: inotify on Linux), watched only while something waits, and
// checked against the WAL index so that a wakeup never comes before the
// commit is readable. An idle process costs nothing while nothing writes.
// Where the filesystem cannot notify, or the database is not in WAL mode,
// waiting falls back to polling (logged once); CAIRNQ_SQLITE_NOTIFY=0
// turns the watch off, for diagnosis.
//
// # Postgres
//
// [OpenPostgres] runs on the application's own pool through an executor,
// the small seam of package executor (Session: Query and Exec; Executor:
// Tx and Close; optional Listener and PositionalQuerier), with
// [PostgresOptions]. An adapter's package is cairnq followed by its
// directory's name:
//
//	c, err := cairnq.OpenPostgres(ctx, cairnqpgx.New(pool, nil), nil)        // adapters/pgx: a *pgxpool.Pool
//	c, err := cairnq.OpenPostgres(ctx, sqlexec.New(db, nil), nil)            // executor/sqlexec: any database/sql pool, a *sqlx.DB
//	c, err := cairnq.OpenPostgres(ctx, cairnqlibpq.New(db, dsn, nil), nil)   // adapters/libpq, with LISTEN (pq.Listener needs the DSN)
//	c, err := cairnq.OpenPostgres(ctx, cairnqgorm.New(gormDB, nil), nil)     // adapters/gorm: config, logger and callbacks untouched
//	c, err := cairnq.OpenPostgres(ctx, cairnqbunsql.New(bunDB, nil), nil)    // adapters/bunsql: pgdialect over pgx stdlib or pgdriver
//
// The pgx and lib/pq adapters come with this module; the gorm and bun
// adapters are modules of their own, so an ORM reaches only the programs
// that use it. Time comes from the database clock; claims use FOR UPDATE
// SKIP LOCKED; keyed operations take the same advisory lock as the other
// SDKs; migrations run under an exclusive lock on the shared ledger.
// PostgresOptions.Schema names the schema cairnq lives in: from a DSN the
// adapter creates it and sets search_path on every connection; on the
// application's pool cairnq only checks where the connection resolves, and
// a process about to start a second installation beside an existing one
// fails with [ErrSchemaMismatch] unless the schema is named. cairnq closes
// only an executor it is told it owns (PostgresOptions.CloseExecutor).
//
// LISTEN comes from the application's own pool, with no second pool and no
// DSN parsed again: the pgx adapter hijacks one pool connection, gorm and
// bun over pgx stdlib reserve one database/sql connection and reach the
// pgx connection through Conn.Raw, bun's pgdriver uses its own listener,
// lib/pq uses pq.Listener. A process listens on a channel only while
// something in it waits on that channel: cairnq_queued while a worker idles
// or a Watch runs, cairnq_done while a Wait, a Call or a Watch waits (and
// for a while after, so the next one starts listening at once). A
// worker-only process never receives the notification every settled task
// sends. An executor that cannot LISTEN just polls; the reconnect timings
// every adapter shares are in package executor's documentation.
//
// # Behind a connection pooler
//
// Every adapter runs behind pgbouncer (or a hosted pooled endpoint) on its
// defaults, in transaction mode too:
//
//   - Statements: in transaction mode each statement outside a transaction
//     may run on another server connection. cairnq keeps statements
//     prepared only where a connection is proven to keep one server
//     session: the server sees the same TCP connection at both ends, or
//     (pgx) the backend key the server sent names the session the
//     connection runs in, which no pooler passes on. Anywhere else pgx,
//     and database/sql over pgx's stdlib (sqlexec, gorm, bun), run cairnq's
//     statements in QueryExecModeCacheDescribe (one round trip, unnamed),
//     passed per statement so the application's pool is never
//     reconfigured; cairnqlibpq.Open sends them with binary_parameters;
//     database/sql over lib/pq on its default writes the arguments into the
//     statement's text (a DSN with binary_parameters=yes keeps them bound:
//     cairnqlibpq.New reads it off the DSN, sqlexec.Options.Arguments says
//     it).
//   - LISTEN: behind a transaction-mode pooler LISTEN is accepted and never
//     delivers. So each adapter's listener first proves that its connection
//     receives what the server sends (the backend key, or a notification on
//     a channel of its own sent from the pool) and otherwise refuses: the
//     client logs one INFO naming the pooler and polls, which is how it is
//     meant to run there (cairnq doctor says "n/a"). In session mode
//     LISTEN works as usual, except on bun's pgdriver, which listens only on
//     connections proven direct.
//   - Startup parameters: pgbouncer refuses those it does not pass on,
//     search_path among them, so an adapter's Open with Options.Schema
//     fails there with an [*OpenError] that says what to do instead: set
//     the schema for the role on the server (ALTER ROLE ... SET
//     search_path), open without the option, and give the schema to
//     PostgresOptions.Schema, which checks where the connections resolve.
//   - cairnq doctor reports the route (direct or through a pooler, and so
//     whether statements stay prepared) and whether LISTEN works.
//
// The tests run every adapter through a real pgbouncer in both modes;
// docs/benchmarks.md ("Behind a connection pooler") has what it costs.
//
// # Transactions shared with the application
//
// On Postgres a task can be part of the application's own transaction:
//
//   - [TaskContext.SucceedIn] (typed: cairnqpgx.SucceedIn hands fn a
//     pgx.Tx, cairnqlibpq.SucceedIn a *sql.Tx): cairnq opens the
//     transaction, fn writes the application's rows, and the settlement is
//     its last statement. The rows and the succeeded status commit together
//     or not at all; if the lease was lost meanwhile, both roll back and
//     [ErrLostLease] is returned.
//   - [Client.SubmitTx], [Client.SubmitManyTx] and [TaskContext.SucceedTx]
//     run inside a transaction the application holds
//     (cairnqpgx.TxSession(tx, nil), sqlexec.TxSession(tx)): a submitted
//     task exists for workers only once the application commits, and not
//     at all if it rolls back.
//   - The gorm and bun adapters hand fn a *gorm.DB or bun.Tx bound to the
//     transaction (models, hooks and associations work as usual), and
//     cairnqgorm.SubmitTx(ctx, c, tx, ...) works inside the application's
//     own db.Transaction(func(tx *gorm.DB) error {...}).
//
// On SQLite these return [ErrUnsupported].
//
// # Operating
//
// Command cairnq (cmd/cairnq) operates a database from the shell on either
// backend: stats, list, get, submit, cancel, retry, purge, watch, migrate,
// doctor, and the web console (package console) with ui. The library has
// the same pieces: [Options].OpenExisting for processes whose migrations
// run elsewhere (no file, schema or table is created; [ErrNoDatabase]);
// [InspectSQLite] and [InspectPostgres] return a [*SchemaStatus] without
// opening a client; [Client.ExpiredLeases], [Client.QueueAges] and
// [Client.RecentFailures] are what cairnq doctor reads. Package cairnqtest
// tests the code that submits tasks and the handlers that run them, with
// no server.
//
// The values this package takes and returns (Task, its statuses, the
// options, the errors) are declared here, so a program imports only this
// package and its adapter. Package store speaks package cairnqtype's types
// of the same names and fields; errors.As matches a typed error under
// either name. [Client.Store] gives tools
// the protocol-level API, one call per protocol operation.
package cairnq
