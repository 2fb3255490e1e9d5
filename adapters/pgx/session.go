package cairnqpgx

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/cairnq/cairnq-go/executor"
)

// Session is the executor.Session of one pgx transaction (from
// [Executor.Tx] or [TxSession]) or of one connection ([ConnSession]). Its
// statements are serialized, since a pgx connection runs one at a time, so
// it may be shared by goroutines; it never commits, rolls back or closes
// what it wraps.
type Session struct {
	mu   sync.Mutex
	tx   pgx.Tx    // nil for a connection session
	conn *pgx.Conn // nil for a transaction session
	mode pgx.QueryExecMode
}

// TxSession wraps a transaction the application holds, so cairnq can submit
// or settle inside it: what cairnq writes commits or rolls back with the
// application's own writes. The application still commits or rolls back tx.
// Of opts only ExecMode is used; nil means the defaults.
func TxSession(tx pgx.Tx, opts *Options) executor.Session {
	if tx == nil {
		panic("cairnq/pgx: TxSession with a nil transaction")
	}
	s := &Session{tx: tx}
	if opts != nil {
		s.mode = opts.ExecMode
	}
	return s
}

// ConnSession wraps one connection the application holds (for example a
// *pgxpool.Conn's Conn()). Statements run in whatever transaction state the
// connection is in. Of opts only ExecMode is used; nil means the defaults.
func ConnSession(conn *pgx.Conn, opts *Options) executor.Session {
	if conn == nil {
		panic("cairnq/pgx: ConnSession with a nil connection")
	}
	s := &Session{conn: conn}
	if opts != nil {
		s.mode = opts.ExecMode
	}
	return s
}

// PgxTx returns the transaction the session runs in, or nil for a
// connection session.
func (s *Session) PgxTx() pgx.Tx { return s.tx }

// PgxConn returns the connection the session runs on (the transaction's
// connection for a transaction session).
func (s *Session) PgxConn() *pgx.Conn {
	if s.tx != nil {
		return s.tx.Conn()
	}
	return s.conn
}

// Native returns the wrapped pgx.Tx, or the *pgx.Conn of a connection
// session.
func (s *Session) Native() any {
	if s.tx != nil {
		return s.tx
	}
	return s.conn
}

func (s *Session) querier() querier {
	if s.tx != nil {
		return s.tx
	}
	return s.conn
}

// Query runs one statement in the session and returns its rows as pgx's
// Rows.Values decodes them; see executor.Session. A failed statement aborts
// an enclosing transaction, as in Postgres.
func (s *Session) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return query(ctx, s.querier(), s.mode, sql, args)
}

// QueryPositional is Query with the rows by position; see executor.PositionalQuerier.
func (s *Session) QueryPositional(ctx context.Context, sql string, args ...any) (*executor.Rows, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return queryRows(ctx, s.querier(), s.mode, sql, args)
}

// Exec runs a parameterless script, possibly several statements, in the
// session with the simple protocol.
func (s *Session) Exec(ctx context.Context, script string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return execScript(ctx, s.querier(), script)
}

// CopyFrom writes rows into table with COPY FROM STDIN, in the session's
// transaction; see executor.Copier. The rows go in COPY's text form,
// encoded here as the server reads them, so the COPY needs no statement
// described first: pgx's own CopyFrom describes one in the connection's
// default mode, which caches it as a named statement, and behind a
// transaction-mode pooler a named statement outlives the transaction on
// a server connection other clients then get.
func (s *Session) CopyFrom(ctx context.Context, table string, columns []string, rows executor.CopyRows) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := copyText(ctx, s.PgxConn().PgConn(), table, columns, rows)
	if err != nil {
		return n, mark(ctx, fmt.Errorf("cairnq/pgx: copy: %w", err))
	}
	return n, nil
}

// PgxTx returns the pgx.Tx behind a session cairnq hands out (such as the
// session of [Executor.Tx]), so application code can write in the same
// transaction with its own pgx calls. ok is false when s is not bound to a
// pgx transaction.
func PgxTx(s executor.Session) (tx pgx.Tx, ok bool) {
	n, ok := s.(interface{ PgxTx() pgx.Tx })
	if !ok {
		return nil, false
	}
	tx = n.PgxTx()
	return tx, tx != nil
}
