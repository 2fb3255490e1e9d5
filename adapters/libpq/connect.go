package cairnqlibpq

import (
	"context"
	"database/sql/driver"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/lib/pq"

	"github.com/cairnq/cairnq-go/internal/outage"
	"github.com/cairnq/cairnq-go/internal/pglisten"
	"github.com/cairnq/cairnq-go/internal/pgroute"
)

// connector is the driver.Connector of a pool Open makes: lib/pq's, made
// to honour the context of each connection it makes and to tell which
// socket a connection went out on.
//
// lib/pq passes the context to its dialer only: once the socket is up, the
// startup (TLS, authentication, parameters) is bounded by connect_timeout
// alone, so a server that accepts and never answers held Open for the
// whole connect timeout whatever Open's context said. Here the socket of
// each connection being made is watched, and a context that ends puts its
// deadline in the past, which ends the startup at once.
type connector struct {
	pq *pq.Connector
}

// newConnector returns lib/pq's connector for cfg, dialing through
// watchedDialer.
func newConnector(cfg pq.Config) (*connector, error) {
	c, err := pq.NewConnectorConfig(cfg)
	if err != nil {
		return nil, err
	}
	c.Dialer(watchedDialer{})
	return &connector{pq: c}, nil
}

// Driver is lib/pq's driver.
func (c *connector) Driver() driver.Driver { return c.pq.Driver() }

// Connect makes one connection within ctx.
func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, _, err := c.connect(ctx)
	return conn, err
}

// connect makes one connection within ctx and returns it with the socket
// it went out on. Its error is marked as raised while connecting
// (outage.AtConnect), which database/sql passes on as it is to the
// statement that needed the connection: a server's or a pooler's SQLSTATE
// answer then reads as final, so that pgbouncer's 08P01 refusing an
// unknown database or a startup parameter is no outage, where the same
// code mid-session is pgbouncer losing its server.
func (c *connector) connect(ctx context.Context) (driver.Conn, net.Conn, error) {
	conn, sock, err := c.connectOnce(ctx)
	return conn, sock, outage.AtConnect(err)
}

// connectOnce is connect, its error unmarked.
func (c *connector) connectOnce(ctx context.Context) (driver.Conn, net.Conn, error) {
	w := &watch{}
	stop := context.AfterFunc(ctx, w.cancel)
	conn, err := c.pq.Connect(context.WithValue(ctx, watchKey{}, w))
	if !stop() && err == nil {
		// ctx ended as the startup finished: the deadline may be in the
		// past already, so the connection cannot be handed out.
		_ = conn.Close()
		return nil, nil, context.Cause(ctx)
	}
	if err != nil {
		if cerr := context.Cause(ctx); cerr != nil && ctx.Err() != nil {
			return nil, nil, fmt.Errorf("%w (%v)", cerr, err)
		}
		return nil, nil, err
	}
	return conn, w.socket(), nil
}

// watchKey carries a connection's watch from connect to the dialer.
type watchKey struct{}

// watch is one connection being made: its socket, once dialed, and
// whether its context ended.
type watch struct {
	mu       sync.Mutex
	conn     net.Conn
	canceled bool
}

// expired is a deadline in the past: every read and write fails at once.
var expired = time.Unix(1, 0)

// cancel ends the startup of the connection being made.
func (w *watch) cancel() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.canceled = true
	if w.conn != nil {
		_ = w.conn.SetDeadline(expired)
	}
}

// dialed records the socket, ending it at once when the context has
// already ended.
func (w *watch) dialed(c net.Conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.conn = c
	if w.canceled {
		_ = c.SetDeadline(expired)
	}
}

func (w *watch) socket() net.Conn {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.conn
}

// watchedDialer dials as lib/pq's default dialer does and hands the socket
// to the watch of the connection being made.
type watchedDialer struct{}

func (watchedDialer) Dial(network, address string) (net.Conn, error) {
	return watchedDialer{}.DialContext(context.Background(), network, address)
}

func (watchedDialer) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return watchedDialer{}.DialContext(ctx, network, address)
}

func (watchedDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	if w, ok := ctx.Value(watchKey{}).(*watch); ok {
		w.dialed(c)
	}
	return c, nil
}

// route finds where the connections c makes go: straight to the server or
// through a proxy (see [Options.NoPrepare]), on a connection of its own.
func (c *connector) route(ctx context.Context) (pgroute.Route, error) {
	conn, sock, err := c.connect(ctx)
	if err != nil {
		return pgroute.Route{}, err
	}
	defer conn.Close()
	return pglisten.DriverRoute(ctx, conn, sock.LocalAddr(), sock.RemoteAddr())
}
