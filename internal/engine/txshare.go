package engine

import (
	"context"
	"fmt"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/protocol"
)

// needsPostgres refuses a transaction-sharing call on SQLite, and one
// given a nil context or session.
func (s *Store) needsPostgres(ctx context.Context, op string, sess ...executor.Session) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if s.dialect != protocol.Postgres {
		return fmt.Errorf("%w: %s shares a transaction with the application, which needs a Postgres store (SQLite's single writer cannot hand its transaction out)",
			cairnqtype.ErrUnsupported, op)
	}
	for _, ss := range sess {
		if ss == nil {
			return argError(op, "session", "is nil")
		}
	}
	return nil
}

// SubmitTx submits inside a transaction the application holds, through
// sess (an adapter's session over the app's own transaction). The task
// exists for workers only once the application commits, and not at all if
// it rolls back. Postgres only; SQLite returns ErrUnsupported.
func (s *Store) SubmitTx(ctx context.Context, sess executor.Session, p SubmitParams) (*cairnqtype.Task, error) {
	if err := s.needsPostgres(ctx, "SubmitTx", sess); err != nil {
		return nil, err
	}
	ins, err := insertArgs(p, s.now())
	if err != nil {
		return nil, err
	}
	return s.submitIn(ctx, pgQuerier{sess}, p.Key, p.Conflict, ins)
}

// CompleteTx settles a running task inside a transaction the application
// holds: the settlement commits or rolls back with the application's own
// writes. ErrLostLease if the lease is gone (the application should roll
// back). Postgres only.
func (s *Store) CompleteTx(ctx context.Context, sess executor.Session, id, workerID string, result any) (*cairnqtype.Task, error) {
	if err := s.needsPostgres(ctx, "CompleteTx", sess); err != nil {
		return nil, err
	}
	res, err := EncodeResult(result)
	if err != nil {
		return nil, err
	}
	rows, err := s.exec(ctx, pgQuerier{sess}, stmtComplete, protocol.Args{"id": id, "worker_id": workerID, "result": res})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, &cairnqtype.LostLeaseError{ID: id}
	}
	return rowToTask(rows[0])
}

// CompleteWith opens a transaction, runs fn in it (the application writes
// its rows through sess, its own driver's transaction), then settles the
// task as the transaction's last statement with fn's result; for a
// workflow's step (step not nil), the workflow's advance follows in the
// same transaction. A lost lease rolls fn's writes back with the
// settlement and returns ErrLostLease; an error from fn rolls back and
// returns it. fn may run again if the caller retries, so it must not keep
// state of its own. Postgres only.
func (s *Store) CompleteWith(ctx context.Context, id, workerID string, step *StepOf, fn func(ctx context.Context, sess executor.Session) (any, error)) (*cairnqtype.Task, error) {
	if err := s.needsPostgres(ctx, "SucceedIn"); err != nil {
		return nil, err
	}
	ex := s.be.(*pgBackend).ex
	var t *cairnqtype.Task
	var adv Advanced
	err := pgTx(ctx, ex, func(ctx context.Context, sess executor.Session) error {
		v, err := fn(ctx, sess)
		if err != nil {
			return err
		}
		if step == nil {
			t, err = s.CompleteTx(ctx, sess, id, workerID, v)
			return err
		}
		var res StepSettled
		res, err = s.completeStepIn(ctx, pgQuerier{sess}, id, workerID, *step, v)
		t, adv = res.Task, res.Advanced
		return err
	})
	if err != nil {
		return nil, err
	}
	s.settled(t)
	s.afterAdvance(adv)
	return t, nil
}

// CompleteStepTx is CompleteTx for a workflow's step: the settlement and
// the workflow's advance, in the application's transaction. Postgres
// only.
func (s *Store) CompleteStepTx(ctx context.Context, sess executor.Session, id, workerID string, step StepOf, result any) (StepSettled, error) {
	if err := s.needsPostgres(ctx, "CompleteTx", sess); err != nil {
		return StepSettled{}, err
	}
	return s.completeStepIn(ctx, pgQuerier{sess}, id, workerID, step, result)
}

// completeStepIn settles a step with result and advances its workflow,
// in q's transaction.
func (s *Store) completeStepIn(ctx context.Context, q querier, id, workerID string, step StepOf, result any) (StepSettled, error) {
	res, err := EncodeResult(result)
	if err != nil {
		return StepSettled{}, err
	}
	return s.settleStepIn(ctx, q, id, workerID, step, stmtComplete,
		protocol.Args{"id": id, "worker_id": workerID, "result": res})
}
