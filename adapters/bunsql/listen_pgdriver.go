package cairnqbunsql

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/driver/pgdriver"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/pglisten"
	"github.com/cairnq/cairnq-go/internal/pgroute"
)

// probeFirstWait is how long confirming a subscription first waits for the
// probe to come back before sending it again (the wait doubles up to
// probeMaxWait): a probe sent before the server handled the LISTEN is
// never delivered.
const (
	probeFirstWait = 20 * time.Millisecond
	probeMaxWait   = time.Second
)

// pgdriverSource serves a pglisten.Listener from pgdriver.Listeners, each
// dialing a connection of its own from the *bun.DB's connector.
//
// A pgdriver.Listener writes LISTEN without reading the answer, and its
// reads do not watch a context, only deadlines. So a session proves its
// subscription with a probe: a private channel, LISTENed last, notified
// from the pool until the notification comes back, which means every
// LISTEN before it is in place. The same probe is the idle health check.
// To stop, the listener closes the current pgdriver.Listener, which ends a
// blocked read.
type pgdriverSource struct {
	db    *bun.DB
	probe string

	mu      sync.Mutex
	stopped bool
	cur     *pgdriver.Listener
}

// Stopping a listener must interrupt a pgdriverSource's blocked read.
var _ pglisten.Interrupter = (*pgdriverSource)(nil)

// newPgdriverSource checks that pgdriver can LISTEN on every channel: it
// quotes a name with strconv.Quote, which matches SQL's quoting only for
// printable names without " or \.
func newPgdriverSource(db *bun.DB, channels []string) (*pgdriverSource, error) {
	for _, ch := range channels {
		if strconv.Quote(ch) != `"`+ch+`"` {
			return nil, fmt.Errorf("channel name %q: bun's pgdriver cannot quote a name with \", \\ or unprintable characters", ch)
		}
	}
	return &pgdriverSource{db: db, probe: fmt.Sprintf("cairnq_probe_%016x", rand.Uint64())}, nil
}

// Session implements pglisten.Source.
func (s *pgdriverSource) Session(ctx, connectCtx context.Context, l *pglisten.Listener, subscribed func()) (up bool, err error) {
	cctx, cancel := context.WithTimeout(connectCtx, pglisten.ConnectTimeout)
	defer cancel()
	if err := s.checkRoute(cctx); err != nil {
		return false, withSQLState(err)
	}
	ln := s.open()
	if ln == nil {
		return false, errors.New("listener stopped")
	}
	defer s.close(ln)
	if err := ln.Listen(cctx, append(slices.Clone(l.Channels()), s.probe)...); err != nil {
		return false, pglisten.Unavailable(withSQLState(err))
	}
	if err := s.confirm(cctx, ln, l); err != nil {
		return false, pglisten.Unavailable(withSQLState(err))
	}
	cancel()
	subscribed()
	return true, s.receive(ctx, ln, l)
}

// checkRoute makes sure a LISTEN reaches the server session the listener
// keeps, before it LISTENs. pgdriver fails a statement on a notification
// it did not ask for, which is what a LISTEN left behind a
// transaction-mode pooler hands the pool's connections, so pgdriver
// listens only where the pool's connections are proven direct to the
// server (the same TCP connection at both ends). Through anything else,
// a pooler in session mode included, it does not listen and cairnq
// polls.
func (s *pgdriverSource) checkRoute(ctx context.Context) error {
	conn, err := s.db.DB.Conn(ctx)
	if err != nil {
		return err
	}
	var route pgroute.Route
	err = conn.Raw(func(dc any) error {
		pc, ok := dc.(*pgdriver.Conn)
		if !ok {
			return fmt.Errorf("the pool's driver connection is a %T, not pgdriver's", dc)
		}
		var err error
		route, err = pglisten.DriverRoute(ctx, pc, pc.Conn().LocalAddr(), pc.Conn().RemoteAddr())
		return err
	})
	_ = conn.Close()
	switch {
	case err != nil:
		return err
	case !route.KeepsSession():
		return fmt.Errorf("%w: bun's pgdriver fails on notifications it did not ask for, so cairnq listens through it only "+
			"on connections proven direct to the server, and these go %s", executor.ErrListenUnavailable, route)
	}
	// Proven direct: the session's own probe (confirm) then shows the
	// LISTEN in effect, as on any connection.
	return nil
}

// confirm sends the probe until it comes back on ln, delivering what
// arrives meanwhile. An error answering a LISTEN arrives here too.
func (s *pgdriverSource) confirm(ctx context.Context, ln *pgdriver.Listener, l *pglisten.Listener) error {
	for wait := probeFirstWait; ; wait = min(2*wait, probeMaxWait) {
		if err := s.sendProbe(ctx); err != nil {
			return err
		}
		for {
			ch, payload, err := ln.ReceiveTimeout(ctx, wait)
			if err != nil {
				if isTimeout(err) && ctx.Err() == nil {
					break // send again
				}
				return errors.Join(err, ctx.Err())
			}
			if ch == s.probe {
				return nil
			}
			l.Deliver(ch, payload)
		}
	}
}

// receive delivers notifications from ln until it fails or ctx is
// canceled. After l.IdleCheck without one it sends the probe; nothing back
// within l.PingTimeout counts as a drop.
func (s *pgdriverSource) receive(ctx context.Context, ln *pgdriver.Listener, l *pglisten.Listener) error {
	probing := false
	for {
		timeout := l.IdleCheck
		if probing {
			timeout = l.PingTimeout
		}
		ch, payload, err := ln.ReceiveTimeout(ctx, timeout)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil:
			probing = false // anything at all proves the connection
			if ch != s.probe {
				l.Deliver(ch, payload)
			}
		case !isTimeout(err):
			return withSQLState(err)
		case probing:
			return fmt.Errorf("idle check: the probe notification did not come back within %v", l.PingTimeout)
		default:
			pctx, cancel := context.WithTimeout(ctx, l.PingTimeout)
			if err := s.sendProbe(pctx); err != nil {
				l.Logger.DebugContext(ctx, l.LogPrefix+": LISTEN idle check could not send its probe", "err", err)
			}
			cancel()
			probing = true
		}
	}
}

// sendProbe notifies the probe channel from a pooled connection, through
// the *sql.DB so that bun's query hooks do not see it.
func (s *pgdriverSource) sendProbe(ctx context.Context) error {
	_, err := s.db.DB.ExecContext(ctx, "SELECT pg_notify($1, '')", s.probe)
	return err
}

// open makes the session's pgdriver.Listener, or returns nil once stopped.
func (s *pgdriverSource) open() *pgdriver.Listener {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.cur = pgdriver.NewListener(s.db)
	return s.cur
}

// close closes ln, which ends its connection and every LISTEN on it.
func (s *pgdriverSource) close(ln *pgdriver.Listener) {
	s.mu.Lock()
	if s.cur == ln {
		s.cur = nil
	}
	s.mu.Unlock()
	_ = ln.Close() // a second Close only reports that it is closed
}

// Interrupt implements pglisten.Interrupter: it ends the current session's
// blocked read, and any later session before it starts.
func (s *pgdriverSource) Interrupt() {
	s.mu.Lock()
	s.stopped = true
	ln := s.cur
	s.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
}

// isTimeout reports a read that hit its deadline.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
