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
	"sync/atomic"
	"time"

	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"

	"github.com/cairnq/cairnq-go/executor"
)

// pingInterval is how often an idle listener pings its connection, as
// lib/pq advises: a connection whose server vanished without closing it is
// otherwise noticed only when TCP keepalive gives up, minutes later.
const pingInterval = time.Minute

// closeGrace is how long stop lets the pq.Listener close on its own before
// cutting its connections.
const closeGrace = 100 * time.Millisecond

// Listen subscribes to channels on a pq.Listener, a connection of its own
// dialed from the executor's DSN, and calls onNotify, on one goroutine, for
// every notification on them until stop is called. It returns once the
// server has acknowledged every LISTEN; ctx bounds that wait, not the
// subscription.
//
// When the connection drops, the listener reconnects with backoff (see
// [Options.MinReconnectInterval]), subscribes again, and then calls
// [Options.OnReconnect]; notifications sent in between are lost.
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
	if onNotify == nil {
		return nil, errors.New("cairnq: listen: onNotify is nil")
	}
	if e.dsn == "" {
		return nil, fmt.Errorf("%w: lib/pq's listener dials from a DSN, and none was given to New", executor.ErrListenUnavailable)
	}
	cfg, err := pq.NewConfig(e.dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: the DSN does not parse: %w", executor.ErrListenUnavailable, err)
	}
	dsn, err := listenDSN(e.dsn, cfg.ConnectTimeout, e.opts.ConnectTimeout)
	if err != nil {
		return nil, fmt.Errorf("%w: the DSN does not parse: %w", executor.ErrListenUnavailable, err)
	}
	if len(channels) == 0 {
		return func() {}, nil
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("%w: the executor is closed", executor.ErrListenUnavailable)
	}

	s := newSubscription(dsn, channels, onNotify, e.opts)
	if err := s.subscribe(ctx); err != nil {
		s.stop()
		return nil, err
	}

	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		s.stop()
		return nil, fmt.Errorf("%w: the executor is closed", executor.ErrListenUnavailable)
	}
	if e.listeners == nil {
		e.listeners = make(map[*subscription]struct{})
	}
	e.listeners[s] = struct{}{}
	e.mu.Unlock()

	return func() {
		s.stop()
		e.mu.Lock()
		delete(e.listeners, s)
		e.mu.Unlock()
	}, nil
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

// subscription is one Listen call: a pq.Listener and the goroutine that
// reads it.
type subscription struct {
	listener    *pq.Listener
	dialer      *stopDialer
	channels    []string
	wanted      map[string]struct{}
	onNotify    func(channel, payload string)
	onReconnect func()

	// connected is closed when the first connection is up.
	connected     chan struct{}
	connectedOnce sync.Once
	// firstFailure receives the error of a connection attempt that failed
	// before the subscription was acknowledged (buffered, first one only).
	firstFailure chan error
	stopping     atomic.Bool
	stopOnce     sync.Once
	quit         chan struct{}  // closed by stop, ends keepalive
	done         chan struct{}  // closed when read returns
	pinger       sync.WaitGroup // keepalive
}

func newSubscription(dsn string, channels []string, onNotify func(string, string), o Options) *subscription {
	s := &subscription{
		dialer:       newStopDialer(),
		channels:     channels,
		wanted:       make(map[string]struct{}, len(channels)),
		onNotify:     onNotify,
		onReconnect:  o.OnReconnect,
		connected:    make(chan struct{}),
		firstFailure: make(chan error, 1),
		quit:         make(chan struct{}),
		done:         make(chan struct{}),
	}
	for _, c := range channels {
		s.wanted[c] = struct{}{}
	}
	s.listener = pq.NewDialListener(s.dialer, dsn, o.MinReconnectInterval, o.MaxReconnectInterval, s.event)
	go s.read()
	s.pinger.Go(s.keepalive)
	return s
}

// event is the pq.Listener's event callback (called on its goroutine).
func (s *subscription) event(ev pq.ListenerEventType, err error) {
	switch ev {
	case pq.ListenerEventConnected:
		s.connectedOnce.Do(func() { close(s.connected) })
	case pq.ListenerEventConnectionAttemptFailed:
		if err != nil {
			select {
			case s.firstFailure <- err:
			default:
			}
		}
	}
}

// subscribe waits for the first connection, then issues LISTEN for every
// channel and waits for the server's answers; a failed connection attempt
// or the end of ctx ends the wait. Waiting for the connection first means
// the LISTEN statements run on it directly, so a refusal comes back as
// their answer rather than as a failed reconnection.
func (s *subscription) subscribe(ctx context.Context) error {
	select {
	case <-s.connected:
	case err := <-s.firstFailure:
		s.stop()
		return fmt.Errorf("cairnq: listen: %w", err)
	case <-ctx.Done():
		s.stop()
		return fmt.Errorf("cairnq: listen: %w", ctx.Err())
	}
	result := make(chan error, 1)
	go func() {
		for _, c := range s.channels {
			if err := s.listener.Listen(c); err != nil && !errors.Is(err, pq.ErrChannelAlreadyOpen) {
				result <- err
				return
			}
		}
		result <- nil
	}()
	var err error
	answered := false
	select {
	case err = <-result:
		answered = true
	case err = <-s.firstFailure:
		// A later attempt may have succeeded meanwhile; the answer to the
		// LISTEN statements, when there is one, is what counts.
		select {
		case err2 := <-result:
			answered, err = true, err2
		default:
		}
	case <-ctx.Done():
		err = ctx.Err()
	}
	if answered && err == nil {
		return nil
	}
	// Unblock the LISTEN goroutine (a dial or a reply it waits for) and wait
	// for it, so that nothing outlives the failed call.
	s.stop()
	if !answered {
		<-result
	}
	if refused(err) {
		return fmt.Errorf("%w: the server refused it: %w", executor.ErrListenUnavailable, err)
	}
	return fmt.Errorf("cairnq: listen: %w", err)
}

// read delivers notifications until the pq.Listener closes its channel,
// which it does once its own goroutine is done. It never blocks on anything
// but the channel: a listener whose notifications are not drained stops
// reading its connection, answers included.
func (s *subscription) read() {
	defer close(s.done)
	for n := range s.listener.Notify {
		if s.stopping.Load() {
			continue // drain, so the listener's goroutine can finish
		}
		if n == nil {
			// pq's sign of a reconnection, sent after it listened again.
			if s.onReconnect != nil {
				s.onReconnect()
			}
			continue
		}
		if _, ok := s.wanted[n.Channel]; ok {
			s.onNotify(n.Channel, n.Extra)
		}
	}
}

// keepalive pings the listener's connection every pingInterval until stop.
// It has a goroutine of its own because a ping waits for the server's
// answer, which arrives only while read keeps draining notifications.
func (s *subscription) keepalive() {
	t := time.NewTicker(pingInterval)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			// A failed ping makes the listener drop the connection and
			// reconnect; there is nothing else to do with its error.
			_ = s.listener.Ping()
		}
	}
}

// stop shuts the subscription down and waits for its goroutines.
//
// Closing the pq.Listener first lets it end without trying to reconnect.
// But Close needs the lock the listener holds while it waits on the network
// (dialing, logging in, or waiting for a LISTEN's answer), which a server
// that stopped answering can make last for minutes; so when Close does not
// return within closeGrace, the dialer cuts the listener's connections,
// which ends that wait.
func (s *subscription) stop() {
	s.stopOnce.Do(func() {
		s.stopping.Store(true)
		close(s.quit)
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			_ = s.listener.Close()
		}()
		grace := time.NewTimer(closeGrace)
		select {
		case <-closed:
		case <-grace.C:
			s.dialer.stop()
			<-closed
		}
		grace.Stop()
		s.dialer.stop()
	})
	s.pinger.Wait()
	<-s.done
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
