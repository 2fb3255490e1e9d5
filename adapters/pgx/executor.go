package cairnqpgx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/outage"
	"github.com/cairnq/cairnq-go/internal/pglisten"
	"github.com/cairnq/cairnq-go/internal/pgroute"
	"github.com/cairnq/cairnq-go/internal/quietlog"
)

// Options configures an [Executor]. The zero value (or a nil *Options) is
// valid and means every default.
type Options struct {
	// Schema, on the [Open] path only, is the schema cairnq lives in: Open
	// creates it when missing and sets search_path to it (alone) on every
	// connection of its pool. It must match ^[A-Za-z_][A-Za-z0-9_]{0,62}$
	// and is always quoted, so it is case-sensitive. [New] ignores it: an
	// application pool is never reconfigured. Default "": the server's own
	// search_path. Through a connection pooler that refuses the
	// search_path startup parameter (pgbouncer does), Open fails with a
	// *cairnq.OpenError that says how to set the schema on the server
	// instead.
	Schema string

	// ExecMode is the pgx query execution mode of every statement this
	// executor or its sessions run through Query, passed as the first query
	// argument so it applies to an application pool without reconfiguring
	// it, and used as given.
	//
	// Default 0: the pool's DefaultQueryExecMode where it keeps no
	// statement on the server between round trips (cache_describe, exec,
	// simple_protocol), and where it does (pgx's default,
	// QueryExecModeCacheStatement, and QueryExecModeDescribeExec) only
	// where the pool's connections are proven to keep one server session
	// each: the server sees a connection come from this client's own
	// address and port, or the backend key it gave the connection names
	// the session the connection runs in (a connection pooler gives its
	// clients keys of its own). Anywhere else, behind a transaction-mode
	// pooler above all, the statements run in QueryExecModeCacheDescribe:
	// one round trip still, unnamed, so never bound on a server connection
	// that did not parse it. The first statement learns the route, on one
	// of the pool's connections.
	ExecMode pgx.QueryExecMode

	// MaxConns, on the [Open] path only, caps the pool's connections. The
	// LISTEN connection is taken out of the pool and does not count. Default
	// 0: the DSN's pool_max_conns, else pgx's default (the greater of 4 and
	// the number of CPUs).
	MaxConns int32

	// ConnectTimeout, on the [Open] path only, bounds making each
	// connection of the pool: dialing, TLS, authentication and startup. It
	// covers the check Open makes, every connection the pool opens later,
	// and so the LISTEN connection, which is taken from the pool. Default
	// 0: the DSN's connect_timeout (or PGCONNECT_TIMEOUT) when it sets one,
	// else [DefaultConnectTimeout]. A connect_timeout of 0, which libpq reads
	// as "no limit", cannot be told from an absent one and also gets the
	// default: a server that accepts connections and never answers must not
	// hang Open, whose context may have no deadline. [New] ignores it.
	ConnectTimeout time.Duration

	// Logger receives the listener's connection events and failed
	// rollbacks. Nil, the default, means cairnq's default, WARN and above through
	// slog.Default()'s handler (the cairnq package documentation's "Logging").
	Logger *slog.Logger

	// OnReconnect, when set, runs on the listener goroutine each time a
	// dropped LISTEN connection has been replaced and its channels listened
	// on again. Notifications sent while it was down are lost, so this is
	// the moment to poll. It must return quickly and must not call the
	// listener's stop. Default nil: nothing runs.
	OnReconnect func()
}

// DefaultConnectTimeout, 10 seconds, bounds making a connection of a pool
// that [Open] creates when neither [Options.ConnectTimeout] nor the DSN's
// connect_timeout says otherwise.
const DefaultConnectTimeout = 10 * time.Second

// schemaPattern is the allowlist of schema names: a plain identifier that
// fits Postgres's 63-byte limit.
var schemaPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// rollbackTimeout bounds a rollback, which runs even when the transaction's
// context is already canceled (a clean rollback keeps the connection).
const rollbackTimeout = 5 * time.Second

// Executor runs cairnq's statements on a *pgxpool.Pool. It implements
// executor.Executor and executor.Listener and is safe for concurrent use.
type Executor struct {
	pool        *pgxpool.Pool
	owned       bool // Close closes pool
	mode        pgx.QueryExecMode
	log         *slog.Logger
	onReconnect func()

	// Listener health timing; zero (pglisten's defaults) except in tests.
	idleCheck, pingTimeout time.Duration

	// named is true when the pool's default mode keeps statements on the
	// server; route then says whether that is safe (see Options.ExecMode).
	named bool
	route pgroute.Gate

	mu        sync.Mutex
	closed    bool
	listeners pglisten.Group // the running subscriptions, for Close
}

var (
	_ executor.Executor = (*Executor)(nil)
	_ executor.Listener = (*Executor)(nil)
	_ executor.Session  = (*Session)(nil)
	_ executor.Native   = (*Executor)(nil)
	_ executor.Native   = (*Session)(nil)
)

// New returns an executor over pool, which the application owns: Close
// stops this executor's listeners and leaves pool open. Options.Schema and
// Options.MaxConns are ignored (the store only asserts where the pool's
// connections resolve). pool must not be nil.
func New(pool *pgxpool.Pool, opts *Options) *Executor {
	if pool == nil {
		panic("cairnq/pgx: New with a nil pool")
	}
	return newExecutor(pool, false, opts)
}

// Open creates a pool from dsn (any form pgxpool.ParseConfig accepts) and
// returns an executor owning it: Close closes the pool. It validates
// options before connecting, then checks the server answers and, with
// Options.Schema, creates that schema if it is missing. ctx bounds only
// this setup; making each connection is bounded as well, by
// Options.ConnectTimeout.
func Open(ctx context.Context, dsn string, opts *Options) (*Executor, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	cfg, err := poolConfig(dsn, &o)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("cairnq/pgx: open: %w", err)
	}
	e := newExecutor(pool, true, &o)
	if err := e.setUp(ctx, o.Schema); err != nil {
		pool.Close()
		if o.Schema != "" {
			if oe := searchPathRefused(ctx, cfg, o.Schema, err); oe != nil {
				return nil, oe
			}
		}
		return nil, mark(ctx, err)
	}
	return e, nil
}

// searchPathRefused returns the *cairnq.OpenError that says what to do
// when err, setUp's failure with Options.Schema, is the search_path
// startup parameter refused: a connection pooler such as pgbouncer
// refuses a parameter it does not pass on, with SQLSTATE 08P01, before
// any connection exists. The code alone proves nothing (08P01 is also a
// pooler that lost its server, an outage), so a connection made without
// the parameter decides: when it is accepted, the parameter was refused.
// The OpenError wraps the server's *pgconn.PgError, not err, which says
// outage. It returns nil otherwise.
func searchPathRefused(ctx context.Context, cfg *pgxpool.Config, schema string, err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "08P01" {
		return nil
	}
	cc := cfg.ConnConfig.Copy()
	delete(cc.RuntimeParams, "search_path")
	conn, cerr := pgx.ConnectConfig(ctx, cc)
	if cerr != nil {
		return nil
	}
	_ = conn.Close(ctx)
	return &cairnq.OpenError{
		Path: fmt.Sprintf("%s:%d/%s", cc.Host, cc.Port, cc.Database),
		Err:  fmt.Errorf("cairnq/pgx: %s: %w", pgroute.SearchPathRefused(cc.User, cc.Database, schema), pe),
	}
}

// poolConfig validates o and returns the configuration of the pool Open
// makes from dsn. It does not connect.
func poolConfig(dsn string, o *Options) (*pgxpool.Config, error) {
	bad := func(arg, format string, a ...any) error {
		return &cairnq.ArgumentError{Op: "open", Arg: arg, Reason: fmt.Sprintf(format, a...)}
	}
	switch {
	case o.Schema != "" && !schemaPattern.MatchString(o.Schema):
		return nil, bad("schema", "%q is not a plain identifier (a letter or underscore, then up to 62 letters, digits or underscores)", o.Schema)
	case checkExecMode(o.ExecMode) != nil:
		return nil, bad("ExecMode", "%d is not a pgx.QueryExecMode", o.ExecMode)
	case o.MaxConns < 0:
		return nil, bad("MaxConns", "%d is negative", o.MaxConns)
	case o.ConnectTimeout < 0:
		return nil, bad("ConnectTimeout", "%v is negative", o.ConnectTimeout)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("cairnq/pgx: open: %w", err)
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
		if cfg.MinConns > cfg.MaxConns {
			cfg.MinConns = cfg.MaxConns
		}
	}
	// pgconn applies ConnectTimeout to the whole of each connection attempt
	// (every host of a multi-host DSN gets its own), whatever the caller's
	// context. Without it pgxpool (v5.12) waits up to 2 minutes for each
	// new connection, and a bare pgx.ConnectConfig forever.
	switch {
	case o.ConnectTimeout > 0:
		cfg.ConnConfig.ConnectTimeout = o.ConnectTimeout
	case cfg.ConnConfig.ConnectTimeout <= 0:
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	if o.Schema != "" {
		// A startup parameter, not a SET after connecting: it costs no round
		// trip and is the session default, so RESET ALL or DISCARD ALL
		// restore it. The quoted form is what search_path parses.
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{o.Schema}.Sanitize()
	}
	return cfg, nil
}

func newExecutor(pool *pgxpool.Pool, owned bool, opts *Options) *Executor {
	e := &Executor{
		pool: pool, owned: owned, log: quietlog.Default(),
		named: pgroute.KeepsStatements(pool.Config().ConnConfig.DefaultQueryExecMode),
	}
	if opts != nil {
		e.mode = opts.ExecMode
		e.onReconnect = opts.OnReconnect
		if opts.Logger != nil {
			e.log = opts.Logger
		}
	}
	return e
}

// modeFor is the mode of the executor's statements: Options.ExecMode when
// set, else the pool's own (0) where it is safe; see Options.ExecMode.
func (e *Executor) modeFor(ctx context.Context) pgx.QueryExecMode {
	if e.mode != 0 || !e.named || e.route.Direct(ctx, e.probeRoute) {
		return e.mode
	}
	return pgx.QueryExecModeCacheDescribe
}

// probeRoute finds the route of one of the pool's connections (they all
// come from the same configuration).
func (e *Executor) probeRoute(ctx context.Context) (pgroute.Route, error) {
	c, err := e.pool.Acquire(ctx)
	if err != nil {
		return pgroute.Route{}, err
	}
	defer c.Release()
	return connRoute(ctx, c.Conn())
}

// connRoute finds the route of conn, its backend key compared too. It
// runs one statement on conn, which must not be in a failed transaction.
func connRoute(ctx context.Context, conn *pgx.Conn) (pgroute.Route, error) {
	row := make([]any, pgroute.Columns)
	dest := make([]any, len(row))
	for i := range row {
		dest[i] = &row[i]
	}
	if err := conn.QueryRow(ctx, pgroute.Query, pgx.QueryExecModeSimpleProtocol).Scan(dest...); err != nil {
		return pgroute.Route{}, fmt.Errorf("cairnq/pgx: route: %w", err)
	}
	sock := conn.PgConn().Conn()
	return pgroute.Of(sock.LocalAddr(), sock.RemoteAddr(), int64(conn.PgConn().PID()), row), nil
}

// Route says where the executor's connections go, in words: straight to
// the server, or through a relay of bytes, each keeping one server
// session (cairnq then keeps its statements prepared), or through a
// connection pooler (it then sends them unnamed; see [Options.ExecMode]).
// It runs one statement on a connection of the pool. cairnq doctor
// reports it.
func (e *Executor) Route(ctx context.Context) (keepsSession bool, description string, err error) {
	r, err := e.probeRoute(ctx)
	if err != nil {
		return false, "", err
	}
	return r.KeepsSession(), r.String(), nil
}

func checkExecMode(m pgx.QueryExecMode) error {
	switch m {
	case 0, pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol:
		return nil
	}
	return fmt.Errorf("unknown ExecMode %d", m)
}

// setUp checks that the server answers and creates schema when it is not
// already there.
func (e *Executor) setUp(ctx context.Context, schema string) error {
	if schema == "" {
		if err := e.pool.Ping(ctx); err != nil {
			return fmt.Errorf("cairnq/pgx: open: %w", err)
		}
		return nil
	}
	// Look first: CREATE SCHEMA IF NOT EXISTS checks the CREATE privilege on
	// the database before noticing the schema exists, so a role that may not
	// create schemas could never open an installed one.
	rows, err := e.Query(ctx, "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1) AS present", schema)
	if err != nil {
		return fmt.Errorf("cairnq/pgx: open: look for schema %s: %w", schema, err)
	}
	if len(rows) == 1 && rows[0]["present"] == true {
		return nil
	}
	_, err = e.pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize(), pgx.QueryExecModeSimpleProtocol)
	// Two processes creating it at once: the loser gets a unique violation
	// on pg_namespace (or duplicate_schema); the schema is there either way.
	if err != nil && sqlState(err) != "23505" && sqlState(err) != "42P06" {
		return fmt.Errorf("cairnq/pgx: open: create schema %s: %w", schema, err)
	}
	return nil
}

// Pool returns the pool this executor runs on.
func (e *Executor) Pool() *pgxpool.Pool { return e.pool }

// Native returns the *pgxpool.Pool this executor runs on.
func (e *Executor) Native() any { return e.pool }

// Query runs one statement on a pooled connection and returns its rows as
// pgx's Rows.Values decodes them; see executor.Session.
func (e *Executor) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	return query(ctx, e.pool, e.modeFor(ctx), sql, args)
}

// QueryPositional is Query with the rows by position; see executor.PositionalQuerier.
func (e *Executor) QueryPositional(ctx context.Context, sql string, args ...any) (*executor.Rows, error) {
	return queryRows(ctx, e.pool, e.modeFor(ctx), sql, args)
}

// Exec runs a parameterless script, possibly several statements, on a
// pooled connection with the simple protocol. Without an explicit
// transaction in the script, Postgres runs it as one implicit transaction.
func (e *Executor) Exec(ctx context.Context, script string) error {
	return execScript(ctx, e.pool, script)
}

// Tx begins a transaction on one pooled connection and runs fn with a
// [*Session] bound to it. It commits when fn returns nil; when fn returns an
// error it rolls back and returns that error unchanged; when fn panics (or
// calls runtime.Goexit) it rolls back and lets the panic continue. The
// connection always returns to the pool. The session must not be used after
// fn returns.
func (e *Executor) Tx(ctx context.Context, fn func(ctx context.Context, s executor.Session) error) error {
	mode := e.modeFor(ctx)
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		return mark(ctx, fmt.Errorf("cairnq/pgx: begin: %w", err))
	}
	s := &Session{tx: tx, mode: mode}
	finished := false
	defer func() {
		if !finished { // fn panicked or called runtime.Goexit
			e.rollback(ctx, tx)
		}
	}()
	ferr := fn(ctx, s)
	finished = true
	if ferr != nil {
		e.rollback(ctx, tx)
		return ferr
	}
	if err := tx.Commit(ctx); err != nil {
		return mark(ctx, fmt.Errorf("cairnq/pgx: commit: %w", err))
	}
	return nil
}

// rollback rolls tx back even if ctx is done, and logs a failure: the
// caller is already returning another error or panic. Either way pgxpool
// releases the connection (destroying it if the rollback failed).
//
// When ctx ended during a statement, pgx closed the connection to stop
// it, and the server rolled the transaction back as the connection went:
// the rollback that then fails is the expected end of a deadline, not a
// fault to warn of.
func (e *Executor) rollback(ctx context.Context, tx pgx.Tx) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	err := tx.Rollback(rctx)
	switch {
	case err == nil, errors.Is(err, pgx.ErrTxClosed):
	case ctx.Err() != nil && tx.Conn().IsClosed():
		e.log.DebugContext(ctx, "cairnq/pgx: the context ended mid-transaction; the connection went with it", "err", err)
	default:
		e.log.WarnContext(ctx, "cairnq/pgx: rollback failed; the connection is discarded", "err", err)
	}
}

// Close stops every listener this executor started and, when the executor
// came from [Open], closes its pool. A pool given to [New] stays open. Close
// is idempotent and always returns nil.
func (e *Executor) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.listeners.Close()
	if e.owned {
		e.pool.Close()
	}
	return nil
}

// querier is what pgxpool.Pool, pgx.Tx and *pgx.Conn have in common.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// query runs sql on q in mode (0: q's default) and collects every row.
func query(ctx context.Context, q querier, mode pgx.QueryExecMode, sql string, args []any) ([]executor.Row, error) {
	out := []executor.Row{}
	_, err := eachRow(ctx, q, mode, sql, args, func(fields []pgconn.FieldDescription, vals []any) {
		row := make(executor.Row, len(fields))
		for i := range fields {
			row[fields[i].Name] = vals[i]
		}
		out = append(out, row)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// queryRows is query with the rows by position.
func queryRows(ctx context.Context, q querier, mode pgx.QueryExecMode, sql string, args []any) (*executor.Rows, error) {
	out := &executor.Rows{}
	names, err := eachRow(ctx, q, mode, sql, args, func(_ []pgconn.FieldDescription, vals []any) {
		out.Values = append(out.Values, slices.Clone(vals))
	})
	if err != nil {
		return nil, err
	}
	out.Columns = names
	return out, nil
}

// eachRow runs sql on q in mode (0: q's default) and hands each row's
// decoded values to row, in column order, in a slice row must not keep,
// with the result's fields, which row must not keep either. It returns
// the columns' names, read while the rows were open: the fields belong to
// the connection, whose next statement rewrites them once it is back in
// the pool.
func eachRow(ctx context.Context, q querier, mode pgx.QueryExecMode, sql string, args []any, row func(fields []pgconn.FieldDescription, vals []any)) ([]string, error) {
	if mode != 0 {
		args = append([]any{mode}, args...)
	}
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, mark(ctx, fmt.Errorf("cairnq/pgx: query: %w", err))
	}
	defer rows.Close()
	fields := rows.FieldDescriptions()
	names := make([]string, len(fields))
	for i := range fields {
		names[i] = fields[i].Name
	}
	var types *pgtype.Map
	if c := rows.Conn(); c != nil {
		types = c.TypeMap()
	} else { // Rows that wrap pgx's may have no connection to ask
		types = pgtype.NewMap()
	}
	vals := make([]any, len(fields))
	last := lastValues{raw: make([][]byte, len(fields)), vals: make([]any, len(fields))}
	for rows.Next() {
		raw := rows.RawValues()
		for i := range fields {
			if v, ok := last.same(i, raw[i]); ok {
				vals[i] = v
				continue
			}
			v, err := decodeColumn(types, &fields[i], raw[i])
			if err != nil {
				return nil, fmt.Errorf("cairnq/pgx: query: column %s: %w", fields[i].Name, err)
			}
			vals[i] = v
			last.keep(i, raw[i], v)
		}
		row(fields, vals)
	}
	if err := rows.Err(); err != nil {
		return nil, mark(ctx, fmt.Errorf("cairnq/pgx: query: %w", err))
	}
	return names, nil
}

// lastValues remembers each column's last short immutable value and its
// bytes, so that a row repeating it reuses the decoded value instead of
// allocating it again: the rows a claim returns share their queue, name,
// status, worker and lease, and a group's settlements their status
// (docs/benchmarks.md has what the decodes cost).
type lastValues struct {
	raw  [][]byte // a copy of each column's last kept bytes
	vals []any
	// buf is where a column's first copy goes: one allocation for the
	// columns of a row rather than one each, since most statements
	// return a single row, for which nothing is ever reused. A column
	// later keeps its slot while its values fit.
	buf []byte
}

// maxSharedBytes bounds the values lastValues keeps: repeated values are
// short, and a long one would only be copied for nothing.
const maxSharedBytes = 64

// same returns column i's last kept value when raw holds the same bytes.
func (l *lastValues) same(i int, raw []byte) (any, bool) {
	if raw == nil || l.vals[i] == nil || !bytes.Equal(l.raw[i], raw) {
		return nil, false
	}
	return l.vals[i], true
}

// keep records v, decoded from raw, as column i's last value when v cannot
// be changed through one row's copy: strings, numbers, booleans, times.
func (l *lastValues) keep(i int, raw []byte, v any) {
	switch v.(type) {
	case string, int64, int32, int16, float64, float32, bool, time.Time:
	default:
		return
	}
	if len(raw) > maxSharedBytes {
		return
	}
	if cap(l.raw[i]) < len(raw) {
		if cap(l.buf)-len(l.buf) < maxSharedBytes {
			l.buf = make([]byte, 0, 16*maxSharedBytes)
		}
		n := len(l.buf)
		l.buf = l.buf[:n+maxSharedBytes]
		l.raw[i] = l.buf[n : n : n+maxSharedBytes]
	}
	l.raw[i], l.vals[i] = append(l.raw[i][:0], raw...), v
}

// decodeColumn turns one column into the value rows.Values would give it,
// except that json and jsonb stay JSON text (see jsonText). Decoding column
// by column rather than through Values spares every row a json.Unmarshal
// of each JSON column whose result would only be thrown away.
func decodeColumn(types *pgtype.Map, f *pgconn.FieldDescription, raw []byte) (any, error) {
	switch {
	case raw == nil:
		return nil, nil
	case f.DataTypeOID == pgtype.JSONOID || f.DataTypeOID == pgtype.JSONBOID:
		return jsonText(f, raw), nil
	}
	if t, ok := types.TypeForOID(f.DataTypeOID); ok {
		return t.Codec.DecodeValue(types, f.DataTypeOID, f.Format, raw)
	}
	if f.Format == pgx.TextFormatCode {
		return string(raw), nil
	}
	return bytes.Clone(raw), nil
}

// jsonText returns a json or jsonb column as its JSON text. pgx's Values
// decodes JSON into Go values, and a decoded JSON string is a Go string,
// which nothing downstream can tell from JSON text: the result "42" would
// read back as the number 42. The raw column bytes carry no such doubt.
// raw is never nil here: decodeColumn answers NULL before calling it.
func jsonText(f *pgconn.FieldDescription, raw []byte) any {
	if f.DataTypeOID == pgtype.JSONBOID && f.Format == pgx.BinaryFormatCode && len(raw) > 0 {
		raw = raw[1:] // jsonb's binary form is a version byte, then the text
	}
	return json.RawMessage(bytes.Clone(raw))
}

// execScript runs script with the simple protocol, which accepts several
// statements. (pgx also picks it for argument-less Exec; saying so keeps
// that true whatever the pool's default mode.)
func execScript(ctx context.Context, q querier, script string) error {
	if _, err := q.Exec(ctx, script, pgx.QueryExecModeSimpleProtocol); err != nil {
		return mark(ctx, fmt.Errorf("cairnq/pgx: exec: %w", err))
	}
	return nil
}

// mark is outage.Mark with what pgx knows of when err happened: an error
// that holds a *pgconn.ConnectError was raised while a connection was
// being made, where a server's (or a pooler's) SQLSTATE answer is final
// and no outage (outage.AtConnect). pgbouncer answers 08P01 both to what
// it refuses at connect (an unknown database, a startup parameter it does
// not pass on, a wrong password) and, mid-session, when it lost its
// server: only the phase tells them apart.
//
// pgx from 5.13 reports a connection that an earlier failure of the same
// operation closed as ErrConnClosed, not safe to retry (a request may
// have gone out), where 5.12 said safe: the connection is lost all the
// same, an outage either way.
func mark(ctx context.Context, err error) error {
	if errors.As(err, new(*pgconn.ConnectError)) {
		err = outage.AtConnect(err)
	}
	if errors.Is(err, pgconn.ErrConnClosed) {
		return outage.Lost(ctx, err)
	}
	return outage.Mark(ctx, err)
}

// sqlState is err's SQLSTATE, or "" when it carries none.
func sqlState(err error) string {
	var s interface{ SQLState() string }
	if errors.As(err, &s) {
		return s.SQLState()
	}
	return ""
}
