package cairnqgorm

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"gorm.io/gorm"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/executor/sqlexec"
	"github.com/cairnq/cairnq-go/internal/outage"
	"github.com/cairnq/cairnq-go/internal/pglisten"
	"github.com/cairnq/cairnq-go/internal/pgroute"
	"github.com/cairnq/cairnq-go/internal/sqlrows"
)

// logPrefix starts every error and log message of this package.
const logPrefix = "cairnq/gorm"

// Options configures an [Executor]. The zero value, and a nil *Options, mean
// every default.
type Options struct {
	// TxOptions is what [Executor.Tx] passes to gorm's Transaction. Nil, the
	// default, means a read-write transaction at the server's default
	// isolation level, which is what cairnq's statements are written for.
	TxOptions *sql.TxOptions

	// Logger receives the listener's connection events (lost, restored,
	// refused). It is cairnq's logger, never gorm's. Nil, the default,
	// means cairnq's default, WARN and above through
	// slog.Default()'s handler (the cairnq package documentation's "Logging").
	Logger *slog.Logger

	// OnReconnect, when set, runs on the listener goroutine each time a
	// dropped LISTEN connection has been replaced and its channels listened
	// on again. Notifications sent while it was down are lost, so this is
	// the moment to poll. It must return quickly and must not call the
	// listener's stop. Nil, the default, means nothing runs.
	OnReconnect func()
}

// Executor runs cairnq's statements on an application's *gorm.DB: the same
// pool, never a second one. It implements executor.Executor and
// executor.Listener and is safe for concurrent use.
type Executor struct {
	db     *gorm.DB
	txOpts *sql.TxOptions
	wire   *pgroute.Stdlib // how statements go to the pool; nil: as they are

	// What each Listen subscription gets: logger, OnReconnect, and health
	// timing (pglisten's defaults except in tests).
	listenCfg pglisten.Config
	listeners pglisten.Group // the running subscriptions, for Close
}

var (
	_ executor.Executor = (*Executor)(nil)
	_ executor.Listener = (*Executor)(nil)
	_ executor.Session  = (*Session)(nil)
	_ executor.Native   = (*Executor)(nil)
	_ executor.Native   = (*Session)(nil)
)

// New returns an executor over db, the application's own *gorm.DB as
// gorm.Open returned it (not a transaction: New panics on one, and on a nil
// db, since either is a programming error). The executor opens no pool of
// its own and [Executor.Close] leaves db open. Nothing of db is changed:
// not its config, logger, naming strategy, callbacks or plugins.
func New(db *gorm.DB, opts *Options) *Executor {
	if db == nil {
		panic(logPrefix + ": New called with a nil *gorm.DB")
	}
	if inTransaction(db) {
		panic(logPrefix + ": New called with a transaction; pass the application's *gorm.DB and hand transactions to cairnq with TxSession")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	e := &Executor{
		db:        db,
		txOpts:    sqlexec.CopyTxOptions(o.TxOptions),
		listenCfg: pglisten.Config{LogPrefix: logPrefix, Logger: o.Logger, OnReconnect: o.OnReconnect},
	}
	if sqlDB, err := db.DB(); err == nil {
		e.wire = pgroute.NewStdlib(sqlDB)
	}
	return e
}

// GormDB returns the *gorm.DB the executor runs on, exactly as it was passed
// to [New].
func (e *Executor) GormDB() *gorm.DB { return e.db }

// Native returns the executor's *gorm.DB as an any.
func (e *Executor) Native() any { return e.db }

// Query runs one statement on the pool and returns its rows; see
// [executor.Session.Query]. It goes straight to the gorm.DB's connection
// pool (gorm.ConnPool.QueryContext), not through gorm's Raw: gorm would
// rewrite ? and @name in the text and log every statement through the
// application's logger. Values are what the driver produced (pgx's stdlib:
// int64 for integers, string for text, []byte for jsonb); errors are wrapped
// with %w, so errors.As still finds the *pgconn.PgError.
//
// Behind a transaction-mode connection pooler, statements prepared under a
// name would be bound on server connections that never prepared them. So
// on pgx's stdlib configured to prepare (pgx's default), cairnq's
// statements run unnamed (pgx.QueryExecModeCacheDescribe, passed as their
// first argument) unless the pool's connections are proven direct to the
// server; see the package documentation.
func (e *Executor) Query(ctx context.Context, query string, args ...any) ([]executor.Row, error) {
	return sqlrows.Query(ctx, connPool(e.db), query, e.wire.Args(ctx, args), wrapErr)
}

// QueryPositional is Query with the rows by position; see
// [executor.PositionalQuerier].
func (e *Executor) QueryPositional(ctx context.Context, query string, args ...any) (*executor.Rows, error) {
	return sqlrows.QueryPositional(ctx, connPool(e.db), query, e.wire.Args(ctx, args), wrapErr)
}

// Exec runs a parameterless, possibly multi-statement script on one pooled
// connection; see [executor.Session.Exec]. It is sent without arguments and
// unprepared (gorm's PrepareStmt cache is bypassed), so pgx's stdlib uses the
// simple query protocol, which accepts several statements.
func (e *Executor) Exec(ctx context.Context, script string) error {
	return sqlrows.Exec(ctx, connPool(e.db), script, wrapErr)
}

// Tx runs fn in one transaction opened by gorm's own Transaction (with
// [Options.TxOptions]), so gorm's transaction semantics apply unchanged. The
// [*Session] fn receives is bound to that transaction: its GormDB method
// returns the transaction's *gorm.DB, on which models, hooks and
// associations work as usual, and whatever fn writes there commits or rolls
// back with cairnq's statements. The session must not be used after fn
// returns.
//
// Tx commits when fn returns nil. When fn returns an error, Tx rolls back
// and returns fn's error unchanged; when fn panics (or calls
// runtime.Goexit), Tx rolls back and the panic continues. A failed begin or
// commit is returned wrapped with %w.
func (e *Executor) Tx(ctx context.Context, fn func(ctx context.Context, s executor.Session) error) error {
	var (
		began bool  // fn was called, so the transaction had begun
		fnErr error // fn's own error, returned as is
	)
	// NewDB drops any conditions chained onto the application's *gorm.DB,
	// so the transaction fn gets starts clean. Session copies the config; it
	// never changes the application's.
	db := e.db.Session(&gorm.Session{NewDB: true, Context: ctx})
	err := db.Transaction(func(tx *gorm.DB) error {
		began = true
		s := newSession(tx)
		s.stmts.Wire = e.wire
		fnErr = fn(ctx, s)
		return fnErr
	}, txOptions(e.txOpts)...)
	switch {
	case err == nil:
		return nil
	case !began:
		return outage.Mark(ctx, wrapErr("begin", err))
	case fnErr != nil:
		return fnErr
	default:
		return outage.Mark(ctx, wrapErr("commit", err))
	}
}

func txOptions(o *sql.TxOptions) []*sql.TxOptions {
	if o == nil {
		return nil
	}
	return []*sql.TxOptions{o}
}

// Close stops every listener the executor started that is still running.
// It never closes the application's *gorm.DB. Close is idempotent and
// always returns nil.
func (e *Executor) Close() error {
	e.listeners.Close()
	return nil
}

// connPool is where db's statements run: the transaction of a
// transaction-bound *gorm.DB, else the pool. gorm's prepared-statement
// wrappers (PrepareStmt: true) are unwrapped, because they would prepare
// every statement, and a multi-statement script cannot be prepared; pgx's
// stdlib caches prepared statements per connection by itself.
func connPool(db *gorm.DB) gorm.ConnPool {
	p := db.ConnPool
	if db.Statement != nil && db.Statement.ConnPool != nil {
		p = db.Statement.ConnPool
	}
	for {
		switch w := p.(type) {
		case *gorm.PreparedStmtDB:
			p = w.ConnPool
		case *gorm.PreparedStmtTX:
			p = w.Tx
		default:
			return p
		}
	}
}

// inTransaction reports whether db is bound to a transaction, as gorm
// itself decides it (its Commit needs a TxCommitter).
func inTransaction(db *gorm.DB) bool {
	if db.Statement == nil {
		return false
	}
	_, ok := db.Statement.ConnPool.(gorm.TxCommitter)
	return ok
}

// wrapErr wraps err as "cairnq/gorm: <op>: ..." with %w.
func wrapErr(op string, err error) error {
	return fmt.Errorf("%s: %s: %w", logPrefix, op, err)
}

// Listen subscribes to channels (exact, case-sensitive names, as pg_notify
// takes them) and calls onNotify for each notification on them, from a
// single goroutine, until stop is called. See executor.Listener.
//
// The connection comes from the application's own pool: Listen reserves one
// with (*sql.DB).Conn and reaches the pgx connection under it through
// Conn.Raw, which works when the pool's driver is pgx's stdlib, as with
// gorm.io/driver/postgres. That connection stays reserved for the
// subscription's lifetime: it counts against the pool's MaxOpenConns (and
// shows as in use in its Stats) and is closed, never returned to the pool,
// when the subscription ends. A pool capped at one connection, a driver
// other than pgx's stdlib, a *gorm.DB with no *sql.DB behind it, or a server
// refusing LISTEN (SQLSTATE 0A000) yields an error wrapping
// executor.ErrListenUnavailable: permanent, cairnq polls instead. One
// limitation: when the application's pgx ConnConfig sets its own
// OnNotification, that handler receives the notifications and this
// listener never sees them.
//
// ctx bounds only the initial subscription (each attempt at it has a
// bound of its own). After a while without a notification the listener
// pings its connection, and a ping left unanswered counts as a drop. A
// dropped connection is discarded and a fresh one reserved with jittered
// exponential backoff; once it listens again, [Options.OnReconnect] runs.
// Every adapter here shares this timing; the package documentation of
// [executor] gives it.
//
// stop ends the subscription, closes the reserved connection and returns
// once the goroutine has exited; it is safe to call more than once and from
// several goroutines, but not from onNotify or OnReconnect, which run on
// the goroutine it waits for. [Executor.Close] stops every subscription.
func (e *Executor) Listen(ctx context.Context, channels []string, onNotify func(channel, payload string)) (stop func(), err error) {
	return e.listeners.Listen(ctx, channels, onNotify, e.listenCfg, func(*pglisten.Listener) (pglisten.Source, string, error) {
		sqlDB, err := e.db.DB()
		if err != nil {
			return nil, "", fmt.Errorf("%w: no *sql.DB behind the *gorm.DB: %w", executor.ErrListenUnavailable, err)
		}
		src := pglisten.StdlibSource{DB: sqlDB}
		if err := src.CheckPool(); err != nil {
			return nil, "", err
		}
		return src, "gorm-listener", nil
	})
}
