package cairnqbunsql

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/sqlrows"
)

// Session is the executor.Session of one bun.Tx (from [Executor.Tx] or
// [TxSession]) or of any bun.IDB ([IDBSession]). Its statements run on the
// *sql.Tx, *sql.Conn or *sql.DB inside, bypassing bun's formatter and query
// hooks as [Executor.Query] does, and are serialized, so it may be shared
// by goroutines. It never commits, rolls back or closes what it wraps.
type Session struct {
	idb   bun.IDB
	tx    bun.Tx         // zero unless idb is a transaction
	stmts sqlrows.Serial // on what idb wraps; Wire is the executor's in its own transactions
}

// newSession returns the session of idb, whose statements run on run.
func newSession(idb bun.IDB, run sqlrows.Runner) *Session {
	return &Session{idb: idb, stmts: sqlrows.Serial{Run: run, Label: wrapErr}}
}

func newTxSession(tx bun.Tx) *Session {
	s := newSession(tx, tx.Tx)
	s.tx = tx
	return s
}

// TxSession wraps tx, a bun transaction the application holds (the tx of
// db.RunInTx, or what db.BeginTx returned), so cairnq can submit or settle
// inside it: what cairnq writes commits or rolls back with the
// application's own writes. The application still commits or rolls back
// tx. TxSession panics on a zero bun.Tx, a programming error.
func TxSession(tx bun.Tx) executor.Session {
	if tx.Tx == nil {
		panic(logPrefix + ": TxSession called with a zero bun.Tx")
	}
	return newTxSession(tx)
}

// IDBSession wraps whatever bun.IDB the application's code holds: a bun.Tx
// (or *bun.Tx) as [TxSession] does, a bun.Conn (or *bun.Conn) whose
// statements then run on that reserved connection in whatever transaction
// state it is in, or a *bun.DB whose statements run on its pool, each on
// its own. It is for code written against bun.IDB; prefer [TxSession] where
// a transaction is meant, since a *bun.DB makes cairnq's writes commit on
// their own. Any other implementation of bun.IDB is refused with an error.
func IDBSession(db bun.IDB) (executor.Session, error) {
	switch d := db.(type) {
	case bun.Tx:
		if d.Tx != nil {
			return newTxSession(d), nil
		}
	case *bun.Tx:
		if d != nil && d.Tx != nil {
			return newTxSession(*d), nil
		}
	case bun.Conn:
		if d.Conn != nil {
			return newSession(d, d.Conn), nil
		}
	case *bun.Conn:
		if d != nil && d.Conn != nil {
			return newSession(*d, d.Conn), nil
		}
	case *bun.DB:
		if d != nil {
			return newSession(d, d.DB), nil
		}
	}
	return nil, fmt.Errorf("%s: IDBSession: want a bun.Tx, bun.Conn or *bun.DB in use, got %T", logPrefix, db)
}

// BunTx returns the transaction the session runs in, or a zero bun.Tx
// (whose Tx field is nil) for a session that is not a transaction's.
func (s *Session) BunTx() bun.Tx { return s.tx }

// IDB returns what the session wraps, as a bun.IDB: the bun.Tx of a
// transaction session.
func (s *Session) IDB() bun.IDB { return s.idb }

// Native returns what the session wraps (a bun.Tx, bun.Conn or *bun.DB) as
// an any.
func (s *Session) Native() any { return s.idb }

// Query runs one statement in the session and returns its rows; see
// [Executor.Query]. A failed statement aborts an enclosing transaction, as
// in Postgres.
func (s *Session) Query(ctx context.Context, query string, args ...any) ([]executor.Row, error) {
	return s.stmts.Query(ctx, query, args)
}

// QueryPositional is Query with the rows by position; see
// [executor.PositionalQuerier].
func (s *Session) QueryPositional(ctx context.Context, query string, args ...any) (*executor.Rows, error) {
	return s.stmts.QueryPositional(ctx, query, args)
}

// Exec runs a parameterless, possibly multi-statement script in the
// session.
func (s *Session) Exec(ctx context.Context, script string) error {
	return s.stmts.Exec(ctx, script)
}

// BunTx returns the bun.Tx behind a session cairnq hands out (such as the
// session of [Executor.Tx], or of TaskContext.SucceedIn on a client running
// on this adapter), or behind any session with a BunTx() bun.Tx method. ok
// is false for any other session.
func BunTx(s executor.Session) (tx bun.Tx, ok bool) {
	b, ok := s.(interface{ BunTx() bun.Tx })
	if !ok {
		return bun.Tx{}, false
	}
	tx = b.BunTx()
	return tx, tx.Tx != nil
}

// SucceedIn settles tc's task in a transaction cairnq opens, handing fn
// that transaction as a bun.Tx: fn writes the application's rows with bun
// as usual (tx.NewInsert().Model(...)), then the settlement runs last with
// fn's result, and both commit or neither does. A lost lease rolls fn's
// writes back and returns cairnq.ErrLostLease; an error from fn rolls back
// and is returned. See cairnq.TaskContext.SucceedIn.
//
// The worker's client must run on this adapter (cairnq.OpenPostgres with an
// [Executor]); otherwise SucceedIn returns an error and nothing is written.
func SucceedIn(ctx context.Context, tc *cairnq.TaskContext, fn func(ctx context.Context, tx bun.Tx) (any, error)) error {
	return tc.SucceedIn(ctx, func(ctx context.Context, s executor.Session) (any, error) {
		tx, ok := BunTx(s)
		if !ok {
			return nil, fmt.Errorf("%s: SucceedIn: the worker's client does not run on a cairnqbunsql executor (its session is a %T)", logPrefix, s)
		}
		return fn(ctx, tx)
	})
}

// SubmitTx submits a task inside tx, a bun transaction the application
// holds: workers see the task only once the application commits tx, and a
// rollback leaves no task. See cairnq.Client.SubmitTx.
func SubmitTx(ctx context.Context, c *cairnq.Client, tx bun.Tx, name string, payload any, opts *cairnq.SubmitOptions) (*cairnq.Task, error) {
	if tx.Tx == nil {
		return nil, fmt.Errorf("%s: SubmitTx: zero bun.Tx", logPrefix)
	}
	return c.SubmitTx(ctx, newTxSession(tx), name, payload, opts)
}

// SubmitManyTx submits a batch inside tx, a bun transaction the
// application holds, under a savepoint of it: workers see the tasks once
// the application commits tx. See cairnq.Client.SubmitManyTx.
func SubmitManyTx(ctx context.Context, c *cairnq.Client, tx bun.Tx, items []cairnq.SubmitItem) ([]*cairnq.Task, error) {
	if tx.Tx == nil {
		return nil, fmt.Errorf("%s: SubmitManyTx: zero bun.Tx", logPrefix)
	}
	return c.SubmitManyTx(ctx, newTxSession(tx), items)
}

// SucceedTx settles tc's task with result inside tx, a bun transaction the
// application holds, so the settlement commits or rolls back with the
// application's own writes. See cairnq.TaskContext.SucceedTx, including
// what happens to the task when the application then rolls back.
func SucceedTx(ctx context.Context, tc *cairnq.TaskContext, tx bun.Tx, result any) error {
	if tx.Tx == nil {
		return fmt.Errorf("%s: SucceedTx: zero bun.Tx", logPrefix)
	}
	return tc.SucceedTx(ctx, newTxSession(tx), result)
}
