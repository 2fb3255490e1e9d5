package cairnqbun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

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
)

// initialAttempts bounds the attempts of the first subscription, which
// Listen waits for: a connection the pool handed out may turn out stale.
const initialAttempts = 3

// Health of an idle LISTEN connection: after idleCheck without a
// notification the listener checks the connection, and no answer within
// pingTimeout counts as a dropped connection. TCP keepalive alone would
// take the better part of an hour to notice a half-open connection.
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

// source is where a listener gets its connections.
type source interface {
	// session holds one LISTEN connection: it connects within connectCtx,
	// LISTENs on every channel of l, calls subscribed, then delivers
	// notifications through l.deliver until the connection fails or ctx is
	// canceled. up reports whether it got as far as subscribed; err is why
	// it ended. An error that wraps executor.ErrListenUnavailable is
	// permanent.
	session(ctx, connectCtx context.Context, l *listener, subscribed func()) (up bool, err error)
}

// interrupter is a source whose sessions do not watch their context while
// they wait: stopping a listener interrupts them instead.
type interrupter interface{ interrupt() }

// listener is one Listen subscription, served by one goroutine.
type listener struct {
	src         source
	channels    []string
	wanted      map[string]struct{}
	onNotify    func(channel, payload string)
	log         *slog.Logger
	onReconnect func()
	idleCheck   time.Duration
	pingTimeout time.Duration

	cancel   context.CancelFunc
	done     chan struct{} // closed when run returns
	stopOnce sync.Once
	detach   func() // forgets the listener in its executor
}

// newListener validates channels (non-empty, at most 63 bytes; duplicates
// are dropped) and returns a listener on them that is not yet started.
func newListener(channels []string, onNotify func(channel, payload string)) (*listener, error) {
	if onNotify == nil {
		return nil, errors.New("nil onNotify")
	}
	l := &listener{wanted: map[string]struct{}{}, onNotify: onNotify}
	for _, ch := range channels {
		if ch == "" || len(ch) > maxIdentifierLen {
			return nil, fmt.Errorf("channel name %q is empty or longer than %d bytes", ch, maxIdentifierLen)
		}
		if _, dup := l.wanted[ch]; !dup {
			l.wanted[ch] = struct{}{}
			l.channels = append(l.channels, ch)
		}
	}
	if len(l.channels) == 0 {
		return nil, errors.New("no channels")
	}
	return l, nil
}

// deliver hands a notification on a requested channel to onNotify.
func (l *listener) deliver(channel, payload string) {
	if _, ok := l.wanted[channel]; ok {
		l.onNotify(channel, payload)
	}
}

// start subscribes within ctx (at most connectTimeout per attempt) and
// returns once the first connection LISTENs on every channel, or with why
// it could not. The subscription then lasts until stop.
func (l *listener) start(ctx context.Context, label string) error {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = cancel
	l.done = make(chan struct{})
	ready := make(chan error, 1)
	go func() {
		defer close(l.done)
		// Labeled for profiles (and for the leak tests); goroutines the
		// driver starts from this one inherit the labels.
		pprof.Do(runCtx, pprof.Labels("cairnq", label, "cairnq.channels", strings.Join(l.channels, ",")),
			func(runCtx context.Context) { l.run(runCtx, ctx, ready) })
	}()
	if err := <-ready; err != nil {
		cancel()
		<-l.done
		return err
	}
	return nil
}

// stop ends the subscription and returns once the goroutine has exited and
// released its connection. It is idempotent.
func (l *listener) stop() {
	l.stopOnce.Do(func() {
		l.cancel()
		if i, ok := l.src.(interrupter); ok {
			i.interrupt()
		}
		<-l.done
		if l.detach != nil {
			l.detach()
		}
	})
}

// run subscribes (reporting the outcome on ready), then keeps a connection
// listening, replacing it with backoff whenever it drops, until ctx is
// canceled or LISTEN turns out to be unavailable.
func (l *listener) run(ctx, firstCtx context.Context, ready chan<- error) {
	var upSince time.Time
	var up bool
	var err error
	for attempt := 1; ; attempt++ {
		up, err = l.src.session(ctx, firstCtx, l, func() {
			upSince = time.Now()
			ready <- nil
		})
		if up || attempt == initialAttempts || firstCtx.Err() != nil ||
			errors.Is(err, executor.ErrListenUnavailable) || sqlState(err) != "" {
			break
		}
	}
	if !up {
		ready <- err
		return
	}
	delay := backoffMin
	for ctx.Err() == nil {
		l.log.WarnContext(ctx, logPrefix+": LISTEN connection lost; reconnecting", "channels", l.channels, "err", err)
		if time.Since(upSince) >= stableAfter {
			delay = backoffMin
		}
		for attempt := 1; ; attempt++ {
			timer := time.NewTimer(delay/2 + rand.N(delay/2+1))
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
			delay = min(2*delay, backoffMax)
			up, err = l.src.session(ctx, ctx, l, func() {
				upSince = time.Now()
				l.log.InfoContext(ctx, logPrefix+": LISTEN connection restored", "channels", l.channels, "attempts", attempt)
				if l.onReconnect != nil {
					l.onReconnect()
				}
			})
			if up || ctx.Err() != nil {
				break
			}
			if errors.Is(err, executor.ErrListenUnavailable) {
				l.log.ErrorContext(ctx, logPrefix+": LISTEN refused; notifications stop, polling continues", "channels", l.channels, "err", err)
				return
			}
			l.log.DebugContext(ctx, logPrefix+": LISTEN reconnect failed", "attempt", attempt, "err", err)
		}
	}
}

// unavailable wraps err in executor.ErrListenUnavailable when it says the
// server refuses LISTEN for good (SQLSTATE 0A000).
func unavailable(err error) error {
	if sqlState(err) == sqlStateFeatureNotSupported {
		return fmt.Errorf("%w: %w", executor.ErrListenUnavailable, err)
	}
	return err
}

// sqlState is err's SQLSTATE, or "" when it carries none.
func sqlState(err error) string {
	var s interface{ SQLState() string }
	if errors.As(err, &s) {
		return s.SQLState()
	}
	return ""
}
