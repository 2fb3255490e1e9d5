package cairnqlibpq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/pglisten"
)

// logPrefix starts the listener's errors and log messages.
const logPrefix = "cairnq/libpq"

// Listen subscribes to channels on a connection of its own, dialed from the
// executor's DSN by a pq.Listener, and calls onNotify, on one goroutine,
// for every notification on them until stop is called. It returns once the
// server has acknowledged every LISTEN; ctx bounds that wait (each attempt
// at it has a bound of its own), not the subscription.
// No channels at all is a subscription to nothing, which stop ends.
//
// The listener runs on the reconnect loop every adapter of this repository
// shares, with the timing the package documentation of [executor] gives.
// After a while without a notification it pings its connection, and a
// ping left unanswered counts as a drop. When the connection drops, the
// listener connects again with backoff ([Options.MinReconnectInterval]
// doubling to [Options.MaxReconnectInterval]), subscribes again, and then
// calls [Options.OnReconnect]; notifications sent in between are lost.
//
// Listen reports [executor.ErrListenUnavailable] (wrapping the cause) when
// LISTEN can never work here: the executor has no DSN or is closed, the DSN
// does not parse, or the server refused the LISTEN statement itself (a hot
// standby, a pooler that rejects it). A failed connection attempt is
// returned as is: it may work later. Making each connection is bounded as
// [Options.ConnectTimeout] says, whatever ctx.
//
// stop closes the connection and returns once the listener's goroutines
// have ended; after it returns onNotify is not called again. It may be
// called more than once, but not from onNotify or OnReconnect. Close stops
// the listeners still running.
func (e *Executor) Listen(ctx context.Context, channels []string, onNotify func(channel, payload string)) (stop func(), err error) {
	if len(channels) == 0 && onNotify != nil {
		if _, err := e.listenDSN(); err != nil {
			return nil, fmt.Errorf("%s: listen: %w", logPrefix, err)
		}
		return func() {}, nil
	}
	return e.listeners.Listen(ctx, channels, onNotify, e.listenCfg, func(*pglisten.Listener) (pglisten.Source, string, error) {
		dsn, err := e.listenDSN()
		if err != nil {
			return nil, "", err
		}
		return pqSource{dsn: dsn, notify: e.notify}, "libpq-listener", nil
	})
}

// notify sends a notification from a connection of the executor's pool.
func (e *Executor) notify(ctx context.Context, channel, payload string) error {
	_, err := e.db.ExecContext(ctx, pglisten.NotifySQL(channel, payload))
	return err
}

// listenDSN is the DSN the listener dials, or why there is none (wrapping
// executor.ErrListenUnavailable).
func (e *Executor) listenDSN() (string, error) {
	if e.dsn == "" {
		return "", fmt.Errorf("%w: lib/pq's listener dials from a DSN, and none was given to New", executor.ErrListenUnavailable)
	}
	cfg, err := pq.NewConfig(e.dsn)
	if err != nil {
		return "", fmt.Errorf("%w: the DSN does not parse: %w", executor.ErrListenUnavailable, err)
	}
	dsn, err := listenDSN(e.dsn, cfg.ConnectTimeout, e.opts.ConnectTimeout)
	if err != nil {
		return "", fmt.Errorf("%w: the DSN does not parse: %w", executor.ErrListenUnavailable, err)
	}
	return dsn, nil
}

// listenDSN returns dsn as lib/pq's listener is to dial it: with
// connect_timeout set to the connect timeout (see [Options.ConnectTimeout])
// in whole seconds, rounded up, unless the DSN's own connect_timeout
// (fromDSN, as parsed) is the one that applies. Without one, lib/pq would
// wait for a silent server forever, and the listener with it.
func listenDSN(dsn string, fromDSN, opt time.Duration) (string, error) {
	if opt <= 0 && fromDSN > 0 {
		return dsn, nil
	}
	d := connectTimeout(opt, fromDSN)
	secs := strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", err
		}
		q := u.Query()
		q.Set("connect_timeout", secs)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	// In keyword/value form the last occurrence of a keyword wins, and a DSN
	// that parses ends between two pairs.
	return dsn + " connect_timeout=" + secs, nil
}

// pqSource serves a pglisten.Listener from lib/pq, dialing from dsn.
//
// lib/pq offers two ways to listen on a connection of its own. Its
// ListenerConn is one connection with no reconnect logic, but it dials with
// the default dialer only, so a dial or a login that hangs could not be cut
// short when the listener stops. So each session is a pq.Listener (which
// takes a dialer) used for one connection: its event callback closes it at
// the first failed attempt or dropped connection, before pq's own loop
// would wait and dial again. pglisten's loop alone decides when to connect
// again, with the same backoff as every other adapter.
type pqSource struct {
	dsn string
	// notify sends a notification from the executor's pool, for the
	// session's delivery check (pglisten.CheckDelivery).
	notify func(ctx context.Context, channel, payload string) error
}

// Session implements pglisten.Source.
func (s pqSource) Session(ctx, connectCtx context.Context, l *pglisten.Listener, subscribed func()) (up bool, err error) {
	cctx, cancel := context.WithTimeout(connectCtx, pglisten.ConnectTimeout)
	defer cancel()
	c := dialListener(s.dsn)
	defer c.close()
	if err := c.waitConnected(cctx); err != nil {
		return false, err
	}
	if err := pglisten.CheckDelivery(cctx, c.delivery(s.notify)); err != nil {
		return false, err
	}
	if err := c.subscribe(cctx, l.Channels(), l.Deliver); err != nil {
		return false, err
	}
	cancel()
	subscribed()
	return true, c.serve(ctx, l)
}

// pqConn is one session's pq.Listener: one connection, never replaced.
type pqConn struct {
	ln     *pq.Listener
	dialer *stopDialer
	ready  chan struct{} // closed once ln is set, for event

	connected chan struct{} // closed when the connection is up
	lost      chan struct{} // closed when it failed or dropped; err says why
	err       error
	lostOnce  sync.Once

	// helpers are the goroutines waiting for the server's answer to a
	// LISTEN or a ping. They hold the pq.Listener's lock meanwhile, and the
	// answer arrives only while Notify is drained, so the session's own
	// goroutine keeps draining it.
	helpers sync.WaitGroup
}

// dialListener starts a pq.Listener on dsn that makes one connection.
func dialListener(dsn string) *pqConn {
	c := &pqConn{
		dialer:    newStopDialer(),
		ready:     make(chan struct{}),
		connected: make(chan struct{}),
		lost:      make(chan struct{}),
	}
	// pq's reconnect intervals are never waited out: event closes the
	// listener before pq's loop would sleep and dial again.
	c.ln = pq.NewDialListener(c.dialer, dsn, 0, 0, c.event)
	close(c.ready)
	return c
}

// event is the pq.Listener's event callback, called on its goroutine
// outside its lock.
func (c *pqConn) event(ev pq.ListenerEventType, err error) {
	switch ev {
	case pq.ListenerEventConnected:
		close(c.connected) // emitted once, for the first connection
	case pq.ListenerEventConnectionAttemptFailed, pq.ListenerEventDisconnected:
		if err == nil {
			err = errors.New("connection lost")
		}
		c.lostOnce.Do(func() {
			c.err = err
			close(c.lost)
		})
		<-c.ready
		_ = c.ln.Close() // so that pq's loop ends instead of reconnecting
	}
}

// waitConnected waits for the connection, so that the LISTEN statements
// after it run on it directly and a refusal comes back as their answer.
func (c *pqConn) waitConnected(ctx context.Context) error {
	select {
	case <-c.connected:
		return nil
	case <-c.lost:
		return pglisten.Unavailable(c.err) // a proxy may refuse at connect
	case <-ctx.Done():
		return ctx.Err()
	}
}

// subscribe issues LISTEN for every channel and waits for the server's
// answers, handing what arrives meanwhile to deliver; a failed connection
// or the end of ctx ends the wait.
func (c *pqConn) subscribe(ctx context.Context, channels []string, deliver func(channel, payload string)) error {
	answer := make(chan error, 1)
	c.helpers.Go(func() {
		for _, ch := range channels {
			if err := c.ln.Listen(ch); err != nil {
				answer <- err
				return
			}
		}
		answer <- nil
	})
	notify := c.ln.Notify
	for {
		select {
		case err := <-answer:
			switch {
			case err == nil:
				return nil
			case refused(err):
				return fmt.Errorf("%w: the server refused it: %w", executor.ErrListenUnavailable, err)
			}
			return c.cause(err)
		case n, ok := <-notify:
			if !ok {
				notify = nil // the answer follows: Listen returns once ln is closed
			} else if n != nil {
				deliver(n.Channel, n.Extra)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// delivery is the pglisten.Delivery of the session's connection.
func (c *pqConn) delivery(notify func(ctx context.Context, channel, payload string) error) pglisten.Delivery {
	return pglisten.Delivery{
		Listen: func(ctx context.Context, channel string) error {
			return c.subscribe(ctx, []string{channel}, func(string, string) {})
		},
		Wait: func(ctx context.Context) (string, string, error) {
			for {
				select {
				case n, ok := <-c.ln.Notify:
					switch {
					case !ok:
						<-c.lost
						return "", "", c.err
					case n != nil:
						return n.Channel, n.Extra, nil
					}
				case <-c.lost:
					return "", "", c.err
				case <-ctx.Done():
					return "", "", ctx.Err()
				}
			}
		},
		Notify: notify,
	}
}

// serve delivers notifications until the connection drops or ctx is
// canceled. After l.IdleCheck without one it pings the connection (from a
// helper, so that notifications keep being drained); no answer within
// l.PingTimeout counts as a drop.
func (c *pqConn) serve(ctx context.Context, l *pglisten.Listener) error {
	timer := time.NewTimer(l.IdleCheck) // the idle check, or the ping's deadline
	defer timer.Stop()
	var ping chan error // set while a ping waits for its answer
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.lost:
			return c.err
		case n, ok := <-c.ln.Notify:
			if !ok { // pq's goroutine ended, which only a lost connection does
				<-c.lost
				return c.err
			}
			if n != nil {
				l.Deliver(n.Channel, n.Extra)
			}
			if ping == nil {
				timer.Reset(l.IdleCheck)
			}
		case <-timer.C:
			if ping != nil {
				return fmt.Errorf("idle check: no answer to a ping within %v", l.PingTimeout)
			}
			answer := make(chan error, 1)
			c.helpers.Go(func() { answer <- c.ln.Ping() })
			ping = answer
			timer.Reset(l.PingTimeout)
		case err := <-ping:
			if err != nil {
				return fmt.Errorf("idle check ping: %w", c.cause(err))
			}
			ping = nil
			timer.Reset(l.IdleCheck)
		}
	}
}

// cause is the error to report for err, an error from ln: the connection's
// own once it was lost (ln then reports only that it is closed).
func (c *pqConn) cause(err error) error {
	select {
	case <-c.lost:
		return c.err
	default:
		return err
	}
}

// close ends the session's connection and returns once pq's goroutines,
// and the session's helpers, have ended.
//
// The dialer cuts every connection it made and every dial in progress,
// which ends any wait on the network (a dial, a login, a LISTEN's or a
// ping's answer). pq's goroutine then sees the connection fail, and event
// closes the listener, so that goroutine ends and closes Notify, which is
// drained meanwhile so that it never blocks. Calling the pq.Listener's
// Close here instead would wait for its lock, which it holds for as long
// as it waits on the network.
func (c *pqConn) close() {
	c.dialer.stop()
	for range c.ln.Notify {
	}
	c.helpers.Wait()
}

// refused reports whether err is the server refusing LISTEN itself, which
// will not change on retry. It decides by SQLSTATE class, passing over the
// classes of errors that end or refuse a connection (connection exception,
// authorization, unknown database, resources, operator intervention such as
// a terminated backend, system errors) or that pass (transaction rollback),
// and over FATAL and PANIC severities (lib/pq reads the severity that a
// server with translated messages localizes, so this check is a backstop).
func refused(err error) bool {
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) || pqErr.Code == "" {
		return false
	}
	if pqErr.Severity == pqerror.SeverityFatal || pqErr.Severity == pqerror.SeverityPanic {
		return false
	}
	switch pqErr.Code.Class() {
	case "08", "28", "3D", "40", "53", "57", "58", "XX":
		return false
	}
	return true
}

// stopDialer dials for a pq.Listener and can abort it: stop cancels the
// dials in progress and closes every connection it made, so that a
// listener waiting on the network (dialing, authenticating, or waiting for
// a LISTEN's reply) returns at once.
type stopDialer struct {
	ctx    context.Context
	cancel context.CancelFunc
	d      net.Dialer

	mu    sync.Mutex
	conns map[*trackedConn]struct{} // nil once stopped
}

func newStopDialer() *stopDialer {
	ctx, cancel := context.WithCancel(context.Background())
	return &stopDialer{ctx: ctx, cancel: cancel, conns: make(map[*trackedConn]struct{})}
}

// Dial implements pq.Dialer.
func (d *stopDialer) Dial(network, address string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, address)
}

// DialTimeout implements pq.Dialer.
func (d *stopDialer) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.DialContext(ctx, network, address)
}

// DialContext implements pq.DialerContext.
func (d *stopDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(d.ctx, cancel)()
	c, err := d.d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conns == nil {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	tc := &trackedConn{Conn: c, d: d}
	d.conns[tc] = struct{}{}
	return tc, nil
}

func (d *stopDialer) stop() {
	d.cancel()
	d.mu.Lock()
	conns := d.conns
	d.conns = nil
	d.mu.Unlock()
	for c := range conns {
		_ = c.Conn.Close()
	}
}

func (d *stopDialer) forget(c *trackedConn) {
	d.mu.Lock()
	delete(d.conns, c)
	d.mu.Unlock()
}

// trackedConn is a connection stopDialer made; it leaves the dialer's set
// when closed.
type trackedConn struct {
	net.Conn
	d *stopDialer
}

func (c *trackedConn) Close() error {
	c.d.forget(c)
	return c.Conn.Close()
}
