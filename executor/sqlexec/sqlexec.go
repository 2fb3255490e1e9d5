package sqlexec

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"reflect"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/outage"
	"github.com/cairnq/cairnq-go/internal/pgroute"
	"github.com/cairnq/cairnq-go/internal/sqlrows"
	"github.com/cairnq/cairnq-go/protocol"
)

// DB is the part of a database/sql pool the executor uses. *sql.DB satisfies
// it, and so does *sqlx.DB (it embeds *sql.DB), so either is passed to [New]
// as is:
//
//	exec := sqlexec.New(sqlxDB, nil)
//
// Close is deliberately not part of DB: the pool belongs to the application.
// Conn is there for adapters that need one reserved connection (a LISTEN over
// pgx's stdlib, for example).
type DB interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
	Conn(ctx context.Context) (*sql.Conn, error)
}

// Options configures an [Executor]. The zero value, and a nil *Options, mean
// every default.
type Options struct {
	// TxOptions is what [Executor.Tx] passes to BeginTx. Nil, the default,
	// means the driver's defaults: a read-write transaction at the server's
	// default isolation level (READ COMMITTED unless the server or role is
	// configured otherwise), which is what cairnq's statements are written
	// for.
	TxOptions *sql.TxOptions

	// Prepare runs every statement with arguments that the executor runs on
	// the pool itself as a prepared statement: database/sql's *sql.Stmt,
	// prepared on each connection at its first use there and kept until
	// [Executor.Close], so that the server parses and plans it once per
	// connection rather than on every run (drivers such as lib/pq send
	// each statement unprepared otherwise). It needs a pool whose
	// connections keep prepared statements (not a transaction-mode
	// pooler) and a db with PrepareContext (*sql.DB and *sqlx.DB have
	// it; for any other, Prepare does nothing). Statements in a
	// transaction, on a reserved connection, or without arguments are
	// never prepared. Default false.
	//
	// Only where every statement reaches the same server session: a
	// direct connection, or a session-mode pooler. Behind a
	// transaction-mode pooler a prepared statement's name is bound on
	// server connections that never prepared it.
	Prepare bool

	// Arguments says how a statement's arguments reach the driver where
	// they are not bound to a prepared statement. Default ArgumentsAuto.
	Arguments Arguments
}

// Arguments is how an executor sends a statement's arguments.
type Arguments int

const (
	// ArgumentsAuto writes them into the text on lib/pq (told by its
	// driver's package) and binds them on every other driver; see the
	// package documentation.
	ArgumentsAuto Arguments = iota
	// ArgumentsBind always binds them: the driver sends them as it does
	// (lib/pq with binary_parameters=yes does in one round trip).
	ArgumentsBind
	// ArgumentsInline always writes them into the text as literals
	// ([protocol.Inline]) and sends the statement with none, in one
	// message of the simple query protocol: for lib/pq behind a wrapper
	// (an instrumentation driver) that hides which driver it is.
	ArgumentsInline
)

// Executor is an [executor.Executor] over an application's database/sql
// pool. It is safe for concurrent use. As a Session it runs each statement on
// whichever pooled connection database/sql hands out.
type Executor struct {
	db     DB
	txOpts *sql.TxOptions
	stmts  *stmtCache      // nil unless Options.Prepare
	inline bool            // the driver is lib/pq: see inlines
	wire   *pgroute.Stdlib // pgx's stdlib: the mode of each statement (nil on lib/pq)
}

var _ executor.Executor = (*Executor)(nil)
var _ executor.Native = (*Executor)(nil)

// New returns an executor over db, which stays the application's: the
// executor opens no connections of its own, and [Executor.Close] does not
// close db. db is typically a *sql.DB or a *sqlx.DB; it must not be nil (New
// panics, since that is a programming error).
func New(db DB, opts *Options) *Executor {
	if db == nil {
		panic("sqlexec: New called with a nil DB")
	}
	e := &Executor{db: db, inline: inlines(db)}
	if opts != nil {
		switch opts.Arguments {
		case ArgumentsBind:
			e.inline = false
		case ArgumentsInline:
			e.inline = true
		}
	}
	if !e.inline {
		e.wire = pgroute.NewStdlib(db)
	}
	if opts != nil {
		e.txOpts = CopyTxOptions(opts.TxOptions)
		if p, ok := db.(preparer); ok && opts.Prepare {
			e.stmts = newStmtCache(p)
		}
	}
	return e
}

// CopyTxOptions returns a copy of o (nil for nil), so an executor keeps the
// options it was built with whatever the caller later does to its value.
// The adapters over database/sql pools (gorm, bun) use it too.
func CopyTxOptions(o *sql.TxOptions) *sql.TxOptions {
	if o == nil {
		return nil
	}
	c := *o
	return &c
}

// DB returns the pool the executor runs on, exactly as it was passed to
// [New].
func (e *Executor) DB() DB { return e.db }

// Native returns the pool the executor runs on (the value passed to [New]),
// as an any, for code that handles sessions of several drivers alike.
func (e *Executor) Native() any { return e.db }

// Query runs one statement on the pool and returns its rows; see
// [executor.Session.Query]. Errors are wrapped with %w, so the driver's own
// error type (a *pq.Error, a *pgconn.PgError) is reachable with errors.As;
// a database out of reach (driver.ErrBadConn, a connection refused or
// reset, a server starting up or shutting down) is also
// cairnq.ErrUnavailable to errors.Is, whatever the driver. database/sql
// does not say whether an error came while a connection was being made,
// so a connection pooler's refusal at connect (pgbouncer's SQLSTATE 08P01
// for an unknown database or a startup parameter it does not pass on,
// the code it also answers when it lost its server) is ErrUnavailable
// here too, except on the pool the lib/pq adapter's Open makes, whose
// connector says when its errors came.
func (e *Executor) Query(ctx context.Context, query string, args ...any) ([]executor.Row, error) {
	if e.stmts != nil && len(args) > 0 {
		return e.stmts.query(ctx, e.db, query, args)
	}
	query, args, err := e.send(ctx, query, args)
	if err != nil {
		return nil, err
	}
	return sqlrows.Query(ctx, e.db, query, args, label)
}

// QueryPositional is Query with the rows by position; see
// [executor.PositionalQuerier].
func (e *Executor) QueryPositional(ctx context.Context, query string, args ...any) (*executor.Rows, error) {
	if e.stmts != nil && len(args) > 0 {
		return e.stmts.queryPositional(ctx, e.db, query, args)
	}
	query, args, err := e.send(ctx, query, args)
	if err != nil {
		return nil, err
	}
	return sqlrows.QueryPositional(ctx, e.db, query, args, label)
}

// send returns query and args as they go to the pool: on lib/pq with the
// arguments written into the text (see inlines), on pgx's stdlib with the
// query mode pgroute.Stdlib chose put first, else as they are.
func (e *Executor) send(ctx context.Context, query string, args []any) (string, []any, error) {
	if !e.inline {
		return query, e.wire.Args(ctx, args), nil
	}
	if len(args) == 0 {
		return query, args, nil
	}
	text, err := protocol.Inline(query, args)
	if err != nil {
		return "", nil, label("query", err)
	}
	return text, nil, nil
}

// inlines reports whether the executor writes the arguments of the
// statements it runs on db into their text, which it does when db's
// driver is lib/pq, told by the driver's package (this package imports
// no driver to compare types with).
//
// lib/pq, unless its DSN sets binary_parameters, sends a statement with
// arguments in two round trips: a parse of the text as the unnamed
// statement, answered, then a bind of the arguments to "the unnamed
// statement". Behind a transaction-mode pooler each round trip outside a
// transaction may reach another server connection, whose unnamed
// statement is whatever its last client parsed there: the arguments can
// run another statement. A statement with no arguments goes as one
// message of the simple query protocol, which leaves nothing on the
// server connection. So does every statement of a transaction, whose
// server connection stays the same throughout, and is left alone.
func inlines(db DB) bool {
	d, ok := db.(interface{ Driver() driver.Driver })
	if !ok {
		return false
	}
	t := reflect.TypeOf(d.Driver())
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t != nil && t.PkgPath() == "github.com/lib/pq"
}

// Exec runs a parameterless, possibly multi-statement script on one pooled
// connection; see [executor.Session.Exec]. database/sql sends a statement
// without arguments unprepared, and both lib/pq and pgx's stdlib then use the
// simple query protocol, which accepts several statements in one text.
func (e *Executor) Exec(ctx context.Context, script string) error {
	return sqlrows.Exec(ctx, e.db, script, label)
}

// Tx runs fn in one transaction begun with db.BeginTx and the configured
// [Options.TxOptions]. The session fn receives runs on that *sql.Tx (see
// [TxOf]) and must not be used after fn returns.
//
// Tx commits when fn returns nil. When fn returns an error, Tx rolls back and
// returns fn's error unchanged; when fn panics, Tx rolls back and the panic
// continues. A failed BeginTx or Commit is returned wrapped with %w.
func (e *Executor) Tx(ctx context.Context, fn func(ctx context.Context, s executor.Session) error) error {
	tx, err := e.db.BeginTx(ctx, e.txOpts)
	if err != nil {
		return outage.Mark(ctx, fmt.Errorf("cairnq: begin: %w", err))
	}
	done := false
	defer func() {
		if !done {
			// Reached on an error from fn, a panic, or runtime.Goexit. The
			// rollback's own error is dropped: fn's error (or the panic) is
			// what the caller needs, and a failed rollback means the
			// connection is gone, which ends the transaction too.
			_ = tx.Rollback()
		}
	}()
	if err := fn(ctx, &txSession{tx: tx, wire: e.wire}); err != nil {
		return err
	}
	done = true
	if err := tx.Commit(); err != nil {
		return outage.Mark(ctx, fmt.Errorf("cairnq: commit: %w", err))
	}
	return nil
}

// Close closes the statements [Options.Prepare] prepared, if any, and
// returns nil. It leaves the pool open: the pool belongs to the
// application, which closes it itself.
func (e *Executor) Close() error {
	if e.stmts != nil {
		e.stmts.close()
	}
	return nil
}

// TxSession returns a Session that runs its statements in tx, a transaction
// the application began and will itself commit or roll back; cairnq never
// ends it. This is how a submit or a settlement joins the application's own
// transaction. The session's SQLTx and Native methods return tx (see
// [TxOf]).
func TxSession(tx *sql.Tx) executor.Session {
	if tx == nil {
		panic("sqlexec: TxSession called with a nil *sql.Tx")
	}
	return &txSession{tx: tx}
}

// ConnSession returns a Session that runs its statements on conn, one
// connection the application reserved with db.Conn and will itself close.
// The session's SQLConn and Native methods return conn (see [ConnOf]).
func ConnSession(conn *sql.Conn) executor.Session {
	if conn == nil {
		panic("sqlexec: ConnSession called with a nil *sql.Conn")
	}
	return &connSession{conn: conn}
}

// TxOf returns the *sql.Tx a session runs on: the one behind a session that
// [Executor.Tx] handed to its fn or that [TxSession] made, or behind any
// other session with a method SQLTx() *sql.Tx. It reports false for a
// session that is not bound to a *sql.Tx (the executor itself, for one).
func TxOf(s executor.Session) (*sql.Tx, bool) {
	if t, ok := s.(interface{ SQLTx() *sql.Tx }); ok {
		tx := t.SQLTx()
		return tx, tx != nil
	}
	return nil, false
}

// ConnOf returns the *sql.Conn a session made by [ConnSession] (or any
// session with a method SQLConn() *sql.Conn) runs on, and false for any
// other session.
func ConnOf(s executor.Session) (*sql.Conn, bool) {
	if c, ok := s.(interface{ SQLConn() *sql.Conn }); ok {
		conn := c.SQLConn()
		return conn, conn != nil
	}
	return nil, false
}

// txSession is the Session of one *sql.Tx. In the executor's own
// transactions its statements take the executor's query mode on pgx's
// stdlib (a statement prepared under a name inside the transaction would
// stay in the connection's cache after it); in the application's they go
// as the application's own do.
type txSession struct {
	tx   *sql.Tx
	wire *pgroute.Stdlib
}

// Query runs one statement in the transaction.
func (s *txSession) Query(ctx context.Context, query string, args ...any) ([]executor.Row, error) {
	return sqlrows.Query(ctx, s.tx, query, s.wire.Args(ctx, args), label)
}

// QueryPositional runs one statement in the transaction, its rows by position.
func (s *txSession) QueryPositional(ctx context.Context, query string, args ...any) (*executor.Rows, error) {
	return sqlrows.QueryPositional(ctx, s.tx, query, s.wire.Args(ctx, args), label)
}

// Exec runs a parameterless script in the transaction.
func (s *txSession) Exec(ctx context.Context, script string) error {
	return sqlrows.Exec(ctx, s.tx, script, label)
}

// SQLTx returns the transaction the session runs in.
func (s *txSession) SQLTx() *sql.Tx { return s.tx }

// Native returns the transaction the session runs in, as an any.
func (s *txSession) Native() any { return s.tx }

// connSession is the Session of one *sql.Conn.
type connSession struct{ conn *sql.Conn }

// Query runs one statement on the connection.
func (s *connSession) Query(ctx context.Context, query string, args ...any) ([]executor.Row, error) {
	return sqlrows.Query(ctx, s.conn, query, args, label)
}

// QueryPositional runs one statement on the connection, its rows by position.
func (s *connSession) QueryPositional(ctx context.Context, query string, args ...any) (*executor.Rows, error) {
	return sqlrows.QueryPositional(ctx, s.conn, query, args, label)
}

// Exec runs a parameterless script on the connection.
func (s *connSession) Exec(ctx context.Context, script string) error {
	return sqlrows.Exec(ctx, s.conn, script, label)
}

// SQLConn returns the connection the session runs on.
func (s *connSession) SQLConn() *sql.Conn { return s.conn }

// Native returns the connection the session runs on, as an any.
func (s *connSession) Native() any { return s.conn }

// label labels a failed statement's error as this package's, keeping the
// driver's reachable.
func label(op string, err error) error { return fmt.Errorf("cairnq: %s: %w", op, err) }
