package store

import (
	"context"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/protocol"
)

// Store runs the protocol's operations on one database. It is safe for
// concurrent use.
type Store struct{ e *engine.Store }

// New returns the Store over an engine. Only this module can call it (it
// names an internal type): users take a Store from Client.Store.
func New(e *engine.Store) *Store { return &Store{e: e} }

// Engine returns the engine under s, for this module's own tools (the
// console, conformance, cairnqtest, the benchmarks): its type is internal
// to the module.
func (s *Store) Engine() *engine.Store { return s.e }

// Dialect reports which SQL dialect the database speaks.
func (s *Store) Dialect() protocol.Dialect { return s.e.Dialect() }

// Submit stores a new task named name with payload (any JSON-encodable
// value; nil is {}), or, for a keyed submit, applies opts.Conflict under
// the key's lock. It returns the task to follow: the new one, or the one
// a reuse strategy accepted. opts may be nil.
func (s *Store) Submit(ctx context.Context, name string, payload any, opts *cairnqtype.SubmitOptions) (*cairnqtype.Task, error) {
	return s.e.Submit(ctx, params(name, payload, opts))
}

// SubmitTx is Submit inside the caller's transaction sess (Postgres only):
// the task exists once, and only if, the caller commits.
func (s *Store) SubmitTx(ctx context.Context, sess executor.Session, name string, payload any, opts *cairnqtype.SubmitOptions) (*cairnqtype.Task, error) {
	return s.e.SubmitTx(ctx, sess, params(name, payload, opts))
}

func params(name string, payload any, opts *cairnqtype.SubmitOptions) engine.SubmitParams {
	p := engine.SubmitParams{Name: name, Payload: payload}
	if opts != nil {
		p.SubmitOptions = *opts
	}
	return p
}

// Get returns the task with id, or an error satisfying
// errors.Is(err, cairnqtype.ErrNotFound).
func (s *Store) Get(ctx context.Context, id string) (*cairnqtype.Task, error) {
	return s.e.Get(ctx, id)
}

// GetByKey returns the task key points at.
func (s *Store) GetByKey(ctx context.Context, key string) (*cairnqtype.Task, error) {
	return s.e.GetByKey(ctx, key)
}

// GetStatus returns the id and status of the task with id, reading no
// payload or result.
func (s *Store) GetStatus(ctx context.Context, id string) (cairnqtype.TaskRef, error) {
	return s.e.GetStatus(ctx, id)
}

// GetStatusByKey is GetStatus for the task key points at.
func (s *Store) GetStatusByKey(ctx context.Context, key string) (cairnqtype.TaskRef, error) {
	return s.e.GetStatusByKey(ctx, key)
}

// List returns the tasks matching every filter of opts, newest first.
// opts may be nil.
func (s *Store) List(ctx context.Context, opts *cairnqtype.ListOptions) ([]*cairnqtype.Task, error) {
	if opts == nil {
		opts = &cairnqtype.ListOptions{}
	}
	return s.e.List(ctx, *opts)
}

// Stats counts tasks per status for each queue, or for queue alone when
// it is not empty.
func (s *Store) Stats(ctx context.Context, queue string) (map[string]cairnqtype.StatusCounts, error) {
	return s.e.Stats(ctx, queue)
}

// Cancel cancels a queued task at once and asks a running one to stop
// (its handler sees it on its next heartbeat); a finished task is
// returned as it is.
func (s *Store) Cancel(ctx context.Context, id string) (*cairnqtype.Task, error) {
	return s.e.Cancel(ctx, id)
}

// CancelByKey is Cancel for the task key points at.
func (s *Store) CancelByKey(ctx context.Context, key string) (*cairnqtype.Task, error) {
	return s.e.CancelByKey(ctx, key)
}

// Retry queues a failed or canceled task again, its attempts counted from
// zero when resetAttempt is set.
func (s *Store) Retry(ctx context.Context, id string, resetAttempt bool) (*cairnqtype.Task, error) {
	return s.e.Retry(ctx, id, resetAttempt)
}

// RetryByKey is Retry for the task key points at.
func (s *Store) RetryByKey(ctx context.Context, key string, resetAttempt bool) (*cairnqtype.Task, error) {
	return s.e.RetryByKey(ctx, key, resetAttempt)
}

// Purge deletes finished tasks chosen by opts and returns their ids.
// opts may be nil.
func (s *Store) Purge(ctx context.Context, opts *cairnqtype.PurgeOptions) ([]string, error) {
	if opts == nil {
		opts = &cairnqtype.PurgeOptions{}
	}
	return s.e.Purge(ctx, *opts)
}

// Claim leases up to p.Limit due tasks to p.WorkerID, recovering expired
// leases first, as a worker's claim does.
func (s *Store) Claim(ctx context.Context, p cairnqtype.ClaimParams) ([]*cairnqtype.Task, error) {
	return s.e.Claim(ctx, p)
}

// Heartbeat extends the lease workerID holds on task id by lease; an
// error satisfying errors.Is(err, cairnqtype.ErrLostLease) says the lease
// is gone.
func (s *Store) Heartbeat(ctx context.Context, id, workerID string, lease time.Duration) (*cairnqtype.Task, error) {
	return s.e.Heartbeat(ctx, id, workerID, lease)
}

// HeartbeatBatch extends the leases workerID holds on ids in one
// statement and reports, per id, whether the lease was still held.
func (s *Store) HeartbeatBatch(ctx context.Context, ids []string, workerID string, lease time.Duration) (map[string]bool, error) {
	return s.e.HeartbeatBatch(ctx, ids, workerID, lease)
}

// Progress records a running task's progress (0 to 1) and message; nil
// leaves either as it is.
func (s *Store) Progress(ctx context.Context, id, workerID string, progress *float64, message *string) (*cairnqtype.Task, error) {
	return s.e.Progress(ctx, id, workerID, progress, message)
}

// Complete settles task id as succeeded with result (any JSON-encodable
// value, or nil for none), or as canceled if a cancel was requested.
func (s *Store) Complete(ctx context.Context, id, workerID string, result any) (cairnqtype.TaskRef, error) {
	return s.e.Complete(ctx, id, workerID, result)
}

// CompleteTx is Complete inside the caller's transaction sess (Postgres
// only), so that the task settles exactly when the caller's own writes
// commit.
func (s *Store) CompleteTx(ctx context.Context, sess executor.Session, id, workerID string, result any) (*cairnqtype.Task, error) {
	return s.e.CompleteTx(ctx, sess, id, workerID, result)
}

// Fail records a failed attempt with env: queued again after delay when
// retryable and attempts remain, failed for good otherwise.
func (s *Store) Fail(ctx context.Context, id, workerID string, env cairnqtype.ErrorEnvelope, retryable bool, delay time.Duration) (*cairnqtype.Task, error) {
	return s.e.Fail(ctx, id, workerID, env, retryable, delay)
}

// Snooze gives a running task back to its queue, due after delay, without
// spending an attempt.
func (s *Store) Snooze(ctx context.Context, id, workerID string, delay time.Duration) (*cairnqtype.Task, error) {
	return s.e.Snooze(ctx, id, workerID, delay)
}
