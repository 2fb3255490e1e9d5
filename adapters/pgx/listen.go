package cairnqpgx

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairnq/cairnq-go/executor"
)

// Reconnection of a dropped LISTEN connection: the wait before each attempt
// starts at backoffMin and doubles up to backoffMax, each wait drawn from
// [d/2, d). A connection that stayed up for stableAfter resets the wait, so
// a server that accepts and drops at once is not hammered.
const (
	backoffMin     = 50 * time.Millisecond
	backoffMax     = 5 * time.Second
	stableAfter    = 2 * backoffMax
	connectTimeout = 15 * time.Second // one connect + LISTEN attempt
	closeTimeout   = 2 * time.Second  // a polite Terminate, then the socket closes anyway
)

// Health of an idle LISTEN connection: after idleCheck without a
// notification the listener pings, and a ping unanswered within pingTimeout
// counts as a dropped connection. TCP keepalive alone would take the better
// part of an hour to notice a half-open connection.
const (
	idleCheck   = 30 * time.Second
	pingTimeout = 10 * time.Second
)

// maxIdentifierLen is Postgres's identifier limit (NAMEDATALEN-1): LISTEN
// would truncate a longer channel name and pg_notify rejects one.
const maxIdentifierLen = 63

// sqlStateFeatureNotSupported is what a server (or a proxy speaking for it)
// answers when LISTEN will never work there.
const sqlStateFeatureNotSupported = "0A000"

// listener is one Listen subscription: its own connection, outside the
// pool's accounting, read by one goroutine.
type listener struct {
	e        *Executor
	channels []string
	wanted   map[string]struct{}
	onNotify func(channel, payload string)

	cancel   context.CancelFunc
	done     chan struct{} // closed when run returns
	stopOnce sync.Once
}

// Listen subscribes to channels (exact, case-sensitive names, as pg_notify
// takes them) on a connection of its own and calls onNotify for each
// notification on them, from a single goroutine, until stop is called.
//
// ctx bounds only the initial connection and LISTEN; the subscription lasts
// until stop (or [Executor.Close]). The connection is acquired from the
// pool and hijacked, so it no longer counts against the pool's size and no
// DSN is parsed again; only when the pool's ConnConfig sets its own
// OnNotification (which would swallow the notifications) is a connection
// dialed from a copy of that config instead, running the pool's
// BeforeConnect and AfterConnect hooks.
//
// After 30s without a notification the listener pings its connection; a
// ping unanswered within 10s counts as a drop, so a half-open connection is
// noticed in under a minute rather than when TCP keepalive gives up.
// When the connection drops, Listen reconnects in the background with
// jittered exponential backoff (50ms doubling to 5s), listens again and
// then calls Options.OnReconnect. A server answering SQLSTATE 0A000
// (feature_not_supported) is permanent: the initial call returns an error
// wrapping executor.ErrListenUnavailable (and the server's *pgconn.PgError),
// and a reconnecting listener logs it and stops trying.
//
// stop cancels the subscription, closes the connection (which ends every
// LISTEN on it) and returns once the goroutine has exited; it is safe to
// call more than once and from several goroutines, but not from onNotify or
// OnReconnect, which run on the goroutine stop waits for.
func (e *Executor) Listen(ctx context.Context, channels []string, onNotify func(channel, payload string)) (stop func(), err error) {
	if onNotify == nil {
		return nil, errors.New("cairnq/pgx: listen: nil onNotify")
	}
	l := &listener{e: e, wanted: map[string]struct{}{}, onNotify: onNotify, done: make(chan struct{})}
	for _, ch := range channels {
		if ch == "" || len(ch) > maxIdentifierLen {
			return nil, fmt.Errorf("cairnq/pgx: listen: channel name %q is empty or longer than %d bytes", ch, maxIdentifierLen)
		}
		if _, dup := l.wanted[ch]; !dup {
			l.wanted[ch] = struct{}{}
			l.channels = append(l.channels, ch)
		}
	}
	if len(l.channels) == 0 {
		return nil, errors.New("cairnq/pgx: listen: no channels")
	}
	if e.isClosed() {
		return nil, errors.New("cairnq/pgx: listen: executor is closed")
	}

	conn, err := l.subscribe(ctx)
	if err != nil {
		if sqlState(err) == sqlStateFeatureNotSupported {
			return nil, fmt.Errorf("cairnq/pgx: listen: %w: %w", executor.ErrListenUnavailable, err)
		}
		return nil, fmt.Errorf("cairnq/pgx: listen: %w", err)
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = cancel
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		cancel()
		closeConn(conn)
		return nil, errors.New("cairnq/pgx: listen: executor is closed")
	}
	e.listeners[l] = struct{}{}
	e.mu.Unlock()

	go func() {
		defer close(l.done)
		// Labeled for profiles (and for the leak test); goroutines pgx
		// starts from this one inherit the labels.
		pprof.Do(runCtx, pprof.Labels("cairnq", "pgx-listener", "cairnq.channels", strings.Join(l.channels, ",")),
			func(ctx context.Context) { l.run(ctx, conn) })
	}()
	return l.stop, nil
}

func (e *Executor) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

func (l *listener) stop() {
	l.stopOnce.Do(func() {
		l.cancel()
		<-l.done
		l.e.mu.Lock()
		delete(l.e.listeners, l)
		l.e.mu.Unlock()
	})
}

// run delivers notifications from conn, replacing it when it drops, until
// ctx is canceled or LISTEN turns out to be unavailable. It always closes
// the connection it holds before returning.
func (l *listener) run(ctx context.Context, conn *pgx.Conn) {
	log := l.e.log
	upSince := time.Now()
	delay := backoffMin
	for {
		wctx, cancel := context.WithTimeout(ctx, l.e.idleCheck)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if n != nil {
			if _, ok := l.wanted[n.Channel]; ok {
				l.onNotify(n.Channel, n.Payload)
			}
		}
		if err != nil && ctx.Err() == nil && pgconn.Timeout(err) {
			// Idle, not broken: a timed-out wait leaves the connection
			// usable. Make sure the server is still there.
			pctx, cancel := context.WithTimeout(ctx, l.e.pingTimeout)
			if err = conn.Ping(pctx); err != nil {
				err = fmt.Errorf("idle check ping: %w", err)
			}
			cancel()
		}
		if err == nil {
			continue
		}
		closeConn(conn)
		if ctx.Err() != nil {
			return
		}
		log.WarnContext(ctx, "cairnq/pgx: LISTEN connection lost; reconnecting", "channels", l.channels, "err", err)
		if time.Since(upSince) >= stableAfter {
			delay = backoffMin
		}
		conn, delay = l.reconnect(ctx, delay)
		if conn == nil {
			return
		}
		upSince = time.Now()
		if hook := l.e.onReconnect; hook != nil {
			hook()
		}
	}
}

// reconnect waits and retries until a new connection listens on every
// channel, and returns it with the next wait to use. It returns a nil
// connection when ctx is canceled or the server refuses LISTEN for good.
func (l *listener) reconnect(ctx context.Context, delay time.Duration) (*pgx.Conn, time.Duration) {
	log := l.e.log
	for attempt := 1; ; attempt++ {
		timer := time.NewTimer(delay/2 + rand.N(delay/2+1))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, delay
		case <-timer.C:
		}
		delay = min(2*delay, backoffMax)
		actx, cancel := context.WithTimeout(ctx, connectTimeout)
		conn, err := l.subscribe(actx)
		cancel()
		switch {
		case err == nil:
			log.InfoContext(ctx, "cairnq/pgx: LISTEN connection restored", "channels", l.channels, "attempts", attempt)
			return conn, delay
		case ctx.Err() != nil:
			return nil, delay
		case sqlState(err) == sqlStateFeatureNotSupported:
			log.ErrorContext(ctx, "cairnq/pgx: LISTEN refused by the server; notifications stop, polling continues",
				"channels", l.channels, "err", fmt.Errorf("%w: %w", executor.ErrListenUnavailable, err))
			return nil, delay
		default:
			log.DebugContext(ctx, "cairnq/pgx: LISTEN reconnect failed", "attempt", attempt, "err", err)
		}
	}
}

// subscribe opens a dedicated connection and LISTENs on every channel in
// one round trip.
func (l *listener) subscribe(ctx context.Context) (*pgx.Conn, error) {
	conn, err := l.e.dedicatedConn(ctx)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, ch := range l.channels {
		b.WriteString("LISTEN ")
		b.WriteString(pgx.Identifier{ch}.Sanitize())
		b.WriteString(";")
	}
	if _, err := conn.PgConn().Exec(ctx, b.String()).ReadAll(); err != nil {
		closeConn(conn)
		return nil, err
	}
	return conn, nil
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
// returns once pgconn has finished with it. A wait interrupted by
// cancellation (stop) makes pgconn close the connection from a goroutine
// of its own (cancel request, Terminate, drain), started from the
// listener's goroutine; Close then returns at once, so waiting for
// CleanupDone is what keeps that goroutine from outliving stop.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = conn.Close(ctx)
	select {
	case <-conn.PgConn().CleanupDone():
	case <-ctx.Done():
	}
}
