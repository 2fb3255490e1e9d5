package cairnqgorm

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/sqlrows"
)

// Session is the executor.Session of one gorm transaction: the one
// [Executor.Tx] opened, or one the application holds ([TxSession]). Its
// statements run on the transaction's connection, bypassing gorm's
// statement builder and logger as [Executor.Query] does, and are serialized,
// so it may be shared by goroutines. It never commits or rolls back.
type Session struct {
	db    *gorm.DB
	stmts sqlrows.Serial // on connPool(db); Wire is the executor's in its own transactions
}

func newSession(tx *gorm.DB) *Session {
	return &Session{db: tx, stmts: sqlrows.Serial{Run: connPool(tx), Label: wrapErr}}
}

// TxSession wraps tx, a gorm transaction the application holds (the tx of
// db.Transaction(func(tx *gorm.DB) error {...}), or what db.Begin()
// returned), so cairnq can submit or settle inside it: what cairnq writes
// commits or rolls back with the application's own writes. The application
// still commits or rolls back tx.
//
// TxSession panics when tx is nil or not bound to a transaction (a plain
// *gorm.DB, or a Begin that failed): cairnq's writes would otherwise commit
// on their own, silently. [SubmitTx] and [SucceedTx] return an error instead.
func TxSession(tx *gorm.DB) executor.Session {
	s, err := txSession(tx)
	if err != nil {
		panic(logPrefix + ": TxSession: " + err.Error())
	}
	return s
}

func txSession(tx *gorm.DB) (*Session, error) {
	if tx == nil {
		return nil, errors.New("nil *gorm.DB where a transaction was expected")
	}
	if !inTransaction(tx) {
		return nil, errors.New("the *gorm.DB is not a transaction; pass the tx of db.Transaction or db.Begin")
	}
	return newSession(tx), nil
}

// GormDB returns the transaction's *gorm.DB. Models, hooks, associations and
// the application's own callbacks work on it as usual, and what it writes
// commits or rolls back with cairnq's statements.
func (s *Session) GormDB() *gorm.DB { return s.db }

// Native returns the transaction's *gorm.DB as an any.
func (s *Session) Native() any { return s.db }

// Query runs one statement in the transaction and returns its rows; see
// [Executor.Query]. A failed statement aborts the transaction, as in
// Postgres.
func (s *Session) Query(ctx context.Context, query string, args ...any) ([]executor.Row, error) {
	return s.stmts.Query(ctx, query, args)
}

// QueryPositional is Query with the rows by position; see
// [executor.PositionalQuerier].
func (s *Session) QueryPositional(ctx context.Context, query string, args ...any) (*executor.Rows, error) {
	return s.stmts.QueryPositional(ctx, query, args)
}

// Exec runs a parameterless, possibly multi-statement script in the
// transaction.
func (s *Session) Exec(ctx context.Context, script string) error {
	return s.stmts.Exec(ctx, script)
}

// GormDB returns the *gorm.DB behind a session cairnq hands out (such as the
// session of [Executor.Tx], or of TaskContext.SucceedIn on a client running
// on this adapter), or behind any session with a GormDB() *gorm.DB method.
// ok is false for any other session.
func GormDB(s executor.Session) (tx *gorm.DB, ok bool) {
	g, ok := s.(interface{ GormDB() *gorm.DB })
	if !ok {
		return nil, false
	}
	tx = g.GormDB()
	return tx, tx != nil
}

// SucceedIn settles tc's task in a transaction cairnq opens, handing fn
// that transaction as a *gorm.DB (carrying ctx): fn writes the
// application's rows with gorm as usual, then the settlement runs last with
// fn's result, and both commit or neither does. A lost lease rolls fn's
// writes back and returns cairnq.ErrLostLease; an error from fn rolls back
// and is returned. See cairnq.TaskContext.SucceedIn.
//
// The worker's client must run on this adapter (cairnq.OpenPostgres with an
// [Executor]); otherwise SucceedIn returns an error and nothing is written.
func SucceedIn(ctx context.Context, tc *cairnq.TaskContext, fn func(ctx context.Context, tx *gorm.DB) (any, error)) error {
	return tc.SucceedIn(ctx, func(ctx context.Context, s executor.Session) (any, error) {
		tx, ok := GormDB(s)
		if !ok {
			return nil, fmt.Errorf("%s: SucceedIn: the worker's client does not run on a cairnqgorm executor (its session is a %T)", logPrefix, s)
		}
		return fn(ctx, tx)
	})
}

// SubmitTx submits a task inside tx, a gorm transaction the application
// holds: workers see the task only once the application commits tx, and a
// rollback leaves no task. It returns an error when tx is not a
// transaction. See cairnq.Client.SubmitTx.
func SubmitTx(ctx context.Context, c *cairnq.Client, tx *gorm.DB, name string, payload any, opts *cairnq.SubmitOptions) (*cairnq.Task, error) {
	s, err := txSession(tx)
	if err != nil {
		return nil, fmt.Errorf("%s: SubmitTx: %w", logPrefix, err)
	}
	return c.SubmitTx(ctx, s, name, payload, opts)
}

// SubmitManyTx submits a batch inside tx, a gorm transaction the
// application holds, under a savepoint of it: workers see the tasks once
// the application commits tx. It returns an error when tx is not a
// transaction. See cairnq.Client.SubmitManyTx.
func SubmitManyTx(ctx context.Context, c *cairnq.Client, tx *gorm.DB, items []cairnq.SubmitItem) ([]*cairnq.Task, error) {
	s, err := txSession(tx)
	if err != nil {
		return nil, fmt.Errorf("%s: SubmitManyTx: %w", logPrefix, err)
	}
	return c.SubmitManyTx(ctx, s, items)
}

// SucceedTx settles tc's task with result inside tx, a gorm transaction the
// application holds, so the settlement commits or rolls back with the
// application's own writes. It returns an error when tx is not a
// transaction. See cairnq.TaskContext.SucceedTx, including what happens to
// the task when the application then rolls back.
func SucceedTx(ctx context.Context, tc *cairnq.TaskContext, tx *gorm.DB, result any) error {
	s, err := txSession(tx)
	if err != nil {
		return fmt.Errorf("%s: SucceedTx: %w", logPrefix, err)
	}
	return tc.SucceedTx(ctx, s, result)
}
