package pglisten

import (
	"context"
	"database/sql/driver"
	"fmt"
	"net"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/pgroute"
)

// The LISTEN connection's check. LISTEN belongs to a server session and is
// delivered to whichever client holds that session. Behind a
// transaction-mode connection pooler a client holds a server connection
// for one transaction only, so a LISTEN is accepted, delivers nothing to
// the client that sent it, and stays behind on a server connection the
// pooler then hands to other clients, which receive its notifications
// unasked: bun's pgdriver fails its next statement on them, and pgx
// buffers them for good. So before LISTEN a session proves that its
// client connection keeps one server session: at once where the
// connection goes straight to the server (or through a relay of bytes),
// and otherwise, behind a pooler, by the test below.

// BackendPID is the statement that names the server session a statement
// runs in. It takes no arguments: sent with the simple query protocol it
// leaves nothing on the server connection.
const BackendPID = "SELECT pg_backend_pid()"

// Pinned is a second connection of the listener's route held in an open
// transaction: its server session is taken for as long as the
// transaction lasts.
type Pinned struct {
	// PID is the server session of the pinned connection.
	PID int64
	// Release ends the transaction and gives the connection back.
	Release func()
}

// sessionRounds is how many times StaysWithSession tries to catch a
// transaction-mode pooler moving the listening connection.
const sessionRounds = 5

// StaysWithSession reports whether the listening connection keeps its
// server session across statements, where the connection goes through a
// pooler. mine runs BackendPID on the listening connection; pin pins a
// second connection of the same route.
//
// In session mode the listening connection's server session is its own
// for as long as it stays connected: no other client ever runs in it, and
// it runs every statement of the listening connection, so every round
// passes. In transaction mode the session the listening connection ran a
// statement in is free the moment that statement ends, and a pooler hands
// out the session it freed last (pgbouncer's default), so the pinned
// connection gets it, or the listening connection runs its next
// statement in another: either proves transaction pooling. Other clients
// taking sessions meanwhile can hide both signs in one round, not in all
// of them.
func StaysWithSession(ctx context.Context, mine func(context.Context) (int64, error), pin func(context.Context) (Pinned, error)) (bool, error) {
	for range sessionRounds {
		moved, err := sessionMoves(ctx, mine, pin)
		if err != nil || moved {
			return false, err
		}
	}
	return true, nil
}

// sessionMoves is one round of StaysWithSession.
func sessionMoves(ctx context.Context, mine func(context.Context) (int64, error), pin func(context.Context) (Pinned, error)) (bool, error) {
	first, err := mine(ctx)
	if err != nil {
		return false, err
	}
	other, err := pin(ctx)
	if err != nil {
		return false, err
	}
	defer other.Release()
	if other.PID == first {
		return true, nil
	}
	second, err := mine(ctx)
	if err != nil {
		return false, err
	}
	return second != first, nil
}

// ErrPooled is the refusal of a session whose connection goes through a
// transaction-mode pooler: it wraps executor.ErrListenUnavailable and
// executor.ErrTransactionPooler.
func ErrPooled(how string) error {
	return fmt.Errorf("%w: %w: %s; its LISTEN would land on whichever server connection is free and stay there for other clients",
		executor.ErrListenUnavailable, executor.ErrTransactionPooler, how)
}

// The same check on a database/sql driver connection (lib/pq's, bun's
// pgdriver's), where the server's backend key is out of reach and the
// route's addresses tell a direct connection instead.

// CheckDriverSession makes sure conn, whose socket's local address is
// local, keeps one server session: at once when its route is direct
// (pgroute.Of), else with pin. It returns ErrPooled when conn goes through
// a transaction-mode pooler.
func CheckDriverSession(ctx context.Context, conn driver.Conn, local net.Addr, pin func(context.Context) (Pinned, error)) error {
	route, err := DriverRoute(ctx, conn, local)
	if err != nil || route.Direct {
		return err
	}
	mine := func(ctx context.Context) (int64, error) { return DriverPID(ctx, conn) }
	stays, err := StaysWithSession(ctx, mine, pin)
	switch {
	case err != nil:
		return err
	case !stays:
		return ErrPooled("the server sessions of its connections change from one statement to the next")
	}
	return nil
}

// DriverRoute finds the route of conn, whose socket's local address is
// local.
func DriverRoute(ctx context.Context, conn driver.Conn, local net.Addr) (pgroute.Route, error) {
	vals, err := driverRow(ctx, conn, pgroute.Query, 2)
	if err != nil {
		return pgroute.Route{}, err
	}
	var addr *string
	var port *int64
	switch s := vals[0].(type) {
	case string:
		addr = &s
	case []byte:
		t := string(s)
		addr = &t
	}
	if p, ok := vals[1].(int64); ok {
		port = &p
	}
	return pgroute.Of(local, addr, port), nil
}

// DriverPID runs BackendPID on conn.
func DriverPID(ctx context.Context, conn driver.Conn) (int64, error) {
	vals, err := driverRow(ctx, conn, BackendPID, 1)
	if err != nil {
		return 0, err
	}
	pid, ok := vals[0].(int64)
	if !ok {
		return 0, fmt.Errorf("pg_backend_pid() came back as a %T", vals[0])
	}
	return pid, nil
}

// DriverPin holds conn in an open transaction, for CheckDriverSession;
// release (which Pinned.Release also runs) gives conn back.
func DriverPin(ctx context.Context, conn driver.Conn, release func()) (Pinned, error) {
	b, ok := conn.(driver.ConnBeginTx)
	if !ok {
		release()
		return Pinned{}, fmt.Errorf("a %T cannot begin a transaction", conn)
	}
	tx, err := b.BeginTx(ctx, driver.TxOptions{})
	if err != nil {
		release()
		return Pinned{}, err
	}
	done := func() { _ = tx.Rollback(); release() }
	pid, err := DriverPID(ctx, conn)
	if err != nil {
		done()
		return Pinned{}, err
	}
	return Pinned{PID: pid, Release: done}, nil
}

// driverRow runs a statement without arguments on conn and returns its
// first row, of n columns.
func driverRow(ctx context.Context, conn driver.Conn, query string, n int) ([]driver.Value, error) {
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return nil, fmt.Errorf("a %T cannot run a query", conn)
	}
	rows, err := q.QueryContext(ctx, query, nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	vals := make([]driver.Value, n)
	if err := rows.Next(vals); err != nil {
		return nil, err
	}
	return vals, nil
}
