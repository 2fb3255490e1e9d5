package cairnqtype

import (
	"errors"
	"fmt"
	"time"

	"github.com/cairnq/cairnq-go/internal/errlink"
)

// Sentinel errors. Every error the store returns for one of these kinds
// satisfies errors.Is with the sentinel; the typed errors below carry the
// task id, key or envelope as well.
var (
	// ErrNotFound: no task with that id, or no task under that key.
	ErrNotFound = errors.New("cairnq: task not found")
	// ErrAlreadyExists: a keyed submit with the reject strategy found the key taken.
	ErrAlreadyExists = errors.New("cairnq: task key already exists")
	// ErrQueueFull: a gated submit waited its whole budget for room on the queue.
	ErrQueueFull = errors.New("cairnq: queue is full")
	// ErrLostLease: an ownership-checked write found the lease gone (expired,
	// reclaimed, or the task settled elsewhere).
	ErrLostLease = errors.New("cairnq: lease lost")
	// ErrTaskCanceled: the task a caller waited on ended canceled.
	ErrTaskCanceled = errors.New("cairnq: task canceled")
	// ErrInvalidArgument: a call was given input it cannot act on; nothing was written.
	ErrInvalidArgument = errors.New("cairnq: invalid argument")
	// ErrBusy: another process kept the SQLite database locked past the busy timeout.
	ErrBusy = errors.New("cairnq: database is busy")
	// ErrClosed: the store was used after Close.
	ErrClosed = errors.New("cairnq: store is closed")
	// ErrUnsupported: the operation needs a capability this store lacks
	// (sharing a transaction needs Postgres).
	ErrUnsupported = errors.New("cairnq: not supported by this store")
	// ErrNotADatabase: the file exists but is not a SQLite database.
	ErrNotADatabase = errors.New("cairnq: file is not a SQLite database")
	// ErrForeignDatabase: the SQLite file holds another application's
	// tables and no cairnq ones; nothing was added to it.
	ErrForeignDatabase = errors.New("cairnq: database belongs to another application")
	// ErrSchemaMismatch: the database holds a cairnq installation the store
	// cannot safely use from where it stands.
	ErrSchemaMismatch = errors.New("cairnq: schema mismatch")
	// ErrNoDatabase: a store opened with OpenExisting found no cairnq
	// installation: no SQLite file at the path, no schema of that name, or
	// no cairnq tables in the database. Nothing was created.
	ErrNoDatabase = errors.New("cairnq: no such database")
	// ErrDatabaseReplaced: the SQLite file this store opened is no longer
	// the file at its path (deleted, moved away, or replaced by another
	// file, as a restored backup or a remounted volume is). Every process
	// opening the path now reaches the new file, so this store stops
	// rather than run a queue nobody else sees: every call fails with it,
	// and a Worker's Run returns it. A write that failed with it kept
	// nothing. Open the path again (restart the process) to serve the
	// file now there.
	ErrDatabaseReplaced = errors.New("cairnq: the database file was deleted or replaced")
)

// ErrUnavailable: the database could not be reached. The connection was
// lost (the server restarted or crashed, a proxy or the network cut it),
// the server is starting up or shutting down, or no connection could be
// made (refused, timed out, too many connections, a pooler that cannot
// reach the server). It is an outage, not a fault of the call: the same
// call may succeed once the server is back. Every Postgres adapter of
// this module reports these failures with it, and so does the client
// over an executor written elsewhere that wraps its driver's errors with
// %w. The driver's own error stays inside, for errors.As (a
// *pgconn.PgError, a *pq.Error, a *net.OpError). SQLite never returns it.
//
// A connection refused for good is not one: a wrong password, a database
// that does not exist, and what a connection pooler refuses while the
// connection is being made. pgbouncer answers an unknown database, a
// startup parameter it does not pass on and a wrong password with SQLSTATE
// 08P01, the code it also answers mid-session when it lost its server, so
// only knowing when the error came tells them apart. The pgx adapter
// knows it on every pool, the lib/pq adapter on the pool its Open makes.
// Over a *sql.DB the application built itself (the lib/pq adapter's New,
// sqlexec.New, the gorm and bun adapters) and under an executor written
// elsewhere it cannot be known, and a pooler's refusal at connect is
// ErrUnavailable there: bound the retries. The other way round, an 08P01
// at connect that is pgbouncer out of client connections
// (max_client_conn), or before pgbouncer 1.20 a server behind it that it
// never reached saying it is starting up, is a refusal, not
// ErrUnavailable.
//
// Whether a retry is safe depends on the call, because a connection lost
// after a write was sent leaves the write's outcome unknown: the server
// may have committed it and lost only the answer. Reads are safe to
// retry. So are the writes that hold to a task's state: a settlement
// whose first try took effect finds its lease gone (ErrLostLease), a
// heartbeat extends the lease again, a cancel finds nothing left to
// cancel. A keyed submit retried under the same key finds the task the first try
// stored while that task is live (ConflictReuse), or reports it as an
// *AlreadyExistsError (ConflictReject); under ConflictReplace the retry
// cancels it and stores another. An unkeyed submit (Submit, SubmitMany,
// Call) can be stored twice by a retry: give it a key to retry it safely.
// A workflow (SubmitWorkflow, CallWorkflow) takes no key: a retry can
// store the whole workflow twice.
var ErrUnavailable = errors.New("cairnq: database unavailable")

// ArgumentError is an invalid argument: which call, which argument, why.
type ArgumentError struct {
	Op     string // e.g. "submit"
	Arg    string // e.g. "name"
	Reason string
}

func (e *ArgumentError) Error() string {
	return fmt.Sprintf("cairnq: %s: invalid %s: %s", e.Op, e.Arg, e.Reason)
}

// As fills a *cairnq.ArgumentError target (package cairnq's type of the
// same name and fields) with e, so errors.As finds it under either name.
func (e *ArgumentError) As(target any) bool { return errlink.As(e, target) }

// Is makes errors.Is(err, ErrInvalidArgument) hold.
func (e *ArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

// AlreadyExistsError reports the key a reject-strategy submit found taken.
type AlreadyExistsError struct {
	Key    string
	TaskID string // the task the key points at
}

func (e *AlreadyExistsError) Error() string {
	return fmt.Sprintf("cairnq: a task with key %q already exists (%s)", e.Key, e.TaskID)
}

// As fills a *cairnq.AlreadyExistsError target (package cairnq's type of the
// same name and fields) with e, so errors.As finds it under either name.
func (e *AlreadyExistsError) As(target any) bool { return errlink.As(e, target) }

// Is makes errors.Is(err, ErrAlreadyExists) hold.
func (e *AlreadyExistsError) Is(target error) bool { return target == ErrAlreadyExists }

// LostLeaseError names the task whose lease was lost.
type LostLeaseError struct{ ID string }

func (e *LostLeaseError) Error() string { return "cairnq: lost lease on task " + e.ID }

// Is makes errors.Is(err, ErrLostLease) hold.
func (e *LostLeaseError) Is(target error) bool { return target == ErrLostLease }

// TaskID returns the task whose lease was lost.
func (e *LostLeaseError) TaskID() string { return e.ID }

// QueueFullError reports a gated submit that gave up waiting.
type QueueFullError struct {
	Queue    string
	MaxDepth int
	Waited   time.Duration
}

// As fills a *cairnq.LostLeaseError target (package cairnq's type of the
// same name and fields) with e, so errors.As finds it under either name.
func (e *LostLeaseError) As(target any) bool { return errlink.As(e, target) }

func (e *QueueFullError) Error() string {
	return fmt.Sprintf("cairnq: queue %q still held %d or more queued tasks after %v; nothing was submitted",
		e.Queue, e.MaxDepth, e.Waited.Round(time.Millisecond))
}

// As fills a *cairnq.QueueFullError target (package cairnq's type of the
// same name and fields) with e, so errors.As finds it under either name.
func (e *QueueFullError) As(target any) bool { return errlink.As(e, target) }

// Is makes errors.Is(err, ErrQueueFull) hold.
func (e *QueueFullError) Is(target error) bool { return target == ErrQueueFull }

// TaskFailedError reports that a waited-on task ended failed. Envelope is
// the recorded error, Task the final row.
type TaskFailedError struct {
	ID       string
	Envelope ErrorEnvelope
	Task     *Task
}

func (e *TaskFailedError) Error() string {
	return fmt.Sprintf("cairnq: task %s failed: %s (%s/%s)", e.ID, e.Envelope.Message, e.Envelope.Type, e.Envelope.Code)
}

// As fills a *cairnq.TaskFailedError target (package cairnq's type of the
// same name and fields) with e, so errors.As finds it under either name.
func (e *TaskFailedError) As(target any) bool { return errlink.As(e, target) }

// TaskID returns the failed task's id.
func (e *TaskFailedError) TaskID() string { return e.ID }

// TaskCanceledError reports that a waited-on task ended canceled.
type TaskCanceledError struct {
	ID   string
	Task *Task
}

func (e *TaskCanceledError) Error() string { return "cairnq: task " + e.ID + " was canceled" }

// Is makes errors.Is(err, ErrTaskCanceled) hold.
func (e *TaskCanceledError) Is(target error) bool { return target == ErrTaskCanceled }

// TaskID returns the canceled task's id.
func (e *TaskCanceledError) TaskID() string { return e.ID }

// ProtocolVersionMismatchError reports a database speaking another protocol
// major than this SDK. Nothing was written to it.
type ProtocolVersionMismatchError struct {
	Found     int
	Supported int
}

// As fills a *cairnq.TaskCanceledError target (package cairnq's type of the
// same name and fields) with e, so errors.As finds it under either name.
func (e *TaskCanceledError) As(target any) bool { return errlink.As(e, target) }

func (e *ProtocolVersionMismatchError) Error() string {
	return fmt.Sprintf("cairnq: database has protocol_version %d, this SDK speaks %d", e.Found, e.Supported)
}

// As fills a *cairnq.ProtocolVersionMismatchError target (package cairnq's type of the
// same name and fields) with e, so errors.As finds it under either name.
func (e *ProtocolVersionMismatchError) As(target any) bool { return errlink.As(e, target) }

// SerializationError reports a value JSON cannot hold (NaN, ±Inf, a channel,
// a function, a cycle), or whose JSON is past the limits both backends
// share (see MaxValueBytes, MaxJSONDepth: too large, too deep, a NUL
// character, a string that is not UTF-8). Nothing was written. It
// satisfies errors.Is(err, ErrInvalidArgument), and errors.Is(err,
// ErrValueTooLarge) for a value past MaxValueBytes.
type SerializationError struct {
	Field string // payload, metadata, result or error
	Err   error
}

// Is makes errors.Is(err, ErrInvalidArgument) hold: the value was bad input.
func (e *SerializationError) Is(target error) bool { return target == ErrInvalidArgument }

func (e *SerializationError) Error() string {
	return fmt.Sprintf("cairnq: %s is not JSON-serializable: %v", e.Field, e.Err)
}

// As fills a *cairnq.SerializationError target (package cairnq's type of the
// same name and fields) with e, so errors.As finds it under either name.
func (e *SerializationError) As(target any) bool { return errlink.As(e, target) }

func (e *SerializationError) Unwrap() error { return e.Err }

// BusyError reports a write that waited out the busy timeout.
type BusyError struct {
	Timeout time.Duration
	Err     error
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("cairnq: database stayed locked by another connection for %v: %v", e.Timeout, e.Err)
}

// As fills a *cairnq.BusyError target (package cairnq's type of the
// same name and fields) with e, so errors.As finds it under either name.
func (e *BusyError) As(target any) bool { return errlink.As(e, target) }

// Is makes errors.Is(err, ErrBusy) hold.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

func (e *BusyError) Unwrap() error { return e.Err }

// Storage failure kinds a *StorageError carries, for errors.Is.
var (
	// ErrStorageFull: the disk (or the database's quota) is full. Nothing
	// of the failed write was kept; it may succeed once space is freed.
	ErrStorageFull = errors.New("cairnq: storage is full")
	// ErrStorageMemory: the embedded SQLite ran out of memory for one
	// statement. Nothing of the failed write was kept; the connection was
	// replaced, and other writes go on.
	ErrStorageMemory = errors.New("cairnq: database ran out of memory")
	// ErrStorageReadOnly: the database can only be read by this process
	// (a SQLite file it has no permission to write, as a backup or an
	// operator's copy is): Options.OpenExisting opens it for reading, and
	// every write fails, keeping nothing.
	ErrStorageReadOnly = errors.New("cairnq: permission denied: the database is read-only to this process")
)

// StorageError reports a write the database could not keep for a reason
// outside the caller's input: a full disk, memory exhausted. Kind is one
// of the ErrStorage sentinels, which errors.Is matches.
type StorageError struct {
	Op   string // e.g. "write"
	Kind error  // ErrStorageFull, ErrStorageMemory or ErrStorageReadOnly
	Err  error  // the driver's error
}

func (e *StorageError) Error() string { return fmt.Sprintf("%v (%s): %v", e.Kind, e.Op, e.Err) }

// Is makes errors.Is(err, e.Kind) hold.
func (e *StorageError) Is(target error) bool { return target == e.Kind }

func (e *StorageError) Unwrap() error { return e.Err }

// OpenError reports a database that could not be opened or prepared.
type OpenError struct {
	// Path is the SQLite file, or the Postgres server and database an
	// adapter's Open was given (host:port/dbname, no credentials).
	Path string
	Err  error
}

// As fills a *cairnq.StorageError target (package cairnq's type of the
// same name and fields) with e, so errors.As finds it under either name.
func (e *StorageError) As(target any) bool { return errlink.As(e, target) }

func (e *OpenError) Error() string { return fmt.Sprintf("cairnq: open %s: %v", e.Path, e.Err) }

func (e *OpenError) Unwrap() error { return e.Err }

// SubmitItemError reports the item of a SubmitMany batch that failed the
// call: its index in the batch and its error (an *ArgumentError, a
// *SerializationError, an *AlreadyExistsError, a hook's error, ...), which
// errors.Is and errors.As see through Unwrap. Unless the call's
// documentation says otherwise, nothing of the batch was written.
type SubmitItemError struct {
	Index int
	Err   error
}

// As fills a *cairnq.OpenError target (package cairnq's type of the
// same name and fields) with e, so errors.As finds it under either name.
func (e *OpenError) As(target any) bool { return errlink.As(e, target) }

func (e *SubmitItemError) Error() string {
	return fmt.Sprintf("cairnq: submit many: item %d: %v", e.Index, e.Err)
}

// As fills a *cairnq.SubmitItemError target (package cairnq's type of the
// same name and fields) with e, so errors.As finds it under either name.
func (e *SubmitItemError) As(target any) bool { return errlink.As(e, target) }

func (e *SubmitItemError) Unwrap() error { return e.Err }
