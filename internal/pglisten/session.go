package pglisten

import (
	"context"
	"crypto/rand"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"net"
	"time"

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
// buffers them for good. So before it LISTENs on its channels a session
// proves that its connection receives what the server sends: it LISTENs
// on a channel of its own, sends a notification on it from another
// connection of the same route, and waits for it. Behind a
// transaction-mode pooler the listening connection is idle, so holds no
// server session, and nothing reaches it; the LISTEN it leaves behind is
// on a channel nobody else uses.

// Delivery is how a session's connection is checked: each source supplies
// the three steps on its own driver.
type Delivery struct {
	// Listen LISTENs on channel on the listening connection.
	Listen func(ctx context.Context, channel string) error
	// Wait returns the next notification the listening connection
	// receives, ctx's error once ctx ends, or the error the connection
	// ran into.
	Wait func(ctx context.Context) (channel, payload string, err error)
	// Notify sends a notification on channel from another connection of
	// the same route (the pool's).
	Notify func(ctx context.Context, channel, payload string) error
}

// deliveryWait is how long the check waits for its notification. A
// connection that receives notifications has it back within
// milliseconds. It is sent once: behind a transaction-mode pooler the
// server connection left listening hands each notification to whichever
// client holds it then, and bun's pgdriver fails on one it did not ask
// for.
const deliveryWait = 3 * time.Second

// CheckDelivery makes sure a notification sent from another connection of
// the route reaches the listening connection (see Delivery), on a channel
// of its own. It returns ErrPooled when none comes back within
// deliveryWait, and the error of any step that fails.
func CheckDelivery(ctx context.Context, d Delivery) error {
	var b [8]byte
	_, _ = rand.Read(b[:])
	channel, token := "cairnq_delivery_"+hex.EncodeToString(b[:]), hex.EncodeToString(b[:4])
	if err := d.Listen(ctx, channel); err != nil {
		return Unavailable(err)
	}
	if err := d.Notify(ctx, channel, token); err != nil {
		return err
	}
	// The wait starts once the notification is sent, however long sending
	// took (a pool may have had to make a connection for it).
	wctx, cancel := context.WithTimeout(ctx, deliveryWait)
	defer cancel()
	for {
		ch, payload, err := d.Wait(wctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil && wctx.Err() != nil:
			return ErrPooled("no notification came back within " + deliveryWait.String())
		case err != nil:
			return Unavailable(err) // the connection failed, or refused the LISTEN
		case ch == channel && payload == token:
			return nil
		}
	}
}

// NotifySQL is a notification on channel with payload as a statement
// without arguments, which every driver sends in one message of the
// simple query protocol, leaving nothing on the server connection. Both
// are the check's own: a name of letters, digits and underscores, and hex.
func NotifySQL(channel, payload string) string {
	return "SELECT pg_notify('" + channel + "', '" + payload + "')"
}

// ErrPooled is the refusal of a session whose connection goes through a
// transaction-mode pooler: it wraps executor.ErrListenUnavailable and
// executor.ErrTransactionPooler.
func ErrPooled(how string) error {
	return fmt.Errorf("%w: %w: %s; a LISTEN would land on whichever server connection is free and stay there for other clients",
		executor.ErrListenUnavailable, executor.ErrTransactionPooler, how)
}

// DriverRoute finds the route of conn, a database/sql driver connection
// whose socket's addresses are local and remote: lib/pq's and bun's
// pgdriver's, whose backend key stays out of reach.
func DriverRoute(ctx context.Context, conn driver.Conn, local, remote net.Addr) (pgroute.Route, error) {
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return pgroute.Route{}, fmt.Errorf("a %T cannot run a query", conn)
	}
	rows, err := q.QueryContext(ctx, pgroute.Query, nil)
	if err != nil {
		return pgroute.Route{}, err
	}
	defer rows.Close()
	vals := make([]driver.Value, pgroute.Columns)
	if err := rows.Next(vals); err != nil {
		return pgroute.Route{}, err
	}
	row := make([]any, len(vals))
	for i, v := range vals {
		row[i] = v
	}
	return pgroute.Of(local, remote, -1, row), nil
}
