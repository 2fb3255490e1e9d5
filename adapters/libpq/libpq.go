package cairnqlibpq

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/lib/pq"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/executor/sqlexec"
	"github.com/cairnq/cairnq-go/internal/outage"
	"github.com/cairnq/cairnq-go/internal/pglisten"
	"github.com/cairnq/cairnq-go/internal/pgroute"
)

// DefaultConnectTimeout bounds making each connection cairnq opens itself
// when neither [Options.ConnectTimeout] nor the DSN's connect_timeout says
// otherwise.
const DefaultConnectTimeout = 10 * time.Second

// Options configures an [Executor]. The zero value, and a nil *Options, mean
// every default.
type Options struct {
	// Schema, used by [Open] only, puts cairnq's tables in a schema of their
	// own: Open creates it when missing and sets search_path to it (and to
	// nothing else) on every connection of its pool, overriding any
	// search_path in the DSN. It must match ^[A-Za-z_][A-Za-z0-9_]{0,62}$
	// and is used quoted, so case is kept. Empty, the default, leaves the
	// DSN's (or the server's) search_path alone. Through a connection
	// pooler that refuses the search_path startup parameter (pgbouncer
	// does), Open fails with a *cairnq.OpenError that says how to set the
	// schema on the server instead.
	//
	// [New] ignores Schema: an application's pool is never reconfigured.
	// Give the schema to cairnq's store, which checks where that pool
	// resolves.
	Schema string

	// TxOptions is what [Executor.Tx] passes to BeginTx. Nil, the default,
	// means a read-write transaction at the server's default isolation
	// level.
	TxOptions *sql.TxOptions

	// Logger receives the listener's connection events (lost, restored,
	// refused). Nil, the default, means cairnq's default, WARN and above through
	// slog.Default()'s handler (the cairnq package documentation's "Logging").
	Logger *slog.Logger

	// OnReconnect, if set, is called after a listener lost its connection
	// and has connected and subscribed again. Notifications sent while it
	// was away are lost, so this is the moment to poll once. It runs on the
	// listener's goroutine: it must return quickly and must not call the
	// listener's stop. Nil, the default, means no call.
	OnReconnect func()

	// MinReconnectInterval is the listener's first wait before reconnecting;
	// zero means the first wait of every adapter's listener (see the
	// package documentation of [executor]).
	MinReconnectInterval time.Duration

	// MaxReconnectInterval caps the listener's doubling wait between
	// reconnection attempts; zero means the cap of every adapter's listener
	// (see the package documentation of [executor]), and a value below
	// MinReconnectInterval counts as MinReconnectInterval. A stop ends the
	// wait at once.
	MaxReconnectInterval time.Duration

	// ConnectTimeout bounds making each connection cairnq opens itself
	// (dialing, TLS, authentication and startup): every connection of the
	// pool [Open] makes, the check Open does included, and every connection
	// of a listener, which lib/pq dials from the DSN whether the executor
	// came from Open or [New]. An application's *sql.DB given to New is
	// never reconfigured. Zero (or negative), the default, means the DSN's
	// connect_timeout (or PGCONNECT_TIMEOUT) when it sets one, else
	// [DefaultConnectTimeout]. A connect_timeout of 0, which lib/pq reads as
	// "no limit", counts as unset: a server that accepts connections and
	// never answers must not hang Open, whose context may have no deadline.
	// A listener's connections take the limit in whole seconds, rounded up,
	// because lib/pq's listener is configured by a DSN only.
	ConnectTimeout time.Duration

	// NoPrepare, on the [Open] path, runs every statement unprepared.
	//
	// Without it a pool Open makes prepares each of cairnq's statements
	// once per connection ([sqlexec.Options.Prepare]), sparing the server a
	// parse and a plan on every run, but only where its connections are
	// proven direct to the server: Open makes one connection and checks
	// that the server sees the same TCP connection at both ends, which no
	// proxy can make it see, or that the Unix socket it reached is one
	// the server listens on. Through anything else (a connection pooler
	// in transaction mode above all, which would bind a prepared
	// statement's name on server connections that never prepared it)
	// every statement
	// is sent unprepared, its arguments with it in one round trip
	// (binary_parameters) and nothing kept on the server. [New] never
	// prepares; it binds arguments when the DSN it is given sets
	// binary_parameters=yes, and otherwise writes them into the text (see
	// package sqlexec).
	NoPrepare bool
}

// schemaName is the allowlist of schema names. Narrower than what Postgres
// accepts on purpose: the name is interpolated (quoted) into DDL and into a
// startup parameter.
var schemaName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// Executor is an [executor.Executor] and [executor.Listener] over lib/pq. It
// is safe for concurrent use.
type Executor struct {
	sql   *sqlexec.Executor
	db    *sql.DB
	owned bool   // Close closes db
	dsn   string // for pq.Listener; "" means no LISTEN
	opts  Options

	// What each Listen subscription gets: logger, OnReconnect, backoff and
	// health timing (pglisten's defaults unless set).
	listenCfg pglisten.Config
	listeners pglisten.Group // the running subscriptions, for Close
}

var (
	_ executor.Executor = (*Executor)(nil)
	_ executor.Native   = (*Executor)(nil)
	_ executor.Listener = (*Executor)(nil)
)

// Open connects to the database dsn names (a lib/pq DSN: URL or key=value)
// with a pool the executor owns and [Executor.Close] closes. With
// [Options.Schema] set, it first validates the name (before connecting),
// sets search_path on every connection the pool will ever open (a startup
// parameter), creates the schema when missing, and checks that the server
// resolves to it: a connection pooler that drops startup parameters would
// otherwise put cairnq's tables somewhere else.
//
// Open checks that the server answers, on a connection of its own that
// also tells whether the pool may keep statements prepared
// ([Options.NoPrepare]); ctx bounds that check and every connection made
// while it lasts, and [Options.ConnectTimeout] bounds making each
// connection whatever ctx.
// Tune the pool through [Executor.DB].
func Open(ctx context.Context, dsn string, opts *Options) (*Executor, error) {
	o := withDefaults(opts)
	if o.Schema != "" && !schemaName.MatchString(o.Schema) {
		return nil, &cairnq.ArgumentError{Op: "open", Arg: "schema",
			Reason: fmt.Sprintf("%q is not a plain identifier (letters, digits and _, not starting with a digit, at most 63 characters)", o.Schema)}
	}
	cfg, err := pq.NewConfig(dsn)
	if err != nil {
		return nil, &cairnq.ArgumentError{Op: "open", Arg: "dsn", Reason: err.Error()}
	}
	// lib/pq applies it to dialing and, as a deadline, to the whole startup.
	cfg.ConnectTimeout = connectTimeout(o.ConnectTimeout, cfg.ConnectTimeout)
	// A pool cairnq opens is cairnq's to configure: binary_parameters sends
	// a statement with arguments as one round trip (Parse, Bind, Execute)
	// instead of two (a Parse answered before the Bind). cairnq passes no
	// []byte argument, the only kind it sends in binary. A DSN that names
	// the setting keeps its own choice.
	if !strings.Contains(dsn, "binary_parameters") {
		cfg.BinaryParameters = true
	}
	if o.Schema != "" {
		cfg = cfg.Clone()
		// Quoted, because search_path folds an unquoted name to lower case
		// while the CREATE below keeps the case it is given.
		cfg.Runtime["search_path"] = pq.QuoteIdentifier(o.Schema)
	}
	connector, err := newConnector(cfg)
	if err != nil {
		return nil, &cairnq.ArgumentError{Op: "open", Arg: "dsn", Reason: err.Error()}
	}
	// The route's connection is also the check that the server answers.
	route, err := connector.route(ctx)
	if err != nil {
		if o.Schema != "" {
			if oe := searchPathRefused(ctx, cfg, o.Schema, err); oe != nil {
				return nil, oe
			}
		}
		return nil, outage.Mark(ctx, fmt.Errorf("cairnq: open: %w", err))
	}
	db := sql.OpenDB(connector)
	if err := prepare(ctx, db, o.Schema); err != nil {
		_ = db.Close()
		return nil, outage.Mark(ctx, err)
	}
	// binary_parameters (set above unless the DSN says otherwise) sends a
	// statement's arguments with it, in one round trip.
	e := newExecutor(db, dsn, o, route.KeepsSession() && !o.NoPrepare, cfg.BinaryParameters)
	e.owned = true
	return e, nil
}

// searchPathRefused returns the *cairnq.OpenError that says what to do
// when err, Open's first connection failing with Options.Schema, is the
// search_path startup parameter refused: a connection pooler such as
// pgbouncer refuses a parameter it does not pass on, with SQLSTATE 08P01.
// The code alone proves nothing (08P01 is also a pooler that lost its
// server, an outage), so a connection made without the parameter decides:
// when it is accepted, the parameter was refused. It returns nil
// otherwise.
func searchPathRefused(ctx context.Context, cfg pq.Config, schema string, err error) error {
	if !isSQLState(err, "08P01") {
		return nil
	}
	without := cfg.Clone()
	delete(without.Runtime, "search_path")
	connector, cerr := newConnector(without)
	if cerr != nil {
		return nil
	}
	conn, _, cerr := connector.connect(ctx)
	if cerr != nil {
		return nil
	}
	_ = conn.Close()
	return &cairnq.OpenError{
		Path: fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database),
		Err:  fmt.Errorf("cairnq: %s: %w", pgroute.SearchPathRefused(cfg.User, cfg.Database, schema), err),
	}
}

// connectTimeout is the bound on making a connection: opt when set, else
// fromDSN (the parsed DSN's connect_timeout) when positive, else
// DefaultConnectTimeout.
func connectTimeout(opt, fromDSN time.Duration) time.Duration {
	switch {
	case opt > 0:
		return opt
	case fromDSN > 0:
		return fromDSN
	}
	return DefaultConnectTimeout
}

// prepare creates schema when missing and checks that connections resolve
// to it.
func prepare(ctx context.Context, db *sql.DB, schema string) error {
	if schema == "" {
		return nil
	}
	// Look before creating: CREATE SCHEMA IF NOT EXISTS needs the CREATE
	// privilege on the database even when the schema exists, and a role
	// confined to an existing schema must still be able to open.
	var present bool
	if err := db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&present); err != nil {
		return fmt.Errorf("cairnq: open: %w", err)
	}
	if !present {
		_, err := db.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+pq.QuoteIdentifier(schema))
		// Two processes creating the schema at once can both pass IF NOT
		// EXISTS; the loser fails on the catalog's unique index.
		if err != nil && !isSQLState(err, "42P06", "23505") {
			return fmt.Errorf("cairnq: open: create schema %s: %w", pq.QuoteIdentifier(schema), err)
		}
	}
	var current sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT current_schema()").Scan(&current); err != nil {
		return fmt.Errorf("cairnq: open: %w", err)
	}
	if current.String != schema {
		return fmt.Errorf("cairnq: open: connections resolve to schema %q, not %q: the search_path startup parameter was not applied (a connection pooler dropping it?): %w",
			current.String, schema, cairnq.ErrSchemaMismatch)
	}
	return nil
}

// New returns an executor that runs its statements on db, the application's
// own pool, and whose [Executor.Close] leaves db open. [Options.Schema] is
// ignored.
//
// dsn is needed only for LISTEN: lib/pq's Listener dials a connection of its
// own and cannot take one from db, so it must be told where db points. Pass
// "" when there is no DSN (a custom connector, say); Listen then reports
// [executor.ErrListenUnavailable] and cairnq falls back to polling.
func New(db *sql.DB, dsn string, opts *Options) *Executor {
	if db == nil {
		panic("cairnqlibpq: New called with a nil *sql.DB")
	}
	binary := false
	if cfg, err := pq.NewConfig(dsn); dsn != "" && err == nil {
		binary = cfg.BinaryParameters
	}
	return newExecutor(db, dsn, withDefaults(opts), false, binary)
}

// newExecutor makes the executor over db: its statements prepared, or
// their arguments bound where lib/pq sends them in one round trip
// (binary_parameters), or else written into the text (see sqlexec).
func newExecutor(db *sql.DB, dsn string, o Options, prepare, binary bool) *Executor {
	args := sqlexec.ArgumentsAuto
	if binary {
		args = sqlexec.ArgumentsBind
	}
	return &Executor{
		sql:  sqlexec.New(db, &sqlexec.Options{TxOptions: o.TxOptions, Prepare: prepare, Arguments: args}),
		db:   db,
		dsn:  dsn,
		opts: o,
		listenCfg: pglisten.Config{
			LogPrefix: logPrefix, Logger: o.Logger, OnReconnect: o.OnReconnect,
			BackoffMin: o.MinReconnectInterval, BackoffMax: o.MaxReconnectInterval,
		},
	}
}

func withDefaults(opts *Options) Options {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TxOptions != nil {
		t := *o.TxOptions
		o.TxOptions = &t
	}
	return o
}

// DB returns the pool the executor runs on: the one [Open] made (tune it
// with SetMaxOpenConns and friends) or the one passed to [New].
func (e *Executor) DB() *sql.DB { return e.db }

// Native returns the executor's *sql.DB as an any.
func (e *Executor) Native() any { return e.db }

// Query runs one statement on the pool; see [executor.Session.Query]. Rows
// hold lib/pq's values: int64 for integers, float64, bool, string for text,
// []byte for jsonb and for types it has no Go type for (numeric, arrays,
// name, void). errors.As finds a server error's *pq.Error.
func (e *Executor) Query(ctx context.Context, query string, args ...any) ([]executor.Row, error) {
	return e.sql.Query(ctx, query, args...)
}

// QueryPositional is Query with the rows by position; see
// [executor.PositionalQuerier].
func (e *Executor) QueryPositional(ctx context.Context, query string, args ...any) (*executor.Rows, error) {
	return e.sql.QueryPositional(ctx, query, args...)
}

// Exec runs a parameterless, possibly multi-statement script on one pooled
// connection; lib/pq sends a statement without arguments over the simple
// query protocol.
func (e *Executor) Exec(ctx context.Context, script string) error {
	return e.sql.Exec(ctx, script)
}

// Tx runs fn in one transaction; see [sqlexec.Executor.Tx]. The session fn
// receives is bound to a *sql.Tx, which [TxOf] returns.
func (e *Executor) Tx(ctx context.Context, fn func(ctx context.Context, s executor.Session) error) error {
	return e.sql.Tx(ctx, fn)
}

// Close stops every listener the executor started that is still running
// and, for an executor made by [Open], closes its pool. An executor made by
// [New] leaves the application's pool open.
func (e *Executor) Close() error {
	e.listeners.Close()
	_ = e.sql.Close() // its prepared statements; always nil
	if e.owned {
		return e.db.Close()
	}
	return nil
}

// TxSession returns a Session that runs its statements in tx, a transaction
// the application holds and will itself commit or roll back, so cairnq's
// writes commit or roll back with the application's. It is
// [sqlexec.TxSession], repeated here so that an application importing this
// adapter needs nothing else.
func TxSession(tx *sql.Tx) executor.Session { return sqlexec.TxSession(tx) }

// TxOf returns the *sql.Tx behind a session that [Executor.Tx] handed to its
// fn, or that [TxSession] made, and false for any other session. It is
// [sqlexec.TxOf].
func TxOf(s executor.Session) (*sql.Tx, bool) { return sqlexec.TxOf(s) }

// isSQLState reports whether err holds a server error with one of codes.
func isSQLState(err error, codes ...string) bool {
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) {
		return false
	}
	for _, c := range codes {
		if string(pqErr.Code) == c {
			return true
		}
	}
	return false
}
