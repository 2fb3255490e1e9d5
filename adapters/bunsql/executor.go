package cairnqbunsql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/driver/pgdriver"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/executor/sqlexec"
	"github.com/cairnq/cairnq-go/internal/outage"
	"github.com/cairnq/cairnq-go/internal/pglisten"
	"github.com/cairnq/cairnq-go/internal/pgroute"
	"github.com/cairnq/cairnq-go/internal/sqlrows"
)

// logPrefix starts every error and log message of this package.
const logPrefix = "cairnq/bun"

// Options configures an [Executor]. The zero value, and a nil *Options, mean
// every default.
type Options struct {
	// TxOptions is what [Executor.Tx] passes to bun's RunInTx. Nil, the
	// default, means a read-write transaction at the server's default
	// isolation level, which is what cairnq's statements are written for.
	TxOptions *sql.TxOptions

	// Logger receives the listener's connection events (lost, restored,
	// refused). Nil, the default, means cairnq's default, WARN and above through
	// slog.Default()'s handler (the cairnq package documentation's "Logging").
	Logger *slog.Logger

	// OnReconnect, when set, runs on the listener goroutine each time a
	// dropped LISTEN connection has been replaced and its channels listened
	// on again. Notifications sent while it was down are lost, so this is
	// the moment to poll. It must return quickly and must not call the
	// listener's stop. Nil, the default, means nothing runs.
	OnReconnect func()
}

// Executor runs cairnq's statements on an application's *bun.DB (with
// pgdialect, over pgx's stdlib or bun's pgdriver): the same pool, never a
// second one. It implements executor.Executor and executor.Listener and is
// safe for concurrent use.
type Executor struct {
	db     *bun.DB
	txOpts *sql.TxOptions
	wire   *pgroute.Stdlib // how statements go to the pool (see Query)

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

// New returns an executor over db, the application's own *bun.DB. It opens
// no pool of its own, changes nothing of db (dialect, query hooks, driver
// settings) and [Executor.Close] leaves db open. db must not be nil (New
// panics, since that is a programming error).
func New(db *bun.DB, opts *Options) *Executor {
	if db == nil {
		panic(logPrefix + ": New called with a nil *bun.DB")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	return &Executor{
		db:        db,
		txOpts:    sqlexec.CopyTxOptions(o.TxOptions),
		wire:      pgroute.NewStdlib(db.DB),
		listenCfg: pglisten.Config{LogPrefix: logPrefix, Logger: o.Logger, OnReconnect: o.OnReconnect},
	}
}

// BunDB returns the *bun.DB the executor runs on, exactly as it was passed
// to [New].
func (e *Executor) BunDB() *bun.DB { return e.db }

// Native returns the executor's *bun.DB as an any.
func (e *Executor) Native() any { return e.db }

// Query runs one statement on the pool and returns its rows; see
// [executor.Session.Query]. It runs on the *sql.DB inside the *bun.DB, not
// on bun's own QueryContext, which formats the arguments into the text
// itself (its ? placeholders) and would leave $1..$n unbound; bun's query
// hooks therefore do not see cairnq's statements. Values are what the
// driver produced; errors are wrapped with %w and always have a SQLState
// method when the server answered (see the package documentation).
//
// Behind a transaction-mode connection pooler, statements prepared under a
// name would be bound on server connections that never prepared them. So
// over pgx's stdlib configured to prepare (pgx's default), cairnq's
// statements run unnamed (pgx.QueryExecModeCacheDescribe, passed as their
// first argument) unless the pool's connections are proven direct to the
// server. pgdriver writes the arguments into the text and sends one
// message, which keeps nothing on the server.
func (e *Executor) Query(ctx context.Context, query string, args ...any) ([]executor.Row, error) {
	return sqlrows.Query(ctx, e.db.DB, query, e.wire.Args(ctx, args), wrapErr)
}

// QueryPositional is Query with the rows by position; see
// [executor.PositionalQuerier].
func (e *Executor) QueryPositional(ctx context.Context, query string, args ...any) (*executor.Rows, error) {
	return sqlrows.QueryPositional(ctx, e.db.DB, query, e.wire.Args(ctx, args), wrapErr)
}

// Exec runs a parameterless, possibly multi-statement script on one pooled
// connection; see [executor.Session.Exec]. Without arguments both pgx's
// stdlib and pgdriver send it over the simple query protocol, which accepts
// several statements.
func (e *Executor) Exec(ctx context.Context, script string) error {
	return sqlrows.Exec(ctx, e.db.DB, script, wrapErr)
}

// Tx runs fn in one transaction opened by bun's own RunInTx (with
// [Options.TxOptions]); the ctx fn receives is RunInTx's. The [*Session] fn
// receives is bound to that bun.Tx (its BunTx method returns it), so the
// application's bun queries on it commit or roll back with cairnq's
// statements. bun's query hooks see the BEGIN and COMMIT or ROLLBACK, as
// for any RunInTx. The session must not be used after fn returns.
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
	err := e.db.RunInTx(ctx, e.txOpts, func(ctx context.Context, tx bun.Tx) error {
		began = true
		s := newTxSession(tx)
		s.stmts.Wire = e.wire
		fnErr = fn(ctx, s)
		return fnErr
	})
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

// Close stops every listener the executor started that is still running.
// It never closes the application's *bun.DB. Close is idempotent and
// always returns nil.
func (e *Executor) Close() error {
	e.listeners.Close()
	return nil
}

// Listen subscribes to channels (exact, case-sensitive names, as pg_notify
// takes them) and calls onNotify for each notification on them, from a
// single goroutine, until stop is called. See executor.Listener. Where the
// connection comes from depends on the *bun.DB's driver:
//
//   - bun's pgdriver: a pgdriver.Listener, which dials a connection of its
//     own from the pool's connector (same address, credentials, TLS and
//     dialer; outside the pool's accounting). pgdriver writes a LISTEN
//     without awaiting the answer, so Listen confirms the subscription by
//     sending a private probe notification (pg_notify on a pooled
//     connection) and waiting for it to come back; the same probe serves
//     the idle health check. Channel names must then be printable and free
//     of " and \, which pgdriver cannot quote.
//   - pgx's stdlib: one connection reserved from the application's pool
//     ((*sql.DB).Conn) and used through Conn.Raw. It counts against the
//     pool's MaxOpenConns while the subscription lasts and is closed, never
//     returned to the pool, when it ends. A pool capped at one connection
//     cannot spare it. When the application's pgx ConnConfig sets its own
//     OnNotification, that handler receives the notifications instead.
//
// Any other driver, a pool of one connection on the stdlib route, or a
// server refusing LISTEN (SQLSTATE 0A000) yields an error wrapping
// executor.ErrListenUnavailable: permanent, cairnq polls instead.
//
// ctx bounds only the initial subscription (each attempt at it has a
// bound of its own). After a while without a notification the listener
// checks its connection, and a check left unanswered counts as a drop. A
// dropped connection is replaced with jittered exponential backoff; once
// the new one listens, [Options.OnReconnect] runs. Every adapter here
// shares this timing; the package documentation of [executor] gives it.
//
// stop ends the subscription, closes its connection and returns once the
// goroutine has exited; it is safe to call more than once and from several
// goroutines, but not from onNotify or OnReconnect, which run on the
// goroutine it waits for. [Executor.Close] stops every subscription.
func (e *Executor) Listen(ctx context.Context, channels []string, onNotify func(channel, payload string)) (stop func(), err error) {
	return e.listeners.Listen(ctx, channels, onNotify, e.listenCfg, func(l *pglisten.Listener) (pglisten.Source, string, error) {
		if _, ok := e.db.Driver().(pgdriver.Driver); ok {
			src, err := newPgdriverSource(e.db, l.Channels())
			if err != nil {
				return nil, "", err
			}
			return src, "bun-pgdriver-listener", nil
		}
		src := pglisten.StdlibSource{DB: e.db.DB}
		if err := src.CheckPool(); err != nil {
			return nil, "", err
		}
		return src, "bun-listener", nil
	})
}

// wrapErr wraps err as "cairnq/bun: <op>: ..." with %w, giving a pgdriver
// server error the SQLState method it lacks on the way.
func wrapErr(op string, err error) error {
	return fmt.Errorf("%s: %s: %w", logPrefix, op, withSQLState(err))
}

// withSQLState returns err, wrapped so that it has a SQLState method when
// it holds a pgdriver.Error (whose code is only its Field('C')) and nothing
// else with one: the store and callers classify errors through
// interface{ SQLState() string }, as for pgx's and lib/pq's errors.
func withSQLState(err error) error {
	var pe pgdriver.Error
	if err == nil || pglisten.SQLState(err) != "" || !errors.As(err, &pe) {
		return err
	}
	return &pgdriverError{err: err, code: pe.Field('C')}
}

// pgdriverError is a pgdriver server error given a SQLState method.
// errors.As still finds the pgdriver.Error through Unwrap.
type pgdriverError struct {
	err  error
	code string
}

func (e *pgdriverError) Error() string    { return e.err.Error() }
func (e *pgdriverError) Unwrap() error    { return e.err }
func (e *pgdriverError) SQLState() string { return e.code }
