package cairnqpgx

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
)

// errNotPgx reports a client that does not run on this adapter, so its
// transactions are not pgx transactions.
var errNotPgx = errors.New("cairnq/pgx: the client's executor is not a cairnqpgx.Executor, so its transaction is not a pgx.Tx")

// SucceedIn settles tc in a transaction cairnq opens, handing fn that
// transaction as a pgx.Tx: fn's writes and the settlement commit together,
// and a lost lease rolls fn's writes back (cairnq.ErrLostLease). The client
// must run on this adapter. See cairnq.TaskContext.SucceedIn.
func SucceedIn(ctx context.Context, tc *cairnq.TaskContext, fn func(ctx context.Context, tx pgx.Tx) (any, error)) error {
	return tc.SucceedIn(ctx, func(ctx context.Context, s executor.Session) (any, error) {
		tx, ok := PgxTx(s)
		if !ok {
			return nil, errNotPgx
		}
		return fn(ctx, tx)
	})
}

// SubmitTx submits a task inside the application's own pgx transaction: it
// exists for workers once tx commits, and not at all if tx rolls back.
func SubmitTx(ctx context.Context, c *cairnq.Client, tx pgx.Tx, name string, payload any, opts *cairnq.SubmitOptions) (*cairnq.Task, error) {
	return c.SubmitTx(ctx, TxSession(tx, nil), name, payload, opts)
}

// SubmitManyTx submits a batch inside the application's own pgx
// transaction, under a savepoint of it: the tasks exist for workers once
// tx commits. See cairnq.Client.SubmitManyTx.
func SubmitManyTx(ctx context.Context, c *cairnq.Client, tx pgx.Tx, items []cairnq.SubmitItem) ([]*cairnq.Task, error) {
	return c.SubmitManyTx(ctx, TxSession(tx, nil), items)
}

// SucceedTx settles tc inside the application's own pgx transaction.
func SucceedTx(ctx context.Context, tc *cairnq.TaskContext, tx pgx.Tx, result any) error {
	return tc.SucceedTx(ctx, TxSession(tx, nil), result)
}
