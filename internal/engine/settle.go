package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/workflowspec"
	"github.com/cairnq/cairnq-go/protocol"
)

// Outcome is how an attempt ended: what its settlement records.
type Outcome uint8

// The outcomes a worker settles an attempt with.
const (
	// Succeeded completes the attempt with Settlement.Result: succeeded,
	// or canceled when a cancel was requested while it ran.
	Succeeded Outcome = iota + 1
	// Failed records Settlement.Error: queued again after Delay when
	// Retryable and attempts remain, else failed for good (canceled when
	// a cancel was requested).
	Failed
	// Snoozed hands the task back to the queue, due again Delay from now,
	// with the attempt given back (Store.Snooze).
	Snoozed
)

// Settlement is one attempt's end on its way to the database: every
// kind a worker writes, for any task, goes through Store.Settle (or, in
// a transaction, SettleTx and SettleWith), which reads from Task
// whether it is a workflow's step and then advances the workflow in the
// settlement's own transaction. Only plain successes a worker groups
// travel otherwise, as Completions (handover.go).
type Settlement struct {
	// Task is the row the claim returned: its id, and its metadata, which
	// holds a workflow step's mark.
	Task *cairnqtype.Task
	// WorkerID is the worker that holds the task's lease.
	WorkerID string
	// Outcome is how the attempt ended.
	Outcome Outcome
	// Result is a success's result, encoded by Settle (EncodeResult).
	Result any
	// Error and Retryable are a failure's; Delay is a failure's retry
	// delay or a snooze's, from when the settlement is written.
	Error     cairnqtype.ErrorEnvelope
	Retryable bool
	Delay     time.Duration
	// Added holds the steps a workflow's step added while it ran
	// (AddedSteps), written only if it succeeds; nil for none.
	Added []workflowspec.Step
	// Event is, for a snooze, the event a durable wait waits for: the
	// snooze is written only while the task holds no such event, and
	// Settle returns an *EventArrivedError when it does.
	Event string
	// Rows is the worker's lock on its multi-row writes (its heartbeat),
	// held on Postgres while a group of step successes settles the
	// worker's task with others' in one statement (settleIn); nil for
	// none.
	Rows sync.Locker
}

// Settled is what a settlement wrote.
type Settled struct {
	// Status is the status the task took.
	Status cairnqtype.Status
	// Task is the row as settled. Nil for a success of a task that is no
	// workflow's step: that settlement reads back only the status, as it
	// is every task's (Store.Complete).
	Task *cairnqtype.Task
	// Step is the workflow step the settlement settled, read from the
	// row's mark; nil for a task that is no workflow's step.
	Step *StepMark
	// Advanced is what the settlement did to the step's workflow.
	Advanced Advanced
	// Refused is set when a step's success added steps its workflow
	// refused (an *AddedStepsError): nothing of the success was written,
	// and the step failed for good instead, with RefusedEnvelope.
	Refused error
}

// RefusedEnvelope is the failure a step whose added steps its workflow
// refused ends with.
func RefusedEnvelope(err error) cairnqtype.ErrorEnvelope {
	return cairnqtype.ErrorEnvelope{Type: "InvalidSteps", Code: "invalid_added_steps", Retryable: false,
		Details: map[string]any{}, Message: err.Error()}
}

// check refuses a settlement no worker builds.
func (st *Settlement) check() error {
	switch {
	case st.Task == nil:
		return argError("settle", "task", "is nil")
	case st.Outcome < Succeeded || st.Outcome > Snoozed:
		return argError("settle", "outcome", "unknown outcome %d", st.Outcome)
	case st.Outcome == Snoozed && st.Delay < 0:
		return argError("snooze", "delay", "must be >= 0, got %v", st.Delay)
	}
	return nil
}

// Settle writes st on the worker's authority. A lost lease is a
// *LostLeaseError and nothing is written. For a workflow's step the
// settlement and, when it ends the step, the workflow's advance run in
// one write transaction, whatever the outcome; steps the step added that
// its workflow refuses fail it for good instead (Settled.Refused).
// Anything else is a plain settlement: a success joins the store's
// grouped completions, a failure and a snooze run alone.
func (s *Store) Settle(ctx context.Context, st Settlement) (Settled, error) {
	if err := st.check(); err != nil {
		return Settled{}, err
	}
	mark, step := StepMarkOf(st.Task)
	if !step {
		out, err := s.settlePlain(ctx, st)
		return out, s.waitEnded(ctx, st, err)
	}
	out, err := s.settleStep(ctx, st, mark)
	err = s.waitEnded(ctx, st, err)
	var refused *AddedStepsError
	if errors.As(err, &refused) {
		return s.failRefused(ctx, st, mark, refused)
	}
	return out, err
}

// failRefused fails st's step for good in a write of its own, the steps
// it added refused by its workflow.
func (s *Store) failRefused(ctx context.Context, st Settlement, mark StepMark, refused *AddedStepsError) (Settled, error) {
	st.Outcome, st.Error, st.Retryable, st.Delay, st.Added = Failed, RefusedEnvelope(refused), false, 0, nil
	out, err := s.settleStep(ctx, st, mark)
	out.Refused = refused
	return out, err
}

// settlePlain writes the settlement of a task that is no workflow's step.
func (s *Store) settlePlain(ctx context.Context, st Settlement) (Settled, error) {
	id := st.Task.ID
	var t *cairnqtype.Task
	var err error
	switch st.Outcome {
	case Succeeded:
		var ref cairnqtype.TaskRef
		if ref, err = s.Complete(ctx, id, st.WorkerID, st.Result); err != nil {
			return Settled{}, err
		}
		return Settled{Status: ref.Status}, nil
	case Failed:
		t, err = s.FailRecorded(ctx, id, st.WorkerID, st.Error, st.Retryable, st.Delay)
	default:
		t, err = s.snooze(ctx, id, st.WorkerID, st.Delay, st.Event)
	}
	if err != nil {
		return Settled{}, err
	}
	return Settled{Status: t.Status, Task: t}, nil
}

// settleStep writes a step's settlement and its workflow's advance in
// one write transaction.
func (s *Store) settleStep(ctx context.Context, st Settlement, mark StepMark) (Settled, error) {
	if s.stepSettles != nil && st.Outcome == Succeeded && len(st.Added) == 0 {
		return s.settleStepGrouped(ctx, st, mark)
	}
	stmt, args, err := s.settleStatement(st)
	if err != nil {
		return Settled{}, err
	}
	var out Settled
	err = s.be.write(ctx, func(q querier) error {
		var err error
		out, err = s.settleStepIn(ctx, q, st, mark, stmt, args, true)
		return err
	})
	if err != nil {
		return Settled{}, err
	}
	s.settled(out.Task)
	if st.Outcome != Snoozed || st.Delay == 0 {
		s.requeued(out.Task) // a delayed snooze is found by the poll, as a backoff is
	}
	s.afterAdvance(out.Advanced)
	return out, nil
}

// settleStatement is the statement that writes st, with its arguments.
func (s *Store) settleStatement(st Settlement) (string, protocol.Args, error) {
	a := protocol.Args{"id": st.Task.ID, "worker_id": st.WorkerID}
	switch st.Outcome {
	case Succeeded:
		res, err := EncodeResult(st.Result)
		if err != nil {
			return "", nil, err
		}
		a["result"] = res
		return stmtComplete, a, nil
	case Failed:
		text, err := storableEnvelope(st.Error)
		if err != nil {
			return "", nil, err
		}
		a["error"], a["retryable"], a["delay_ms"] = text, st.Retryable, ms(max(st.Delay, 0))
		a["entry"] = attemptEntry(st.Error)
		return stmtFailRecorded, a, nil
	default:
		a["delay_ms"], a["event"] = ms(st.Delay), st.Event
		return stmtSnooze, a, nil
	}
}

// settleStepIn runs a step's settlement statement and, if the step
// ended, the advance, in q's transaction. own says the transaction is the
// store's, holding only this settlement: a success that added nothing
// then advances from the step (advanceFromStep), whose cache must not
// learn what an application's transaction may roll back.
func (s *Store) settleStepIn(ctx context.Context, q querier, st Settlement, mark StepMark, stmt string, a protocol.Args, own bool) (Settled, error) {
	// The workflow's lock before the step's row, as every writer of a
	// workflow takes them: an advance holding the lock while it cancels
	// this step would otherwise wait for the row this settlement holds,
	// and this settlement for the lock.
	if _, err := s.exec(ctx, q, stmtLockKey, protocol.Args{"key": workflowspec.WorkflowKey(mark.Record)}); err != nil {
		return Settled{}, err
	}
	var add *Added
	if st.Outcome == Succeeded && len(st.Added) > 0 {
		add = &Added{By: mark.Step, Steps: st.Added}
		// Refused steps fail the step before anything is written, also in
		// an application's transaction (SettleTx).
		if err := s.checkAdd(ctx, q, mark.Record, add); err != nil {
			return Settled{}, err
		}
	}
	out, err := s.settleRowIn(ctx, q, st, stmt, a)
	if err != nil {
		return out, err
	}
	out.Step = &mark
	if !out.Task.IsTerminal() {
		return out, nil
	}
	if out.Status != cairnqtype.StatusSucceeded {
		add = nil // a step adds only when it succeeds
	} else if own && add == nil {
		out.Advanced, err = s.advanceFromStep(ctx, q, "settle step", mark, st.WorkerID)
		return out, err
	}
	out.Advanced, err = s.advanceHeldIn(ctx, q, "settle step", mark.Record, st.WorkerID, add)
	return out, err
}

// settleTxIn writes st in q's transaction, and for a workflow's step the
// advance with it: SettleTx's and SettleWith's statements.
func (s *Store) settleTxIn(ctx context.Context, q querier, st Settlement) (Settled, error) {
	stmt, a, err := s.settleStatement(st)
	if err != nil {
		return Settled{}, err
	}
	if mark, step := StepMarkOf(st.Task); step {
		return s.settleStepIn(ctx, q, st, mark, stmt, a, false)
	}
	return s.settleRowIn(ctx, q, st, stmt, a)
}

// settleRowIn runs st's statement in q and reads back the row it
// settled: a *LostLeaseError when it settled none.
func (s *Store) settleRowIn(ctx context.Context, q querier, st Settlement, stmt string, a protocol.Args) (Settled, error) {
	rows, err := s.exec(ctx, q, stmt, a)
	if err != nil {
		return Settled{}, err
	}
	if len(rows) == 0 {
		return Settled{}, &cairnqtype.LostLeaseError{ID: st.Task.ID}
	}
	t, err := rowToTask(rows[0])
	if err != nil {
		return Settled{}, err
	}
	return Settled{Status: t.Status, Task: t}, nil
}

// SettleTx writes st inside a transaction the application holds, through
// sess: the settlement, and a step's advance, commit or roll back with
// the application's own writes, and this process hears of neither (it
// cannot know whether they commit). Steps the step added that its
// workflow refuses are an *AddedStepsError and nothing is written: the
// application's transaction holds the workflow's lock, so the step can
// only fail once it has rolled back. Postgres only.
func (s *Store) SettleTx(ctx context.Context, sess executor.Session, st Settlement) (Settled, error) {
	if err := st.check(); err != nil {
		return Settled{}, err
	}
	if err := s.needsPostgres(ctx, "SucceedTx", sess); err != nil {
		return Settled{}, err
	}
	return s.settleTxIn(ctx, pgQuerier{sess}, st)
}

// SettleWith opens a transaction, runs fn in it (the application writes
// its rows through sess, its own driver's transaction), then writes st
// with fn's value as its Result as the transaction's last statements,
// with a step's advance. A lost lease rolls fn's writes back with the
// settlement and returns ErrLostLease; an error from fn rolls back and
// returns it. Steps the workflow refuses roll fn's writes back too, and
// the step fails for good in a write of its own (Settled.Refused). fn may
// run again if the caller retries, so it must not keep state of its own.
// Postgres only.
func (s *Store) SettleWith(ctx context.Context, st Settlement, fn func(ctx context.Context, sess executor.Session) (any, error)) (Settled, error) {
	if err := st.check(); err != nil {
		return Settled{}, err
	}
	if err := s.needsPostgres(ctx, "SucceedIn"); err != nil {
		return Settled{}, err
	}
	var out Settled
	err := pgTx(ctx, s.be.(*pgBackend).ex, func(ctx context.Context, sess executor.Session) error {
		v, err := fn(ctx, sess)
		if err != nil {
			return err
		}
		in := st
		in.Outcome, in.Result = Succeeded, v
		out, err = s.settleTxIn(ctx, pgQuerier{sess}, in)
		return err
	})
	var refused *AddedStepsError
	if errors.As(err, &refused) {
		mark, _ := StepMarkOf(st.Task)
		return s.failRefused(ctx, st, mark, refused)
	}
	if err != nil {
		return Settled{}, err
	}
	s.settled(out.Task)
	s.afterAdvance(out.Advanced)
	return out, nil
}
