package engine

import (
	"context"
	"math"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/protocol"
)

// Cancel cancels a queued task at once and asks a running one to stop (the
// worker settles it canceled). It returns nil, nil when no queued or running
// task has that id.
func (s *Store) Cancel(ctx context.Context, id string) (*cairnqtype.Task, error) {
	return s.cancel(ctx, stmtCancel, id, protocol.Args{"id": id})
}

// cancel runs stmt, cancel or cancel_matching, on task id, for Cancel
// and CancelMatching: what it canceled ends its waiters' waits and, a
// workflow's step, advances its workflow.
func (s *Store) cancel(ctx context.Context, stmt, id string, a protocol.Args) (*cairnqtype.Task, error) {
	if err := checkID("cancel", id); err != nil {
		return nil, err
	}
	rows, err := s.writeOne(ctx, stmt, a)
	if err != nil {
		return nil, err
	}
	t, err := oneTask(rows)
	s.settled(t)
	s.stepEnded(ctx, t)
	return t, err
}

// CancelByKey is Cancel for the task key points at, under the key's lock.
func (s *Store) CancelByKey(ctx context.Context, key string) (*cairnqtype.Task, error) {
	t, err := s.byKey(ctx, key, stmtCancel, protocol.Args{})
	s.settled(t)
	s.stepEnded(ctx, t)
	return t, err
}

// stepEnded advances the workflow of t, when t is a workflow's step that
// a plain operation ended otherwise than by success (a cancel of a queued
// step, a lease recovery out of attempts): an advance from a settled step
// reads no ledger, and must not insert steps after a failure under
// CancelRest. An error is left to the workflow's sweep, which advances
// it all the same.
func (s *Store) stepEnded(ctx context.Context, t *cairnqtype.Task) {
	if t == nil || !t.IsTerminal() || t.Status == cairnqtype.StatusSucceeded {
		return
	}
	if mark, ok := StepMarkOf(t); ok {
		_, _ = s.AdvanceWorkflow(ctx, mark.Record, stepEndedWorker)
	}
}

// stepEndedWorker is the worker id under which stepEnded finishes a
// workflow.
const stepEndedWorker = "cairnq.workflow.step-ended"

// Retry puts a failed or canceled task back in the queue, clearing its
// error, progress and lease; resetAttempt also restarts its attempt count.
// It returns nil, nil when no failed or canceled task has that id.
func (s *Store) Retry(ctx context.Context, id string, resetAttempt bool) (*cairnqtype.Task, error) {
	if err := checkID("retry", id); err != nil {
		return nil, err
	}
	rows, err := s.writeOne(ctx, stmtRetry, protocol.Args{"id": id, "reset_attempt": resetAttempt})
	if err != nil {
		return nil, err
	}
	t, err := oneTask(rows)
	s.requeued(t)
	return t, err
}

// RetryByKey is Retry for the task key points at, under the key's lock.
func (s *Store) RetryByKey(ctx context.Context, key string, resetAttempt bool) (*cairnqtype.Task, error) {
	t, err := s.byKey(ctx, key, stmtRetry, protocol.Args{"reset_attempt": resetAttempt})
	s.requeued(t)
	return t, err
}

// byKey resolves key and runs statement on its task, under the key's lock
// so a concurrent replace cannot repoint the key in between.
func (s *Store) byKey(ctx context.Context, key, statement string, a protocol.Args) (t *cairnqtype.Task, err error) {
	if err := checkKey(statement, key); err != nil {
		return nil, err
	}
	err = s.be.write(ctx, func(q querier) error {
		t = nil
		keyArgs := protocol.Args{"key": key}
		if _, err := s.exec(ctx, q, stmtLockKey, keyArgs); err != nil {
			return err
		}
		rows, err := s.exec(ctx, q, stmtGetKey, keyArgs)
		if err != nil || len(rows) == 0 {
			return err
		}
		a["id"] = rows[0]["task_id"]
		rows, err = s.exec(ctx, q, statement, a)
		if err != nil {
			return err
		}
		t, err = oneTask(rows)
		return err
	})
	return t, err
}

// DefaultPurgeLimit is how many rows one Purge deletes at most by default.
const DefaultPurgeLimit = 1000

// ValidatePurge checks p the way Purge does, for callers that want to fail
// at configuration time.
func ValidatePurge(p cairnqtype.PurgeOptions) error {
	if p.OlderThan < 0 {
		return argError("purge", "older than", "must be >= 0, got %v", p.OlderThan)
	}
	if p.Limit < 0 {
		return argError("purge", "limit", "must be >= 1, got %d", p.Limit)
	}
	if p.Status != "" && !p.Status.IsTerminal() {
		return argError("purge", "status", "must be succeeded, failed or canceled, got %q", p.Status)
	}
	if err := checkOptionalName("purge", "queue", p.Queue); err != nil {
		return err
	}
	return checkOptionalName("purge", "name", p.Name)
}

// Purge deletes up to Limit terminal tasks that finished more than
// OlderThan ago and returns their ids; their keys go with them. Call it
// again until it returns fewer than Limit to drain a backlog in short
// writes.
func (s *Store) Purge(ctx context.Context, p cairnqtype.PurgeOptions) ([]string, error) {
	ids, _, err := s.purge(ctx, stmtPurge, p, NoPurgeFloor)
	return ids, err
}

// NoPurgeFloor is PurgeFrom's fromMS for a purge from the oldest. (Not
// math.MinInt64, which a driver inlining arguments, bun's pgdriver, would
// write as a cast Postgres refuses.)
const NoPurgeFloor = math.MinInt64 + 1

// PurgeFrom is the SDK's own purge (retention, Client.Purge): Purge of
// the tasks that finished at fromMS (epoch ms) or later, for a sweep that
// carries on where its last batch ended, keeping every task of a workflow
// whose record has not ended. A step still running reads the results of
// the steps it waited for (StepResult), and an advance that found a
// finished step gone would count it lost; Purge, the protocol's, as every
// other SDK's purge, knows nothing of workflows. reached is the latest
// completed_at_ms the batch deleted (Postgres), fromMS when it deleted
// nothing or the dialect does not say. SQLite deletes index entries with
// their rows, so it reads no floor.
func (s *Store) PurgeFrom(ctx context.Context, p cairnqtype.PurgeOptions, fromMS int64) (ids []string, reached int64, err error) {
	return s.purge(ctx, stmtPurgeFrom, p, fromMS)
}

// purge runs stmt, purge or purge_from, for Purge and PurgeFrom.
func (s *Store) purge(ctx context.Context, stmt string, p cairnqtype.PurgeOptions, fromMS int64) (ids []string, reached int64, err error) {
	if err := ValidatePurge(p); err != nil {
		return nil, fromMS, err
	}
	limit := p.Limit
	if limit == 0 {
		limit = DefaultPurgeLimit
	}
	rows, err := s.writeOne(ctx, stmt, protocol.Args{
		"older_than_ms": ms(p.OlderThan),
		"queue":         nullable(p.Queue),
		"status":        nullable(string(p.Status)),
		"name":          nullable(p.Name),
		"limit":         int64(limit),
		"from_ms":       fromMS,
	})
	if err != nil {
		return nil, fromMS, err
	}
	ids = make([]string, 0, len(rows))
	reached = fromMS
	for _, r := range rows {
		id, _, err := asString("id", r["id"])
		if err != nil {
			return nil, fromMS, err
		}
		ids = append(ids, id)
		if at, ok, err := asInt64("completed_at_ms", r["completed_at_ms"]); err != nil {
			return nil, fromMS, err
		} else if ok {
			reached = max(reached, at)
		}
	}
	return ids, reached, nil
}

// ---------------------------------------------------------------- in-process wakeups

// settled tells this process's waiters that t may have reached a terminal
// status, so they re-read now instead of at their next poll.
func (s *Store) settled(t *cairnqtype.Task) {
	if t != nil {
		s.settledRef(cairnqtype.TaskRef{ID: t.ID, Status: t.Status})
	}
}

// settledRef is settled for a task known by its id and status.
func (s *Store) settledRef(r cairnqtype.TaskRef) {
	if r.Status.IsTerminal() {
		s.hub.Done(r.ID)
	}
}

// requeued tells this process's idle workers that t is claimable again.
func (s *Store) requeued(t *cairnqtype.Task) {
	if t != nil && t.Status == cairnqtype.StatusQueued {
		s.hub.Queued(t.Queue)
	}
}
