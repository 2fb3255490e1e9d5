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
