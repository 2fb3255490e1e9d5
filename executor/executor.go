// Package executor is the seam between cairnq's Postgres store and whatever
// driver talks to Postgres: a pgx pool, database/sql over lib/pq or pgx
// stdlib, a gorm or bun handle, or an adapter somebody else wrote.
//
// The seam is deliberately small because strangers implement it: a Session
// runs statements, an Executor adds transactions and Close, and a Listener,
// a PositionalQuerier, a Copier and Native are optional capabilities found
// by type assertion. Rows cross the seam exactly
// as the driver produced them; the store normalizes them in one place, so an
// adapter never has to reconfigure its driver (or the application's type
// mapping) to suit cairnq.
//
// This package imports only the standard library.
//
// # LISTEN in this repository
//
// A Listener written elsewhere picks its own timing. These are what
// "reconnects with backoff" means for the adapters of this repository
// (pgx, lib/pq, gorm, bun), which share one reconnect loop, and how the
// Postgres store uses any Listener; the adapters' documentation refers
// here.
//
//   - Connecting: one attempt to connect and LISTEN on all of a
//     subscription's channels, the first one included, may take 15
//     seconds, and the store allows a whole Listen call no longer.
//   - Reconnecting: the first attempt to replace a dropped connection
//     waits 50 milliseconds, and the wait doubles after each failed
//     attempt, up to 5 seconds. Each wait is drawn at random from the
//     upper half of its value, and a connection that stayed up for 10
//     seconds starts the next reconnection from 50 milliseconds again, so
//     a server that accepts and drops at once is not hammered. The lib/pq
//     adapter's MinReconnectInterval and MaxReconnectInterval options
//     replace the 50 milliseconds and the 5 seconds.
//   - Checking: a connection that has had no notification for 30 seconds
//     is checked (a ping, or a notification the listener sends itself),
//     and counts as dropped when the check takes longer than 10 seconds.
//     TCP keepalive alone would take the better part of an hour to notice
//     a half-open connection.
//   - Listening on demand: the store listens to a channel while a waiter
//     needs it (an idle worker, a Wait or Call, a Watch) and for 30
//     seconds after the last one is gone, so that the next one does not
//     pay a new LISTEN connection. After a Listen call failed with an
//     error other than [ErrListenUnavailable] (which stops the asking for
//     good), the store's waiters poll for 5 seconds before they ask again.
//
// # Errors
//
// An executor returns its driver's error wrapped with %w, so that the
// store reads what it is: a server error's SQLSTATE through a method
// SQLState() string (pgx's *pgconn.PgError and lib/pq's *pq.Error have
// it), and an outage (the database out of reach) by that SQLSTATE or by
// the driver's error itself: driver.ErrBadConn, io.EOF, a *net.OpError,
// pgx's errors raised before anything was sent. The store reports an
// outage as cairnq.ErrUnavailable, whichever executor produced it; the
// adapters of this repository mark their own errors so as well, so that
// an application running statements on one tells an outage from a bug
// the same way.
package executor

import (
	"context"
	"errors"
)

// Row is one result row keyed by column name, with values exactly as the
// driver produced them. The forms a value may take are defined once, by
// the readers in this package: Int64 (bigint and integer columns), Float64
// (double precision), Text, Bool and JSONText (json and jsonb: the text, or
// a decoded map or slice, never a decoded scalar). A SQL NULL is a nil
// value. The store reads every row through them and the conformance suite
// certifies executors against them.
type Row map[string]any

// Rows is a statement's rows by position, the result of PositionalQuerier:
// Columns names the result's columns in order, and Values holds one slice
// per row, its values in column order, each in a form a Row's value may
// take (the same readers define them).
type Rows struct {
	Columns []string
	Values  [][]any
}

// PositionalQuerier is the optional capability of a Session (or an Executor)
// to return a statement's rows by position rather than as a Row map
// each. The store uses it, where the session has it, for the statements
// it runs once per task, such as a claim's rows, sparing each row a map;
// the conformance suite certifies that it returns what Query returns.
// Query stays required.
type PositionalQuerier interface {
	QueryPositional(ctx context.Context, sql string, args ...any) (*Rows, error)
}

// Copier is the optional capability of a Session to write many rows into
// a table with COPY FROM STDIN, Postgres's fastest way in: no statement to
// parse and no rows returned. The store uses it, where the session of a
// Postgres transaction has it, for the new tasks of a large SubmitMany
// batch or of a workflow's steps, and for those steps' new keys, and
// runs insert_many and upsert_keys where it does not; the conformance suite
// certifies that it writes what it is given (copy_rows). It returns how
// many rows it wrote. A failed COPY, or an error from rows, aborts an
// enclosing transaction, as a failed statement does.
type Copier interface {
	CopyFrom(ctx context.Context, table string, columns []string, rows CopyRows) (int64, error)
}

// CopyRows yields the rows of a COPY one at a time, so the caller can
// build each while the ones before it are on their way (its method set
// is pgx's CopyFromSource). Next advances to the next row and reports
// whether there is one; Values returns its values in the columns' order,
// each a string, an int32, an int64 or nil (NULL), a jsonb column's value
// its JSON text as a string, in a slice that is valid until the next call
// of Next; Err is the error that ended the rows early, if any.
type CopyRows interface {
	Next() bool
	Values() ([]any, error)
	Err() error
}

// Session runs statements on a pool or on one transaction's connection.
type Session interface {
	// Query runs one statement with positional arguments ($1..$n) and returns
	// every row it produced; a statement that produces no rows returns an
	// empty slice. A nil argument binds SQL NULL.
	Query(ctx context.Context, sql string, args ...any) ([]Row, error)
	// Exec runs a parameterless script that may hold several statements
	// (migrations). It must not be prepared: multi-statement text needs the
	// simple query protocol.
	Exec(ctx context.Context, script string) error
}

// Executor is a Session that can also open transactions.
type Executor interface {
	Session
	// Tx runs fn inside one transaction whose statements all go through the
	// Session handed to fn. It commits when fn returns nil and rolls back when
	// fn returns an error or panics (re-panicking after the rollback).
	Tx(ctx context.Context, fn func(ctx context.Context, s Session) error) error
	// Close releases what the executor opened. The store calls it only for
	// executors it opened itself, never for one the application handed in.
	Close() error
}

// Listener is the optional LISTEN capability of an Executor. Its absence
// costs latency (waiters fall back to polling), never correctness.
type Listener interface {
	// Listen subscribes to channels and calls onNotify for every notification
	// on them until stop is called. onNotify must not block for long.
	// ErrListenUnavailable (wrapped or not) means the server will never
	// accept LISTEN on this executor, so the caller stops trying. A
	// listener should subscribe only on a connection proven to receive
	// what the server sends: behind a transaction-mode pooler LISTEN is
	// accepted and never delivers (see ErrTransactionPooler). This
	// repository's adapters prove it before LISTEN.
	Listen(ctx context.Context, channels []string, onNotify func(channel, payload string)) (stop func(), err error)
}

// ErrListenUnavailable reports that LISTEN cannot work on this executor at
// all, for example behind a transaction-mode connection pooler. It is
// permanent: the store degrades to polling and does not retry.
var ErrListenUnavailable = errors.New("cairnq: LISTEN is unavailable on this executor")

// ErrTransactionPooler is wrapped, together with ErrListenUnavailable, by a
// Listener that found its connection goes through a transaction-mode
// connection pooler (pgbouncer with pool_mode=transaction, a hosted
// "pooled" endpoint). There LISTEN is accepted and never delivers: the
// pooler runs it on whichever server connection is free and then hands
// that connection to other clients, which receive its notifications
// instead. The store says so once, at INFO, and polls.
var ErrTransactionPooler = errors.New("the connection goes through a transaction-mode connection pooler")

// Native is the optional capability of a Session or an Executor to hand
// out the driver's own value it wraps: a pgx.Tx, *pgx.Conn or
// *pgxpool.Pool; a *sql.Tx, *sql.Conn or *sql.DB; a *gorm.DB; a bun.Tx or
// *bun.DB. cairnq itself never calls it. It serves code that works across
// adapters, such as a middleware writing through whatever transaction
// TaskContext.SucceedIn hands it, and type-switches on the result; code
// that knows its adapter uses that adapter's typed helpers instead
// (cairnqpgx.PgxTx, for one). Every adapter in this repository implements
// it on its executor and its sessions.
type Native interface {
	Native() any
}
