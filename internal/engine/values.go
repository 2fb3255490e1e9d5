package engine

import "github.com/cairnq/cairnq-go/cairnqtype"

// The values every floor shares are defined in package cairnqtype; the
// engine names them unqualified.
type (
	SchemaState                  = cairnqtype.SchemaState
	AppliedMigration             = cairnqtype.AppliedMigration
	SchemaStatus                 = cairnqtype.SchemaStatus
	QueueAge                     = cairnqtype.QueueAge
	FailureCount                 = cairnqtype.FailureCount
	ClaimParams                  = cairnqtype.ClaimParams
	AlreadyExistsError           = cairnqtype.AlreadyExistsError
	ArgumentError                = cairnqtype.ArgumentError
	BusyError                    = cairnqtype.BusyError
	Conflict                     = cairnqtype.Conflict
	ErrorEnvelope                = cairnqtype.ErrorEnvelope
	LostLeaseError               = cairnqtype.LostLeaseError
	OpenError                    = cairnqtype.OpenError
	ProtocolVersionMismatchError = cairnqtype.ProtocolVersionMismatchError
	QueueFullError               = cairnqtype.QueueFullError
	SerializationError           = cairnqtype.SerializationError
	Status                       = cairnqtype.Status
	StatusCounts                 = cairnqtype.StatusCounts
	StorageError                 = cairnqtype.StorageError
	Task                         = cairnqtype.Task
	TaskCanceledError            = cairnqtype.TaskCanceledError
	TaskFailedError              = cairnqtype.TaskFailedError
	TaskRef                      = cairnqtype.TaskRef
)

const (
	SchemaAbsent           = cairnqtype.SchemaAbsent
	SchemaCurrent          = cairnqtype.SchemaCurrent
	SchemaBehind           = cairnqtype.SchemaBehind
	SchemaAhead            = cairnqtype.SchemaAhead
	SchemaIncompatible     = cairnqtype.SchemaIncompatible
	StatusCanceled         = cairnqtype.StatusCanceled
	StatusFailed           = cairnqtype.StatusFailed
	StatusQueued           = cairnqtype.StatusQueued
	StatusRunning          = cairnqtype.StatusRunning
	StatusSucceeded        = cairnqtype.StatusSucceeded
	ConflictReject         = cairnqtype.ConflictReject
	ConflictReplace        = cairnqtype.ConflictReplace
	ConflictReuse          = cairnqtype.ConflictReuse
	ConflictReuseSucceeded = cairnqtype.ConflictReuseSucceeded
	DefaultQueue           = cairnqtype.DefaultQueue
	MaxNameBytes           = cairnqtype.MaxNameBytes
	MaxKeyBytes            = cairnqtype.MaxKeyBytes
	MaxValueBytes          = cairnqtype.MaxValueBytes
	MaxJSONDepth           = cairnqtype.MaxJSONDepth
	MaxMessageBytes        = cairnqtype.MaxMessageBytes
	MaxPriority            = cairnqtype.MaxPriority
	MinPriority            = cairnqtype.MinPriority
	MaxAttemptsLimit       = cairnqtype.MaxAttemptsLimit
)

var (
	ErrAlreadyExists    = cairnqtype.ErrAlreadyExists
	ErrBusy             = cairnqtype.ErrBusy
	ErrClosed           = cairnqtype.ErrClosed
	ErrForeignDatabase  = cairnqtype.ErrForeignDatabase
	ErrInvalidArgument  = cairnqtype.ErrInvalidArgument
	ErrLostLease        = cairnqtype.ErrLostLease
	ErrNoDatabase       = cairnqtype.ErrNoDatabase
	ErrDatabaseReplaced = cairnqtype.ErrDatabaseReplaced
	ErrNotADatabase     = cairnqtype.ErrNotADatabase
	ErrNotFound         = cairnqtype.ErrNotFound
	ErrQueueFull        = cairnqtype.ErrQueueFull
	ErrSchemaMismatch   = cairnqtype.ErrSchemaMismatch
	ErrStorageFull      = cairnqtype.ErrStorageFull
	ErrStorageMemory    = cairnqtype.ErrStorageMemory
	ErrStorageReadOnly  = cairnqtype.ErrStorageReadOnly
	ErrTaskCanceled     = cairnqtype.ErrTaskCanceled
	ErrUnsupported      = cairnqtype.ErrUnsupported
	ErrValueTooLarge    = cairnqtype.ErrValueTooLarge
)

var Statuses = cairnqtype.Statuses
