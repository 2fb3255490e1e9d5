package cairnq

import "github.com/cairnq/cairnq-go/store"

// Task is one stored task; see store.Task.
type Task = store.Task

// TaskRef is a task's id and status.
type TaskRef = store.TaskRef

// Status is a task's status.
type Status = store.Status

// The task statuses.
const (
	StatusQueued    = store.StatusQueued
	StatusRunning   = store.StatusRunning
	StatusSucceeded = store.StatusSucceeded
	StatusFailed    = store.StatusFailed
	StatusCanceled  = store.StatusCanceled
)

// ErrorEnvelope is the protocol's JSON error record.
type ErrorEnvelope = store.ErrorEnvelope

// StatusCounts holds per-status task counts for one queue.
type StatusCounts = store.StatusCounts

// Conflict is a keyed submit's conflict strategy.
type Conflict = store.Conflict

// The conflict strategies; see store.Conflict.
const (
	ConflictReuse          = store.ConflictReuse
	ConflictReuseSucceeded = store.ConflictReuseSucceeded
	ConflictReject         = store.ConflictReject
	ConflictReplace        = store.ConflictReplace
)

// DefaultQueue is the queue of a task submitted without one.
const DefaultQueue = store.DefaultQueue

// Sentinel errors, usable with errors.Is; see package store for each.
var (
	ErrNotFound        = store.ErrNotFound
	ErrAlreadyExists   = store.ErrAlreadyExists
	ErrQueueFull       = store.ErrQueueFull
	ErrLostLease       = store.ErrLostLease
	ErrTaskCanceled    = store.ErrTaskCanceled
	ErrInvalidArgument = store.ErrInvalidArgument
	ErrBusy            = store.ErrBusy
	ErrClosed          = store.ErrClosed
	ErrUnsupported     = store.ErrUnsupported
	ErrNotADatabase    = store.ErrNotADatabase
	ErrSchemaMismatch  = store.ErrSchemaMismatch
	ErrForeignDatabase = store.ErrForeignDatabase
	ErrValueTooLarge   = store.ErrValueTooLarge
	ErrStorageFull     = store.ErrStorageFull
	ErrStorageMemory   = store.ErrStorageMemory
	ErrStorageReadOnly = store.ErrStorageReadOnly
	ErrNoDatabase      = store.ErrNoDatabase
)

// Typed errors, usable with errors.As; see package store for each.
type (
	ArgumentError                = store.ArgumentError
	AlreadyExistsError           = store.AlreadyExistsError
	LostLeaseError               = store.LostLeaseError
	QueueFullError               = store.QueueFullError
	TaskFailedError              = store.TaskFailedError
	TaskCanceledError            = store.TaskCanceledError
	ProtocolVersionMismatchError = store.ProtocolVersionMismatchError
	SerializationError           = store.SerializationError
	BusyError                    = store.BusyError
	OpenError                    = store.OpenError
	StorageError                 = store.StorageError
)

// The limits every backend enforces alike; see store.MaxValueBytes and its
// neighbours for what each bounds.
const (
	MaxNameBytes    = store.MaxNameBytes
	MaxKeyBytes     = store.MaxKeyBytes
	MaxValueBytes   = store.MaxValueBytes
	MaxJSONDepth    = store.MaxJSONDepth
	MaxMessageBytes = store.MaxMessageBytes
)

// NewTaskID returns a fresh task id: "task_" and a 26-character ULID.
func NewTaskID() string { return store.NewTaskID() }
