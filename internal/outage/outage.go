// Package outage tells a Postgres database out of reach from every other
// failure, in one place for the store and every adapter of this module,
// whatever the driver: a program must be able to tell an outage, which
// passes, from a bug, which does not.
//
// It decides by what a driver's error is, never by its words: a SQLSTATE
// (read through a SQLState method, which pgx's, lib/pq's and the bun
// adapter's server errors have), pgx's mark of an error raised before
// anything reached the server (a SafeToRetry method), database/sql's
// driver.ErrBadConn, an end of stream (io.EOF, io.ErrUnexpectedEOF), a
// *net.OpError or a *net.DNSError. A driver's connect errors
// (pgconn.ConnectError, lib/pq's and pgdriver's) wrap one of these.
//
// A server's answer means one thing mid-session and another while a
// connection is being made. Mid-session, SQLSTATE class 08 is the
// connection failing under the call: pgbouncer answers 08P01 (protocol
// violation) when it lost its server or cannot log in to it. While a
// connection is being made, pgbouncer answers 08P01 to what it refuses
// for good too: a database it does not know ("bouncer config error"), a
// startup parameter it does not pass on, a wrong password, and, before
// pgbouncer 1.20 (which passes the server's SQLSTATE on), a login the
// server refused it. Nothing but the words tells those apart, and the
// words are not read here. So an error an adapter marks with AtConnect
// reads the other way: there a SQLSTATE of class 08 is a refusal, no
// outage, while the server's "not now" (57P01, 57P02, 57P03, 53300) and
// a connection that cannot be made at all (refused, reset, timed out, an
// end of stream) stay outages.
//
// What that costs: pgbouncer refuses a client over its max_client_conn
// with 08P01, and before 1.20 passes a starting server's 57P03 on as
// 08P01 to the clients waiting for a server it has not reached since it
// started; both read as refusals. A server it cannot reach at all keeps
// those clients waiting: until their connect timeout, an outage, or,
// when pgbouncer's query_wait_timeout (120 s by default) ends first, its
// 08P01 at connect, a refusal. Bound the connect (connect_timeout) below
// query_wait_timeout to have that outage read as one. A
// driver's connect also covers the checks it runs on the new session
// (target_session_attrs), where a pooler's 08P01 is its server lost, and
// reads as a refusal too.
//
// Only an adapter knows the phase: the pgx adapter marks every error
// that holds a *pgconn.ConnectError, on any pool, and the lib/pq adapter
// marks what the connector of the pools its Open makes returns. An error
// from a *sql.DB an application built itself (sqlexec.New, the lib/pq
// adapter's New, the gorm and bun adapters) or from an executor written
// elsewhere says nothing of its phase: there a pooler's 08P01 at connect
// still reads as an outage.
//
// It imports only the standard library and cairnqtype, whose sentinel it
// marks errors with.
package outage

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/cairnq/cairnq-go/cairnqtype"
)

// Is reports whether err says the database could not be reached: the
// connection was lost or could not be made, or the server said it is
// starting up, shutting down or out of connections. An error already
// marked (errors.Is finds cairnqtype.ErrUnavailable) is one. A context's
// end is never one here: whose deadline it was only the caller knows
// (see Mark). An error marked with AtConnect that holds a SQLSTATE of
// class 08 is not one.
func Is(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, cairnqtype.ErrUnavailable):
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	// A server's answer decides: a connect error wrapping a refused
	// password or a missing database is no outage, whatever else it holds.
	// While a connection was being made (AtConnect), class 08 is a refusal
	// too: see the package documentation.
	var st interface{ SQLState() string }
	if errors.As(err, &st) {
		code := st.SQLState()
		if strings.HasPrefix(code, "08") && errors.Is(err, errConnecting) {
			return false
		}
		return unavailableState(code)
	}
	// pgx marks the errors it raised before anything reached the server:
	// a connection it found closed ("conn closed", which database/sql over
	// pgx's stdlib passes on as it is), a write that failed.
	var unsent interface{ SafeToRetry() bool }
	if errors.As(err, &unsent) && unsent.SafeToRetry() {
		return true
	}
	switch {
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	}
	// Refused, reset, timed out, unreachable: the network's errors arrive
	// inside a *net.OpError, except a TLS alert (crypto/tls's "local
	// error" and "remote error" operations), which is a configuration
	// the two ends disagree on and does not pass.
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Op != "remote error" && op.Op != "local error"
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// unavailableState reports whether a SQLSTATE is the server (or a
// connection pooler in front of it) out of reach for now.
func unavailableState(code string) bool {
	// Class 08, connection exception: what a pooler such as pgbouncer
	// answers (08P01) when it lost its server connection or cannot make
	// one, as much as a server's own connection failures.
	if strings.HasPrefix(code, "08") {
		return true
	}
	switch code {
	case "57P01", // admin_shutdown: the server is shutting down, or an operator ended the session
		"57P02", // crash_shutdown: another backend crashed and the server reset every session
		"57P03", // cannot_connect_now: starting up, shutting down, or not yet consistent
		"57P05", // idle_session_timeout: the server closed the session
		"53300": // too_many_connections
		return true
	}
	return false
}

// Mark returns err so that errors.Is(err, cairnqtype.ErrUnavailable)
// holds when err is an outage (Is), with err's own text and err still
// reachable through errors.As and errors.Is; any other err comes back
// unchanged. ctx is the context of the call that failed: once it has
// ended, the failure is the caller giving up, not an outage, whatever the
// driver made of it. While it is live, a deadline that passed inside the
// driver was the driver's own, which bounds making a connection (pgx's
// and lib/pq's connect_timeout): a pool that cannot connect.
func Mark(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil || errors.Is(err, cairnqtype.ErrUnavailable) {
		return err
	}
	if Is(err) || errors.Is(err, context.DeadlineExceeded) {
		return &unavailable{err}
	}
	return err
}

// Lost returns err marked as an outage, as Mark marks one, for an adapter
// that knows from its driver's own error that the connection was lost
// where Is cannot tell (pgx's ErrConnClosed: adapters/pgx). Like Mark it
// leaves err unchanged once ctx has ended.
func Lost(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil || errors.Is(err, cairnqtype.ErrUnavailable) {
		return err
	}
	return &unavailable{err}
}

// unavailable is an error marked as an outage. It keeps err's text: the
// mark is for programs, and the driver's words already say what failed.
type unavailable struct{ err error }

func (e *unavailable) Error() string { return e.err.Error() }

func (e *unavailable) Unwrap() error { return e.err }

// Is makes errors.Is(err, cairnqtype.ErrUnavailable) hold.
func (e *unavailable) Is(target error) bool { return target == cairnqtype.ErrUnavailable }

// AtConnect returns err, an error raised while a connection was being
// made, marked so that Is and Mark read a server's answer in it as final:
// a SQLSTATE of class 08 in it (pgbouncer's 08P01 above all) is then a
// refusal, no outage, while 57P03, 53300 and every failure to make the
// connection (refused, reset, timed out) stay outages. The mark keeps
// err's text and err, for errors.As and errors.Is, and survives any
// wrapping with %w, so a later Mark (the store's second pass over an
// adapter's error) reads it too. A nil err stays nil.
//
// It must wrap err before Mark does: an error Mark already marked stays
// an outage.
func AtConnect(err error) error {
	if err == nil || errors.Is(err, errConnecting) {
		return err
	}
	return &atConnect{err}
}

// errConnecting is what errors.Is finds in an error AtConnect marked.
var errConnecting = errors.New("outage: raised while connecting")

// atConnect is an error AtConnect marked. It keeps err's text.
type atConnect struct{ err error }

func (e *atConnect) Error() string { return e.err.Error() }

func (e *atConnect) Unwrap() error { return e.err }

// Is makes errors.Is(err, errConnecting) hold.
func (e *atConnect) Is(target error) bool { return target == errConnecting }
