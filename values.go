package cairnq

import (
	"reflect"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/errlink"
)

// This package declares its values (Task, SubmitOptions, the typed
// errors, ...) so that go doc shows their fields, while the engine under
// it speaks package cairnqtype's types of the same names and fields. The
// two meet here only: a value crosses once, where it enters or leaves the
// engine. A leaf struct has the same underlying type under both names
// and converts in place; a struct holding another named value is copied.

func init() { errlink.SetRoot(rootError) }

// taskOf is the engine's task under this package's name. nil stays nil.
func taskOf(t *cairnqtype.Task) *Task {
	if t == nil {
		return nil
	}
	v := new(Task)
	v.from(t)
	return v
}

func (v *Task) from(t *cairnqtype.Task) {
	*v = Task{
		ID: t.ID, Name: t.Name, Queue: t.Queue, Status: Status(t.Status),
		Payload: t.Payload, Metadata: t.Metadata, Result: t.Result,
		Error:    (*ErrorEnvelope)(t.Error),
		Progress: t.Progress, Message: t.Message,
		Attempt: t.Attempt, MaxAttempts: t.MaxAttempts, Priority: t.Priority,
		WorkerID: t.WorkerID, LeaseUntil: t.LeaseUntil, RunAt: t.RunAt,
		CancelRequestedAt: t.CancelRequestedAt,
		ParentID:          t.ParentID, RootID: t.RootID, CorrelationID: t.CorrelationID,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, CompletedAt: t.CompletedAt,
	}
}

// row is t under the engine's name. nil stays nil.
func (v *Task) row() *cairnqtype.Task {
	if v == nil {
		return nil
	}
	return &cairnqtype.Task{
		ID: v.ID, Name: v.Name, Queue: v.Queue, Status: cairnqtype.Status(v.Status),
		Payload: v.Payload, Metadata: v.Metadata, Result: v.Result,
		Error:    (*cairnqtype.ErrorEnvelope)(v.Error),
		Progress: v.Progress, Message: v.Message,
		Attempt: v.Attempt, MaxAttempts: v.MaxAttempts, Priority: v.Priority,
		WorkerID: v.WorkerID, LeaseUntil: v.LeaseUntil, RunAt: v.RunAt,
		CancelRequestedAt: v.CancelRequestedAt,
		ParentID:          v.ParentID, RootID: v.RootID, CorrelationID: v.CorrelationID,
		CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt, CompletedAt: v.CompletedAt,
	}
}

// tasksOf converts a slice of tasks into one backing array, so a batch
// costs two allocations, not one per task. A nil task stays nil.
func tasksOf(ts []*cairnqtype.Task) []*Task {
	if ts == nil {
		return nil
	}
	vs := make([]Task, len(ts))
	out := make([]*Task, len(ts))
	for i, t := range ts {
		if t != nil {
			vs[i].from(t)
			out[i] = &vs[i]
		}
	}
	return out
}

// taskResult converts an engine call's task and error.
func taskResult(t *cairnqtype.Task, err error) (*Task, error) { return taskOf(t), userErr(err) }

// tasksResult converts an engine call's tasks and error.
func tasksResult(ts []*cairnqtype.Task, err error) ([]*Task, error) {
	return tasksOf(ts), userErr(err)
}

// refResult converts an engine call's task reference and error.
func refResult(r cairnqtype.TaskRef, err error) (TaskRef, error) {
	return TaskRef{ID: r.ID, Status: Status(r.Status)}, userErr(err)
}

func (o SubmitOptions) row() cairnqtype.SubmitOptions {
	return cairnqtype.SubmitOptions{
		Queue: o.Queue, Key: o.Key, Conflict: cairnqtype.Conflict(o.Conflict),
		MaxAttempts: o.MaxAttempts, Priority: o.Priority, Delay: o.Delay,
		Metadata: o.Metadata, ParentID: o.ParentID, RootID: o.RootID,
		CorrelationID: o.CorrelationID,
	}
}

func (o ListOptions) row() cairnqtype.ListOptions {
	return cairnqtype.ListOptions{
		Status: cairnqtype.Status(o.Status), Queue: o.Queue, Name: o.Name,
		RootID: o.RootID, CorrelationID: o.CorrelationID, Search: o.Search, Limit: o.Limit, Offset: o.Offset,
	}
}

func (o PurgeOptions) row() cairnqtype.PurgeOptions {
	return cairnqtype.PurgeOptions{
		OlderThan: o.OlderThan, Queue: o.Queue, Status: cairnqtype.Status(o.Status),
		Name: o.Name, Limit: o.Limit,
	}
}

// convertAll converts each of in with conv.
func convertAll[F, T any](in []F, conv func(F) T) []T {
	if in == nil {
		return nil
	}
	out := make([]T, len(in))
	for i, v := range in {
		out[i] = conv(v)
	}
	return out
}

func schemaStatusOf(s *cairnqtype.SchemaStatus) *SchemaStatus {
	if s == nil {
		return nil
	}
	return &SchemaStatus{
		State: SchemaState(s.State), Schema: s.Schema,
		ProtocolVersion: s.ProtocolVersion, SchemaVersion: s.SchemaVersion,
		SDKProtocolVersion: s.SDKProtocolVersion, SDKSchemaVersion: s.SDKSchemaVersion,
		Migrations: convertAll(s.Migrations, func(m cairnqtype.AppliedMigration) AppliedMigration { return AppliedMigration(m) }),
		Missing:    s.Missing, Unknown: s.Unknown,
	}
}

// fill sets target, a **T, to e; it reports whether target was one.
func fill[T any](target any, e *T) bool {
	t, ok := target.(**T)
	if ok {
		*t = e
	}
	return ok
}

// userErr is err with its top, when that is one of the engine's typed
// errors, under this package's name, so that %T and a type switch on
// what a call returned see this package's type. A leaf error's two names
// share its memory; one holding another named value is a copy. An error wrapped deeper keeps the engine's name;
// errors.As finds it under either (rootError).
func userErr(err error) error {
	if v, ok := rootView(err); ok {
		return v
	}
	return err
}

// rootView is err under this package's name, when err is one of the
// engine's typed errors.
func rootView(err error) (error, bool) {
	switch e := err.(type) {
	case *cairnqtype.ArgumentError:
		return (*ArgumentError)(e), true
	case *cairnqtype.AlreadyExistsError:
		return (*AlreadyExistsError)(e), true
	case *cairnqtype.LostLeaseError:
		return (*LostLeaseError)(e), true
	case *cairnqtype.QueueFullError:
		return (*QueueFullError)(e), true
	case *cairnqtype.ProtocolVersionMismatchError:
		return (*ProtocolVersionMismatchError)(e), true
	case *cairnqtype.SerializationError:
		return (*SerializationError)(e), true
	case *cairnqtype.BusyError:
		return (*BusyError)(e), true
	case *cairnqtype.StorageError:
		return (*StorageError)(e), true
	case *cairnqtype.OpenError:
		return (*OpenError)(e), true
	case *cairnqtype.SubmitItemError:
		// A copy: the item's own error takes this package's name too, as
		// the same Submit would have returned it.
		return &SubmitItemError{Index: e.Index, Err: userErr(e.Err)}, true
	case *cairnqtype.TaskFailedError:
		return &TaskFailedError{ID: e.ID, Envelope: ErrorEnvelope(e.Envelope), Task: taskOf(e.Task)}, true
	case *cairnqtype.TaskCanceledError:
		return &TaskCanceledError{ID: e.ID, Task: taskOf(e.Task)}, true
	case *engine.DurableFormatError:
		return (*DurableFormatError)(e), true
	case *engine.EventRefusedError:
		out := &EventRefusedError{TaskID: e.TaskID, Event: e.Event, Status: Status(e.Status), TimedOut: e.WaitEnded}
		if e.Existing != nil {
			out.Delivered, out.TimedOut = !e.Existing.TimedOut, e.Existing.TimedOut
		}
		return out, true
	}
	return nil, false
}

// rootError fills target, a pointer errors.As was given, with err under
// this package's name when that is what target holds (errlink's hook,
// so that errors.As finds an engine error under either name).
func rootError(err error, target any) bool {
	v, ok := rootView(err)
	if !ok {
		return false
	}
	t := reflect.ValueOf(target).Elem()
	if !reflect.TypeOf(v).AssignableTo(t.Type()) {
		return false
	}
	t.Set(reflect.ValueOf(v))
	return true
}
