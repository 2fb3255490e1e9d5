package cairnqpgx

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairnq/cairnq-go/internal/pglisten"
)

// closeTimeout bounds closing a LISTEN connection: a polite Terminate, then
// the socket closes anyway.
const closeTimeout = 2 * time.Second

// Listen subscribes to channels (exact, case-sensitive names, as pg_notify
// takes them) on a connection of its own and calls onNotify for each
// notification on them, from a single goroutine, until stop is called.
//
// ctx bounds only the initial connection and LISTEN (each attempt at it
// has a bound of its own); the subscription lasts until stop (or
// [Executor.Close]). The connection is acquired from the
// pool and hijacked, so it no longer counts against the pool's size and no
// DSN is parsed again; only when the pool's ConnConfig sets its own
// OnNotification (which would swallow the notifications) is a connection
// dialed from a copy of that config instead, running the pool's
// BeforeConnect and AfterConnect hooks.
//
// After a while without a notification the listener pings its
// connection, and a ping left unanswered counts as a drop, so a half-open
// connection is noticed long before TCP keepalive gives up. When the
// connection drops, Listen reconnects in the background with jittered
// exponential backoff, listens again and then calls Options.OnReconnect.
// Every adapter here shares this timing; the package documentation of
// [executor] gives it. A server answering SQLSTATE 0A000
// (feature_not_supported) is permanent: the initial call returns an error
// wrapping executor.ErrListenUnavailable (and the server's *pgconn.PgError),
// and a reconnecting listener logs it and stops trying.
//
// stop cancels the subscription, closes the connection (which ends every
// LISTEN on it) and returns once the goroutine has exited; it is safe to
// call more than once and from several goroutines, but not from onNotify or
// OnReconnect, which run on the goroutine stop waits for.
func (e *Executor) Listen(ctx context.Context, channels []string, onNotify func(channel, payload string)) (stop func(), err error) {
	cfg := pglisten.Config{
		LogPrefix: "cairnq/pgx", Logger: e.log, OnReconnect: e.onReconnect,
		IdleCheck: e.idleCheck, PingTimeout: e.pingTimeout,
	}
	return e.listeners.Listen(ctx, channels, onNotify, cfg, func(*pglisten.Listener) (pglisten.Source, string, error) {
		return poolSource{e}, "pgx-listener", nil
	})
}

// poolSource gives each LISTEN session a connection of the executor's pool
// that the pool no longer manages.
type poolSource struct{ e *Executor }

// Session implements pglisten.Source.
func (s poolSource) Session(ctx, connectCtx context.Context, l *pglisten.Listener, subscribed func()) (up bool, err error) {
	cctx, cancel := context.WithTimeout(connectCtx, pglisten.ConnectTimeout)
	defer cancel()
	conn, err := s.e.dedicatedConn(cctx)
	if err != nil {
		return false, pglisten.Unavailable(err) // a proxy may refuse at connect
	}
	defer closeConn(conn)
	if err := pglisten.CheckPgx(cctx, conn, s.notify); err != nil {
		return false, err
	}
	return pglisten.Serve(ctx, cctx, conn, l, subscribed)
}

// notify sends a notification from a connection of the pool, for
// pglisten.CheckDelivery.
func (s poolSource) notify(ctx context.Context, channel, payload string) error {
	pc, err := s.e.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer pc.Release()
	return pglisten.PgxNotify(ctx, pc.Conn(), channel, payload)
}

// dedicatedConn returns a connection the pool no longer manages.
func (e *Executor) dedicatedConn(ctx context.Context) (*pgx.Conn, error) {
	cfg := e.pool.Config()
	if cfg.ConnConfig.OnNotification == nil {
		pc, err := e.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		return pc.Hijack(), nil
	}
	cc := cfg.ConnConfig // already a copy
	cc.OnNotification = nil
	if cfg.BeforeConnect != nil {
		if err := cfg.BeforeConnect(ctx, cc); err != nil {
			return nil, err
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, err
	}
	if cfg.AfterConnect != nil {
		if err := cfg.AfterConnect(ctx, conn); err != nil {
			closeConn(conn)
			return nil, err
		}
	}
	return conn, nil
}

// closeConn closes conn, which also ends its LISTENs on the server, and
// returns once pgconn has finished with it. After a dropped connection
// pgconn closes it from a goroutine of its own (cancel request, Terminate,
// drain), started from the listener's goroutine, and Close returns at
// once; waiting for CleanupDone keeps that goroutine from outliving the
// session.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = conn.Close(ctx)
	select {
	case <-conn.PgConn().CleanupDone():
	case <-ctx.Done():
	}
}
