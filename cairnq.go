package cairnq

import (
	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// The values this package shares with package store and the engine are
// defined once, in package cairnqtype, and named here so that a program
// imports only this package and its adapter.

// Task is one task as stored: its id, name, queue, status, payload and
// metadata, its result or last error, progress, attempts, lease and
// links. JSON columns keep their encoded form (json.RawMessage); decode
// them with DecodePayload and DecodeResult.
type Task = cairnqtype.Task

// TaskRef is a task's id and status.
type TaskRef = cairnqtype.TaskRef

// Status is a task's status.
type Status = cairnqtype.Status

// The task statuses.
const (
	StatusQueued    = cairnqtype.StatusQueued
	StatusRunning   = cairnqtype.StatusRunning
	StatusSucceeded = cairnqtype.StatusSucceeded
	StatusFailed    = cairnqtype.StatusFailed
	StatusCanceled  = cairnqtype.StatusCanceled
)

// ErrorEnvelope is the protocol's JSON error record.
type ErrorEnvelope = cairnqtype.ErrorEnvelope

// StatusCounts holds per-status task counts for one queue.
type StatusCounts = cairnqtype.StatusCounts

// SubmitOptions are the optional parts of a submit: queue, key and its
// conflict strategy, attempts, priority, delay, metadata and the ids that
// link tasks into chains. nil submits to DefaultQueue with the defaults.
type SubmitOptions = cairnqtype.SubmitOptions

// ListOptions filters List by status, queue, name, root or correlation
// id, with a limit (default 100) and an offset. Empty fields do not filter.
type ListOptions = cairnqtype.ListOptions

// PurgeOptions chooses what Purge deletes: finished tasks older than
// OlderThan, optionally of one queue, status or name, at most Limit rows
// (default 1000) per call.
type PurgeOptions = cairnqtype.PurgeOptions

// Conflict is a keyed submit's conflict strategy.
type Conflict = cairnqtype.Conflict

// The conflict strategies: reuse a live task (ConflictReuse), also a
// succeeded one (ConflictReuseSucceeded), refuse (ConflictReject), or
// cancel the live one and submit anew (ConflictReplace).
const (
	ConflictReuse          = cairnqtype.ConflictReuse
	ConflictReuseSucceeded = cairnqtype.ConflictReuseSucceeded
	ConflictReject         = cairnqtype.ConflictReject
	ConflictReplace        = cairnqtype.ConflictReplace
)

// DefaultQueue is the queue of a task submitted without one.
const DefaultQueue = cairnqtype.DefaultQueue

// Sentinel errors, usable with errors.Is. Every error this package returns
// for one of these kinds matches it; the typed errors below carry the task
// id, key or envelope as well.
var (
	// ErrNotFound: no task with that id, or no task under that key.
	ErrNotFound = cairnqtype.ErrNotFound
	// ErrAlreadyExists: a keyed submit with the reject strategy found the key taken.
	ErrAlreadyExists = cairnqtype.ErrAlreadyExists
	// ErrQueueFull: a gated submit waited its whole budget for room on the queue.
	ErrQueueFull = cairnqtype.ErrQueueFull
	// ErrLostLease: an ownership-checked write found the lease gone (expired,
	// reclaimed, or the task settled elsewhere).
	ErrLostLease = cairnqtype.ErrLostLease
	// ErrTaskCanceled: the task a caller waited on ended canceled.
	ErrTaskCanceled = cairnqtype.ErrTaskCanceled
	// ErrInvalidArgument: a call was given input it cannot act on; nothing was written.
	ErrInvalidArgument = cairnqtype.ErrInvalidArgument
	// ErrBusy: another process kept the SQLite database locked past the busy timeout.
	ErrBusy = cairnqtype.ErrBusy
	// ErrClosed: the store was used after Close.
	ErrClosed = cairnqtype.ErrClosed
	// ErrUnsupported: the operation needs a capability this store lacks
	// (sharing a transaction needs Postgres).
	ErrUnsupported = cairnqtype.ErrUnsupported
	// ErrNotADatabase: the file exists but is not a SQLite database.
	ErrNotADatabase = cairnqtype.ErrNotADatabase
	// ErrSchemaMismatch: the database holds a cairnq installation the store
	// cannot safely use from where it stands.
	ErrSchemaMismatch = cairnqtype.ErrSchemaMismatch
	// ErrForeignDatabase: the SQLite file holds another application's
	// tables and no cairnq ones; nothing was added to it.
	ErrForeignDatabase = cairnqtype.ErrForeignDatabase
	ErrValueTooLarge   = cairnqtype.ErrValueTooLarge
	// ErrStorageFull: the disk (or the database's quota) is full. Nothing
	// of the failed write was kept; it may succeed once space is freed.
	ErrStorageFull = cairnqtype.ErrStorageFull
	// ErrStorageMemory: the embedded SQLite ran out of memory for one
	// statement. Nothing of the failed write was kept; the connection was
	// replaced, and other writes go on.
	ErrStorageMemory = cairnqtype.ErrStorageMemory
	// ErrStorageReadOnly: the database can only be read by this process
	// (a SQLite file it has no permission to write, as a backup or an
	// operator's copy is): Options.OpenExisting opens it for reading, and
	// every write fails, keeping nothing.
	ErrStorageReadOnly = cairnqtype.ErrStorageReadOnly
	// ErrNoDatabase: a store opened with OpenExisting found no cairnq
	// installation: no SQLite file at the path, no schema of that name, or
	// no cairnq tables in the database. Nothing was created.
	ErrNoDatabase = cairnqtype.ErrNoDatabase
	// ErrDatabaseReplaced: the SQLite file the client opened was deleted,
	// moved away or replaced under it. Every call fails with it from then
	// on, and Worker.Run returns it; restart the process to open the file
	// now at the path.
	ErrDatabaseReplaced = cairnqtype.ErrDatabaseReplaced
	// ErrUnavailable: the Postgres database could not be reached: the
	// connection was lost, the server is starting up or shutting down, or
	// no connection could be made. The call may succeed once the server is
	// back; the driver's error stays inside for errors.As. A connection
	// refused for good (a wrong password, an unknown database, a startup
	// parameter a pooler refuses) is not ErrUnavailable, except that over
	// a *sql.DB the application built, or an executor written elsewhere,
	// a pooler's refusal at connect (pgbouncer's 08P01) cannot be told
	// from its losing the server and is ErrUnavailable: bound the retries
	// (cairnqtype.ErrUnavailable has the details). A write whose answer
	// was lost may have been committed: reads, settlements, cancels and
	// keyed submits retry safely (the retry finds what the first try did),
	// while an unkeyed Submit, SubmitMany or Call retried can store its
	// tasks twice, and so can SubmitWorkflow and CallWorkflow, which take
	// no key.
	ErrUnavailable = cairnqtype.ErrUnavailable
)

// Typed errors, usable with errors.As.
type (
	// ArgumentError is an invalid argument: which call, which argument, why.
	ArgumentError = cairnqtype.ArgumentError
	// AlreadyExistsError reports the key a reject-strategy submit found taken.
	AlreadyExistsError = cairnqtype.AlreadyExistsError
	// LostLeaseError names the task whose lease was lost.
	LostLeaseError = cairnqtype.LostLeaseError
	// QueueFullError reports a gated submit that gave up waiting.
	QueueFullError = cairnqtype.QueueFullError
	// TaskFailedError reports that a waited-on task ended failed. Envelope is
	// the recorded error, Task the final row.
	TaskFailedError = cairnqtype.TaskFailedError
	// TaskCanceledError reports that a waited-on task ended canceled.
	TaskCanceledError = cairnqtype.TaskCanceledError
	// ProtocolVersionMismatchError reports a database speaking another protocol
	// major than this SDK. Nothing was written to it.
	ProtocolVersionMismatchError = cairnqtype.ProtocolVersionMismatchError
	// SerializationError reports a value JSON cannot hold (NaN, ±Inf, a channel,
	// a function, a cycle), or whose JSON is past the limits both backends
	// share (see MaxValueBytes, MaxJSONDepth: too large, too deep, a NUL
	// character, a string that is not UTF-8). Nothing was written. It
	// satisfies errors.Is(err, ErrInvalidArgument), and errors.Is(err,
	// ErrValueTooLarge) for a value past MaxValueBytes.
	SerializationError = cairnqtype.SerializationError
	// BusyError reports a write that waited out the busy timeout.
	BusyError = cairnqtype.BusyError
	// OpenError reports a database that could not be opened or prepared.
	OpenError = cairnqtype.OpenError
	// StorageError reports a write the database could not keep for a reason
	// outside the caller's input: a full disk, memory exhausted. Kind is one
	// of the ErrStorage sentinels, which errors.Is matches.
	StorageError = cairnqtype.StorageError
)

// The limits every backend enforces alike. A value past one is refused
// before anything is written, with an error satisfying
// errors.Is(err, ErrInvalidArgument).
const (
	// MaxNameBytes bounds a task name, a queue name, a worker id and the
	// parent, root and correlation ids.
	MaxNameBytes = cairnqtype.MaxNameBytes
	// MaxKeyBytes bounds a task key.
	MaxKeyBytes = cairnqtype.MaxKeyBytes
	// MaxValueBytes bounds one JSON value as encoded: a payload, the
	// metadata, a handler's result, an error envelope.
	MaxValueBytes = cairnqtype.MaxValueBytes
	// MaxJSONDepth bounds how deeply arrays and objects nest in a JSON value.
	MaxJSONDepth = cairnqtype.MaxJSONDepth
	// MaxMessageBytes bounds a progress message.
	MaxMessageBytes = cairnqtype.MaxMessageBytes
)

// NewTaskID returns a fresh task id: "task_" and a 26-character ULID.
func NewTaskID() string { return engine.NewTaskID() }
