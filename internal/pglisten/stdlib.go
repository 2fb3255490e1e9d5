package pglisten

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairnq/cairnq-go/executor"
)

// StdlibSource lends a [Listener] connections of an application's *sql.DB
// whose driver is pgx's stdlib: each session reserves one with DB.Conn and
// reaches the *pgx.Conn underneath through Conn.Raw. No second pool and no
// DSN: custom connectors, TLS and auth hooks keep working.
type StdlibSource struct{ DB *sql.DB }

// pgxConner is what pgx's stdlib driver connection (*stdlib.Conn) offers.
type pgxConner interface{ Conn() *pgx.Conn }

// CheckPool refuses a pool of one connection, which a listener would hold
// for good, starving every other statement. The error wraps
// executor.ErrListenUnavailable.
func (s StdlibSource) CheckPool() error {
	if s.DB.Stats().MaxOpenConnections == 1 {
		return fmt.Errorf("%w: the pool allows one open connection (SetMaxOpenConns(1)), which LISTEN would hold for good", executor.ErrListenUnavailable)
	}
	return nil
}

// Session implements [Source]. The reserved connection is closed, never
// returned to the pool, when the session ends; a driver connection other
// than pgx's stdlib yields executor.ErrListenUnavailable.
func (s StdlibSource) Session(ctx, connectCtx context.Context, l *Listener, subscribed func()) (up bool, err error) {
	cctx, cancel := context.WithTimeout(connectCtx, ConnectTimeout)
	defer cancel()
	conn, err := s.DB.Conn(cctx)
	if err != nil {
		return false, err
	}
	// After Raw returned driver.ErrBadConn the connection is already gone
	// and Close reports sql.ErrConnDone; there is nothing to act on.
	defer conn.Close()

	// The whole session runs inside Raw, the only place the driver
	// connection may be used. Raw then returns driver.ErrBadConn, so
	// database/sql closes the connection instead of pooling it: it still
	// LISTENs (or is broken), and nothing else should ever read from it.
	rawErr := conn.Raw(func(dc any) error {
		pc, ok := dc.(pgxConner)
		if !ok {
			err = fmt.Errorf("%w: the pool's driver connection is a %T, not pgx's stdlib (*stdlib.Conn)", executor.ErrListenUnavailable, dc)
			return nil // untouched: back to the pool
		}
		if err = CheckPgx(cctx, pc.Conn(), s.notify); err != nil {
			return driver.ErrBadConn
		}
		up, err = Serve(ctx, cctx, pc.Conn(), l, subscribed)
		return driver.ErrBadConn
	})
	if err == nil {
		err = rawErr
	}
	return up, err
}

// notify sends a notification from another connection of the pool, for
// CheckDelivery (see PgxNotify).
func (s StdlibSource) notify(ctx context.Context, channel, payload string) error {
	conn, err := s.DB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		pc, ok := dc.(pgxConner)
		if !ok { // Session refuses such a pool before it gets here
			return fmt.Errorf("the pool's driver connection is a %T, not pgx's stdlib", dc)
		}
		return PgxNotify(ctx, pc.Conn(), channel, payload)
	})
}

// PgxNotify sends the delivery check's notification from c, a connection
// of the listener's route, and looks at once whether it came back to c
// itself. That happens only behind a transaction-mode pooler that ran the
// notification on the very server connection the listener's LISTEN had
// run on, handing that connection's notification to c: a pooler that
// hands out the server connection freed last, as pgbouncer does by
// default, does it every time, and the check need not wait.
func PgxNotify(ctx context.Context, c *pgx.Conn, channel, payload string) error {
	if _, err := c.Exec(ctx, NotifySQL(channel, payload)); err != nil {
		return err
	}
	done, cancel := context.WithCancel(context.Background())
	cancel() // only what c has already received: no wait, no read
	for {
		n, _ := c.WaitForNotification(done)
		if n == nil {
			return nil
		}
		if n.Channel == channel && n.Payload == payload {
			return ErrPooled("the check's own notification came back to the connection that sent it")
		}
	}
}

// CheckPgx makes sure c, the listening connection, receives what the
// server sends before it LISTENs: at once when the backend key the server
// gave c names the session c runs in (no pooler stands between: a pooler
// gives its clients keys of its own), else by CheckDelivery, with notify
// sending from another connection of c's route.
func CheckPgx(ctx context.Context, c *pgx.Conn, notify func(ctx context.Context, channel, payload string) error) error {
	res, err := c.PgConn().Exec(ctx, "SELECT pg_backend_pid()").ReadAll()
	if err != nil {
		return Unavailable(err)
	}
	if len(res) == 1 && len(res[0].Rows) == 1 && len(res[0].Rows[0]) == 1 &&
		string(res[0].Rows[0][0]) == strconv.FormatUint(uint64(c.PgConn().PID()), 10) {
		return nil
	}
	return CheckDelivery(ctx, PgxDelivery(c, notify))
}

// PgxDelivery is the Delivery of c, the listening connection, with notify
// sending from another connection of its route.
func PgxDelivery(c *pgx.Conn, notify func(ctx context.Context, channel, payload string) error) Delivery {
	return Delivery{
		Listen: func(ctx context.Context, channel string) error {
			_, err := c.PgConn().Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()).ReadAll()
			return err
		},
		Wait: func(ctx context.Context) (string, string, error) {
			n, err := c.WaitForNotification(ctx)
			if err != nil {
				return "", "", err
			}
			return n.Channel, n.Payload, nil
		},
		Notify: notify,
	}
}

// Serve is a session on a *pgx.Conn the caller holds: it LISTENs on every
// channel of l within connectCtx, calls subscribed, then delivers
// notifications until c fails or ctx is canceled. up reports whether it
// got as far as subscribed; a refusal for good (SQLSTATE 0A000) comes back
// wrapping executor.ErrListenUnavailable. The caller closes c.
func Serve(ctx, connectCtx context.Context, c *pgx.Conn, l *Listener, subscribed func()) (up bool, err error) {
	if err := listenAll(connectCtx, c, l.channels); err != nil {
		return false, Unavailable(err)
	}
	subscribed()
	return true, waitLoop(ctx, c, l)
}

// listenAll LISTENs on every channel in one round trip.
func listenAll(ctx context.Context, c *pgx.Conn, channels []string) error {
	var b strings.Builder
	for _, ch := range channels {
		b.WriteString("LISTEN ")
		b.WriteString(pgx.Identifier{ch}.Sanitize())
		b.WriteString(";")
	}
	_, err := c.PgConn().Exec(ctx, b.String()).ReadAll()
	return err
}

// waitLoop delivers notifications from c until it fails or ctx is
// canceled. After l.IdleCheck without one it pings c, so a half-open
// connection is noticed.
func waitLoop(ctx context.Context, c *pgx.Conn, l *Listener) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, l.IdleCheck)
		n, err := c.WaitForNotification(wctx)
		cancel()
		if n != nil {
			l.Deliver(n.Channel, n.Payload)
		}
		if err != nil && ctx.Err() == nil && pgconn.Timeout(err) {
			// Idle, not broken: a timed-out wait leaves the connection
			// usable. Make sure the server is still there.
			pctx, cancel := context.WithTimeout(ctx, l.PingTimeout)
			if err = c.Ping(pctx); err != nil {
				err = fmt.Errorf("idle check ping: %w", err)
			}
			cancel()
		}
		if err != nil {
			return err
		}
	}
}
