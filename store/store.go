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
// concurrent use. A Store comes from cairnq.Client.Store; the zero value
// is not usable.
type Store struct{ held }

// held is the engine under a Store (engine.Of reaches it, for this
// module's own tools): unexported, so that no program outside the module
// can name or set it.
type held = engine.Held

// e is the engine under s.
func (s *Store) e() *engine.Store {
	if s == nil || engine.Of(s) == nil {
		panic("cairnq/store: a Store comes from cairnq.Client.Store; this one is nil or its zero value")
	}
	return engine.Of(s)
}

// Dialect reports which SQL dialect the database speaks.
func (s *Store) Dialect() protocol.Dialect { return s.e().Dialect() }

// Submit stores a new task named name with payload (any JSON-encodable
// value; nil is {}), or, for a keyed submit, applies opts.Conflict under
// the key's lock. It returns the task to follow: the new one, or the one
// a reuse strategy accepted. opts may be nil.
func (s *Store) Submit(ctx context.Context, name string, payload any, opts *cairnqtype.SubmitOptions) (*cairnqtype.Task, error) {
	return s.e().Submit(ctx, params(name, payload, opts))
}

// SubmitTx is Submit inside a transaction the caller holds, through sess
// (an adapter's session over it): the task exists for workers once the
// caller commits, and not at all if it rolls back. Postgres only; SQLite
// returns an error satisfying errors.Is(err, cairnqtype.ErrUnsupported).
func (s *Store) SubmitTx(ctx context.Context, sess executor.Session, name string, payload any, opts *cairnqtype.SubmitOptions) (*cairnqtype.Task, error) {
	return s.e().SubmitTx(ctx, sess, params(name, payload, opts))
}

// SubmitMany stores items in one transaction, each as Submit would, and
// returns their tasks in order; a bad item fails the whole batch with a
// *cairnqtype.SubmitItemError naming its index, and nothing is written.
// It runs no hooks (those are the Client's). See cairnq.Client.SubmitMany
// for the rules of keys repeated within a batch.
func (s *Store) SubmitMany(ctx context.Context, items []cairnqtype.SubmitItem) ([]*cairnqtype.Task, error) {
	return s.e().SubmitMany(ctx, itemParams(items))
}

// SubmitManyTx is SubmitMany inside a transaction the caller holds,
// through sess, under a savepoint of it. Postgres only.
func (s *Store) SubmitManyTx(ctx context.Context, sess executor.Session, items []cairnqtype.SubmitItem) ([]*cairnqtype.Task, error) {
	return s.e().SubmitManyTx(ctx, sess, itemParams(items))
}

func itemParams(items []cairnqtype.SubmitItem) []engine.SubmitParams {
	ps := make([]engine.SubmitParams, len(items))
	for i, it := range items {
		ps[i] = engine.SubmitParams{Name: it.Name, Payload: it.Payload, SubmitOptions: it.Options}
	}
	return ps
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
	return s.e().Get(ctx, id)
}

// GetByKey returns the task key points at.
func (s *Store) GetByKey(ctx context.Context, key string) (*cairnqtype.Task, error) {
	return s.e().GetByKey(ctx, key)
}

// GetStatus returns the id and status of the task with id, reading no
// payload or result.
func (s *Store) GetStatus(ctx context.Context, id string) (cairnqtype.TaskRef, error) {
	return s.e().GetStatus(ctx, id)
}

// GetStatusByKey is GetStatus for the task key points at.
func (s *Store) GetStatusByKey(ctx context.Context, key string) (cairnqtype.TaskRef, error) {
	return s.e().GetStatusByKey(ctx, key)
}

// List returns the tasks matching every filter of opts, newest first.
// opts may be nil.
func (s *Store) List(ctx context.Context, opts *cairnqtype.ListOptions) ([]*cairnqtype.Task, error) {
	if opts == nil {
		opts = &cairnqtype.ListOptions{}
	}
	return s.e().List(ctx, *opts)
}

// Stats counts tasks per queue and status, zero-filled: every queue with
// rows when queue is empty, else queue alone (present even without rows).
func (s *Store) Stats(ctx context.Context, queue string) (map[string]cairnqtype.StatusCounts, error) {
	return s.e().Stats(ctx, queue)
}

// Cancel cancels a queued task at once and asks a running one to stop
// (its worker settles it canceled). It returns nil, nil when no queued or
// running task has that id: a finished task is left as it is.
func (s *Store) Cancel(ctx context.Context, id string) (*cairnqtype.Task, error) {
	return s.e().Cancel(ctx, id)
}

// CancelByKey is Cancel for the task key points at, under the key's lock.
func (s *Store) CancelByKey(ctx context.Context, key string) (*cairnqtype.Task, error) {
	return s.e().CancelByKey(ctx, key)
}

// Retry puts a failed or canceled task back in the queue, clearing its
// error, progress and lease; resetAttempt also restarts its attempt count.
// It returns nil, nil when no failed or canceled task has that id.
func (s *Store) Retry(ctx context.Context, id string, resetAttempt bool) (*cairnqtype.Task, error) {
	return s.e().Retry(ctx, id, resetAttempt)
}

// RetryByKey is Retry for the task key points at, under the key's lock.
func (s *Store) RetryByKey(ctx context.Context, key string, resetAttempt bool) (*cairnqtype.Task, error) {
	return s.e().RetryByKey(ctx, key, resetAttempt)
}

// Purge deletes up to opts.Limit (default 1000) finished tasks that
// finished more than opts.OlderThan ago, optionally of one queue, status or
// name, and returns their ids; their keys go with them. Call it again
// until it returns fewer than the limit to drain a backlog in short
// writes. opts may be nil.
func (s *Store) Purge(ctx context.Context, opts *cairnqtype.PurgeOptions) ([]string, error) {
	if opts == nil {
		opts = &cairnqtype.PurgeOptions{}
	}
	return s.e().Purge(ctx, *opts)
}

// Claim recovers expired leases, then leases up to p.Limit (default 1)
// due tasks of p.Queues (and of p.Names, when set) to p.WorkerID for
// p.Lease (30 s when zero), in claim order: priority, then due time, then
// id.
func (s *Store) Claim(ctx context.Context, p cairnqtype.ClaimParams) ([]*cairnqtype.Task, error) {
	return s.e().Claim(ctx, p)
}

// Heartbeat extends the lease workerID holds on task id to lease from now
// (30 s when lease is not positive).
// The task returned shows whether a cancel was requested; an error
// satisfying errors.Is(err, cairnqtype.ErrLostLease) says the lease is
// gone.
func (s *Store) Heartbeat(ctx context.Context, id, workerID string, lease time.Duration) (*cairnqtype.Task, error) {
	return s.e().Heartbeat(ctx, id, workerID, lease)
}

// HeartbeatBatch extends, in one statement, the leases workerID still
// holds among ids as Heartbeat does, and reports for each of those whether a cancel was
// requested. An id absent from the result lost its lease.
func (s *Store) HeartbeatBatch(ctx context.Context, ids []string, workerID string, lease time.Duration) (map[string]bool, error) {
	return s.e().HeartbeatBatch(ctx, ids, workerID, lease)
}

// Progress records how far a running attempt got: a fraction from 0 to 1
// and a message. nil keeps the stored one: neither can be cleared once
// set.
func (s *Store) Progress(ctx context.Context, id, workerID string, progress *float64, message *string) (*cairnqtype.Task, error) {
	return s.e().Progress(ctx, id, workerID, progress, message)
}

// Complete settles workerID's attempt at task id: succeeded with result
// (any JSON-encodable value, or nil for none), or canceled, the result
// discarded, if a cancel was requested while it ran. It returns the status
// the task took; Get reads the row.
func (s *Store) Complete(ctx context.Context, id, workerID string, result any) (cairnqtype.TaskRef, error) {
	return s.e().Complete(ctx, id, workerID, result)
}

// CompleteTx is Complete inside a transaction the caller holds, through
// sess: the settlement commits or rolls back with the caller's own writes.
// A lost lease is an error satisfying errors.Is(err,
// cairnqtype.ErrLostLease), and the caller should roll back. Postgres
// only.
func (s *Store) CompleteTx(ctx context.Context, sess executor.Session, id, workerID string, result any) (*cairnqtype.Task, error) {
	return s.e().CompleteTx(ctx, sess, id, workerID, result)
}

// Fail records workerID's failed attempt at task id with env: canceled if
// a cancel was requested, queued again after delay (a negative one counts
// as zero) if retryable and attempts remain, else failed for good. env is stored on every branch,
// cut to fit the value limits if it must be.
func (s *Store) Fail(ctx context.Context, id, workerID string, env cairnqtype.ErrorEnvelope, retryable bool, delay time.Duration) (*cairnqtype.Task, error) {
	return s.e().Fail(ctx, id, workerID, env, retryable, delay)
}

// Snooze gives workerID's running task back to its queue, due delay from
// now, with the attempt its claim counted given back. A cancel requested
// meanwhile wins: the task ends canceled. A lost lease is an error
// satisfying errors.Is(err, cairnqtype.ErrLostLease); a negative delay an
// *cairnqtype.ArgumentError.
func (s *Store) Snooze(ctx context.Context, id, workerID string, delay time.Duration) (*cairnqtype.Task, error) {
	return s.e().Snooze(ctx, id, workerID, delay)
}
