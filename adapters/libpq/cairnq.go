package cairnqlibpq

import (
	"context"
	"database/sql"
	"errors"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
)

var errNotSQL = errors.New("cairnq/libpq: the client's executor does not run on database/sql, so its transaction is not a *sql.Tx")

// SucceedIn settles tc in a transaction cairnq opens, handing fn that
// transaction as a *sql.Tx: fn's writes and the settlement commit
// together, and a lost lease rolls fn's writes back (cairnq.ErrLostLease).
// It works for any client on a database/sql executor (this adapter, or
// sqlexec over lib/pq, pgx stdlib or sqlx). See cairnq.TaskContext.SucceedIn.
func SucceedIn(ctx context.Context, tc *cairnq.TaskContext, fn func(ctx context.Context, tx *sql.Tx) (any, error)) error {
	return tc.SucceedIn(ctx, func(ctx context.Context, s executor.Session) (any, error) {
		tx, ok := TxOf(s)
		if !ok {
			return nil, errNotSQL
		}
		return fn(ctx, tx)
	})
}

// SubmitTx submits a task inside the application's own *sql.Tx: it exists
// for workers once tx commits, and not at all if tx rolls back.
func SubmitTx(ctx context.Context, c *cairnq.Client, tx *sql.Tx, name string, payload any, opts *cairnq.SubmitOptions) (*cairnq.Task, error) {
	return c.SubmitTx(ctx, TxSession(tx), name, payload, opts)
}

// SubmitManyTx submits a batch inside the application's own *sql.Tx,
// under a savepoint of it: the tasks exist for workers once tx commits.
// See cairnq.Client.SubmitManyTx.
func SubmitManyTx(ctx context.Context, c *cairnq.Client, tx *sql.Tx, items []cairnq.SubmitItem) ([]*cairnq.Task, error) {
	return c.SubmitManyTx(ctx, TxSession(tx), items)
}

// SucceedTx settles tc inside the application's own *sql.Tx.
func SucceedTx(ctx context.Context, tc *cairnq.TaskContext, tx *sql.Tx, result any) error {
	return tc.SucceedTx(ctx, TxSession(tx), result)
}
