package cairnq

import (
	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// Task is one stored task; see engine.Task.
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

// The conflict strategies; see engine.Conflict.
const (
	ConflictReuse          = cairnqtype.ConflictReuse
	ConflictReuseSucceeded = cairnqtype.ConflictReuseSucceeded
	ConflictReject         = cairnqtype.ConflictReject
	ConflictReplace        = cairnqtype.ConflictReplace
)

// DefaultQueue is the queue of a task submitted without one.
const DefaultQueue = cairnqtype.DefaultQueue

// Sentinel errors, usable with errors.Is; see package store for each.
var (
	ErrNotFound        = cairnqtype.ErrNotFound
	ErrAlreadyExists   = cairnqtype.ErrAlreadyExists
	ErrQueueFull       = cairnqtype.ErrQueueFull
	ErrLostLease       = cairnqtype.ErrLostLease
	ErrTaskCanceled    = cairnqtype.ErrTaskCanceled
	ErrInvalidArgument = cairnqtype.ErrInvalidArgument
	ErrBusy            = cairnqtype.ErrBusy
	ErrClosed          = cairnqtype.ErrClosed
	ErrUnsupported     = cairnqtype.ErrUnsupported
	ErrNotADatabase    = cairnqtype.ErrNotADatabase
	ErrSchemaMismatch  = cairnqtype.ErrSchemaMismatch
	ErrForeignDatabase = cairnqtype.ErrForeignDatabase
	ErrValueTooLarge   = cairnqtype.ErrValueTooLarge
	ErrStorageFull     = cairnqtype.ErrStorageFull
	ErrStorageMemory   = cairnqtype.ErrStorageMemory
	ErrStorageReadOnly = cairnqtype.ErrStorageReadOnly
	ErrNoDatabase      = cairnqtype.ErrNoDatabase
)

// Typed errors, usable with errors.As; see package store for each.
type (
	ArgumentError                = cairnqtype.ArgumentError
	AlreadyExistsError           = cairnqtype.AlreadyExistsError
	LostLeaseError               = cairnqtype.LostLeaseError
	QueueFullError               = cairnqtype.QueueFullError
	TaskFailedError              = cairnqtype.TaskFailedError
	TaskCanceledError            = cairnqtype.TaskCanceledError
	ProtocolVersionMismatchError = cairnqtype.ProtocolVersionMismatchError
	SerializationError           = cairnqtype.SerializationError
	BusyError                    = cairnqtype.BusyError
	OpenError                    = cairnqtype.OpenError
	StorageError                 = cairnqtype.StorageError
)

// The limits every backend enforces alike; see engine.MaxValueBytes and its
// neighbours for what each bounds.
const (
	MaxNameBytes    = cairnqtype.MaxNameBytes
	MaxKeyBytes     = cairnqtype.MaxKeyBytes
	MaxValueBytes   = cairnqtype.MaxValueBytes
	MaxJSONDepth    = cairnqtype.MaxJSONDepth
	MaxMessageBytes = cairnqtype.MaxMessageBytes
)

// NewTaskID returns a fresh task id: "task_" and a 26-character ULID.
func NewTaskID() string { return engine.NewTaskID() }
