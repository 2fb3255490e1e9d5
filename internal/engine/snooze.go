package engine

import (
	"context"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/protocol"
)

// Snooze hands a running task workerID still owns back to the queue, due
// again delay from now (on SQLite the store's clock, on Postgres the
// database's), with the attempt the claim counted given back, so that
// snoozing never spends one of the task's max_attempts.
//
// The row it leaves is an ordinary queued task, the same as before the
// claim except for run_at_ms and updated_at_ms: worker_id, lease,
// progress and message are NULL, completed_at_ms too, and error is kept
// (the envelope of the last failed attempt, if any). A cancel requested
// while the attempt ran wins, as on every exit from running: the task ends
// canceled, its attempt, worker, progress and message kept as history.
//
// A lost lease is an *LostLeaseError (errors.Is ErrLostLease) and nothing
// is written; a negative delay is an *ArgumentError. A zero delay requeues
// the task due now. Nothing limits how often a task may be snoozed.
func (s *Store) Snooze(ctx context.Context, id, workerID string, delay time.Duration) (*cairnqtype.Task, error) {
	return s.snooze(ctx, id, workerID, delay, "")
}

// snooze is Snooze, for a durable wait only while the task holds no
// event of that name (snoozeArgs).
func (s *Store) snooze(ctx context.Context, id, workerID string, delay time.Duration, event string) (*cairnqtype.Task, error) {
	if delay < 0 {
		return nil, argError("snooze", "delay", "must be >= 0, got %v", delay)
	}
	t, err := s.owned(ctx, stmtSnooze, id, snoozeArgs(id, workerID, delay, event))
	if err != nil {
		return nil, err
	}
	s.settled(t) // a cancel that won: waiters hear the task is done
	if delay == 0 {
		// Due at once: wake this process's idle workers. A delayed task is
		// found by their poll, as a retry's backoff is.
		s.requeued(t)
	}
	return t, nil
}

// snoozeArgs are the snooze statement's arguments: event names the event
// a durable wait waits for, whose arrival keeps the task running; ""
// snoozes whatever the task's events.
func snoozeArgs(id, workerID string, delay time.Duration, event string) protocol.Args {
	return protocol.Args{"id": id, "worker_id": workerID, "delay_ms": ms(delay), "event": event}
}
