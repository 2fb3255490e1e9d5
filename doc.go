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
// usually from different processes:
//
//	c, err := cairnq.Open(ctx, "tasks.db", nil) // created if absent
//	defer c.Close()
//
//	t, err := c.Submit(ctx, "render", map[string]any{"page": 1}, nil)
//
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
//	done, err := c.Wait(ctx, t.ID, nil) // or c.Call: submit and wait
//
// [Define] binds a name to Go types at both ends ([TaskDef.Submit],
// [TaskDef.Handle], [TaskDef.Call]); another SDK uses just the name.
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
// identically on both backends.
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
// restart claiming on queues of a running worker.
//
// When Run's context ends it stops claiming and waits
// WorkerOptions.ShutdownTimeout for running calls, then cancels their
// contexts; a handler that ignores its context is reported and left to its
// lease, so a deployment's stop never hangs on one handler.
//
// # Time and flow control
//
// A handler that returns [Snooze](d) puts its task back in the queue to
// run after d, with the attempt it used given back: not a failure. A
// [Scheduler] submits tasks on cron specs from any number of processes,
// with no leader: each slot's task has a key derived from the entry and
// the slot ([SlotKey]), so only one submit per slot can win. Per-name
// [RateLimit]s and [Worker.Pause] are under Workers above.
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
// the submit, or observe the stored task. Both run in declared order, the
// first outermost. [EnvelopeOf] names an error the way the worker will
// record it. Package otelcairnq (module .../otelcairnq) builds tracing and
// metrics on these two seams.
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
//     "cairnq: notifications unavailable; waiting by polling", and the
//     adapters' "LISTEN connection lost; reconnecting" (warn) and "LISTEN
//     connection restored" (info);
//   - debug "cairnq: task snoozed" (snooze, run_at_ms), for a handler's
//     [Snooze];
//   - debug "cairnq: database busy; backing off" (phase, backoff);
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
// [ErrStorageReadOnly],
// [ErrSchemaMismatch], [ErrForeignDatabase]. Typed errors carry the
// details: [*ArgumentError] (which call, which argument, why; every
// invalid argument is one), [*SerializationError] (a value JSON or the
// limits cannot hold), [*TaskFailedError], [*TaskTimeoutError],
// [*StorageError] (nothing of that write was kept),
// [*ProtocolVersionMismatchError] (a database of another protocol major,
// left untouched). Bad input leaves the database as it was.
//
// # Backends
//
// [Open] opens or creates a SQLite file (pure Go, no cgo) with
// [SQLiteOptions]. One goroutine commits every waiting write in one
// transaction; reads run in parallel; processes on one host may share the
// file, which must not live on a network filesystem.
//
// [OpenPostgres] runs on the application's own pool through an executor, the
// small interface of package executor, with [PostgresOptions]. Adapters
// wrap the common drivers: adapters/pgx (package cairnqpgx), adapters/libpq,
// executor/sqlexec for any database/sql pool, and adapters/gorm and
// adapters/bunsql in modules of their own. Time comes from the database
// clock, claims use FOR UPDATE SKIP LOCKED, and LISTEN wakes idle workers
// and waiters when the executor offers it. [Client.SubmitTx] and
// [TaskContext.SucceedTx] take part in a transaction the application holds.
//
// The values this package shares with package store (Task, its statuses,
// the errors) are defined in package cairnqtype and named here too, so a program
// imports only this package and its adapter. [Client.Store] gives tools
// the protocol-level API, one call per protocol operation.
package cairnq
