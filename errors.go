package cairnq

import (
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
)

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

// The typed errors below carry what went wrong, for errors.As. The
// engine under this package reports the same errors as package
// cairnqtype's types of the same names and fields (which package store
// returns), and each fills the other in errors.As: errors.As(err, &e)
// with e a *cairnq.ArgumentError finds a *cairnqtype.ArgumentError
// anywhere in err's chain, and the other way round. Match them with
// errors.As, not a type switch or a type assertion.

// ArgumentError is an invalid argument: which call, which argument, why.
// It satisfies errors.Is(err, ErrInvalidArgument).
type ArgumentError struct {
	Op     string // e.g. "submit"
	Arg    string // e.g. "name"
	Reason string
}

func (e *ArgumentError) Error() string { return (*cairnqtype.ArgumentError)(e).Error() }

// Is makes errors.Is(err, ErrInvalidArgument) hold.
func (e *ArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

// As fills a *cairnqtype.ArgumentError target with e.
func (e *ArgumentError) As(target any) bool { return fill(target, (*cairnqtype.ArgumentError)(e)) }

// AlreadyExistsError reports the key a reject-strategy submit found taken.
type AlreadyExistsError struct {
	Key    string
	TaskID string // the task the key points at
}

func (e *AlreadyExistsError) Error() string { return (*cairnqtype.AlreadyExistsError)(e).Error() }

// Is makes errors.Is(err, ErrAlreadyExists) hold.
func (e *AlreadyExistsError) Is(target error) bool { return target == ErrAlreadyExists }

// As fills a *cairnqtype.AlreadyExistsError target with e.
func (e *AlreadyExistsError) As(target any) bool {
	return fill(target, (*cairnqtype.AlreadyExistsError)(e))
}

// LostLeaseError names the task whose lease was lost.
type LostLeaseError struct{ ID string }

func (e *LostLeaseError) Error() string { return (*cairnqtype.LostLeaseError)(e).Error() }

// Is makes errors.Is(err, ErrLostLease) hold.
func (e *LostLeaseError) Is(target error) bool { return target == ErrLostLease }

// TaskID is the id of the task whose lease was lost.
func (e *LostLeaseError) TaskID() string { return e.ID }

// As fills a *cairnqtype.LostLeaseError target with e.
func (e *LostLeaseError) As(target any) bool { return fill(target, (*cairnqtype.LostLeaseError)(e)) }

// QueueFullError reports a gated submit that gave up waiting: the queue
// still held MaxDepth or more queued tasks after Waited.
type QueueFullError struct {
	Queue    string
	MaxDepth int
	Waited   time.Duration
}

func (e *QueueFullError) Error() string { return (*cairnqtype.QueueFullError)(e).Error() }

// Is makes errors.Is(err, ErrQueueFull) hold.
func (e *QueueFullError) Is(target error) bool { return target == ErrQueueFull }

// As fills a *cairnqtype.QueueFullError target with e.
func (e *QueueFullError) As(target any) bool { return fill(target, (*cairnqtype.QueueFullError)(e)) }

// TaskFailedError reports that a waited-on task ended failed. Envelope is
// the recorded error, Task the final row.
type TaskFailedError struct {
	ID       string
	Envelope ErrorEnvelope
	Task     *Task
}

func (e *TaskFailedError) Error() string { return e.row().Error() }

// TaskID is the id of the task that failed.
func (e *TaskFailedError) TaskID() string { return e.ID }

// As fills a *cairnqtype.TaskFailedError target with e's values.
func (e *TaskFailedError) As(target any) bool { return fill(target, e.row()) }

func (e *TaskFailedError) row() *cairnqtype.TaskFailedError {
	return &cairnqtype.TaskFailedError{ID: e.ID, Envelope: cairnqtype.ErrorEnvelope(e.Envelope), Task: e.Task.row()}
}

// TaskCanceledError reports that a waited-on task ended canceled. Task is
// the final row. It satisfies errors.Is(err, ErrTaskCanceled).
type TaskCanceledError struct {
	ID   string
	Task *Task
}

func (e *TaskCanceledError) Error() string { return e.row().Error() }

// Is makes errors.Is(err, ErrTaskCanceled) hold.
func (e *TaskCanceledError) Is(target error) bool { return target == ErrTaskCanceled }

// TaskID is the id of the task that was canceled.
func (e *TaskCanceledError) TaskID() string { return e.ID }

// As fills a *cairnqtype.TaskCanceledError target with e's values.
func (e *TaskCanceledError) As(target any) bool { return fill(target, e.row()) }

func (e *TaskCanceledError) row() *cairnqtype.TaskCanceledError {
	return &cairnqtype.TaskCanceledError{ID: e.ID, Task: e.Task.row()}
}

// ProtocolVersionMismatchError reports a database speaking another
// protocol major than this SDK. Nothing was written to it.
type ProtocolVersionMismatchError struct {
	Found     int
	Supported int
}

func (e *ProtocolVersionMismatchError) Error() string {
	return (*cairnqtype.ProtocolVersionMismatchError)(e).Error()
}

// As fills a *cairnqtype.ProtocolVersionMismatchError target with e.
func (e *ProtocolVersionMismatchError) As(target any) bool {
	return fill(target, (*cairnqtype.ProtocolVersionMismatchError)(e))
}

// SerializationError reports a value JSON cannot hold (NaN, ±Inf, a
// channel, a function, a cycle), or whose JSON is past the limits both
// backends share (see MaxValueBytes, MaxJSONDepth: too large, too deep,
// a NUL character, a string that is not UTF-8). Field says which value:
// payload, metadata, result or error. Nothing was written. It satisfies
// errors.Is(err, ErrInvalidArgument), and errors.Is(err,
// ErrValueTooLarge) for a value past MaxValueBytes.
type SerializationError struct {
	Field string
	Err   error
}

func (e *SerializationError) Error() string { return (*cairnqtype.SerializationError)(e).Error() }

// Is makes errors.Is(err, ErrInvalidArgument) hold.
func (e *SerializationError) Is(target error) bool { return target == ErrInvalidArgument }

// Unwrap returns the encoder's error.
func (e *SerializationError) Unwrap() error { return e.Err }

// As fills a *cairnqtype.SerializationError target with e.
func (e *SerializationError) As(target any) bool {
	return fill(target, (*cairnqtype.SerializationError)(e))
}

// BusyError reports a SQLite write that waited out the busy timeout
// while another connection held the lock. It satisfies errors.Is(err,
// ErrBusy).
type BusyError struct {
	Timeout time.Duration
	Err     error
}

func (e *BusyError) Error() string { return (*cairnqtype.BusyError)(e).Error() }

// Is makes errors.Is(err, ErrBusy) hold.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// Unwrap returns the driver's error.
func (e *BusyError) Unwrap() error { return e.Err }

// As fills a *cairnqtype.BusyError target with e.
func (e *BusyError) As(target any) bool { return fill(target, (*cairnqtype.BusyError)(e)) }

// StorageError reports a write the database could not keep for a reason
// outside the caller's input: a full disk, memory exhausted, a file it
// may only read. Kind is one of the ErrStorage sentinels, which errors.Is
// matches; Err is the driver's error.
type StorageError struct {
	Op   string // e.g. "write"
	Kind error
	Err  error
}

func (e *StorageError) Error() string { return (*cairnqtype.StorageError)(e).Error() }

// Is makes errors.Is(err, e.Kind) hold.
func (e *StorageError) Is(target error) bool { return target == e.Kind }

// Unwrap returns the driver's error.
func (e *StorageError) Unwrap() error { return e.Err }

// As fills a *cairnqtype.StorageError target with e.
func (e *StorageError) As(target any) bool { return fill(target, (*cairnqtype.StorageError)(e)) }

// OpenError reports a database that could not be opened or prepared:
// Path is the SQLite file (or the Postgres schema), Err the cause.
type OpenError struct {
	Path string
	Err  error
}

func (e *OpenError) Error() string { return (*cairnqtype.OpenError)(e).Error() }

// Unwrap returns the cause.
func (e *OpenError) Unwrap() error { return e.Err }

// As fills a *cairnqtype.OpenError target with e.
func (e *OpenError) As(target any) bool { return fill(target, (*cairnqtype.OpenError)(e)) }

// SubmitItemError names the item of a SubmitMany batch that failed the
// call, by its index in the batch, and wraps that item's error.
type SubmitItemError struct {
	Index int
	Err   error
}

func (e *SubmitItemError) Error() string { return (*cairnqtype.SubmitItemError)(e).Error() }

// Unwrap returns the item's own error.
func (e *SubmitItemError) Unwrap() error { return e.Err }

// As fills a *cairnqtype.SubmitItemError target with e.
func (e *SubmitItemError) As(target any) bool {
	return fill(target, (*cairnqtype.SubmitItemError)(e))
}
