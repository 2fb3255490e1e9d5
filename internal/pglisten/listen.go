// Package pglisten is the LISTEN subscription that every Postgres adapter
// shares (pgx, lib/pq, gorm, bun): one reconnect loop, with one timing,
// held here. An adapter's executor keeps a [Group] and implements its
// Listen with [Group.Listen]: each subscription is a [Listener] that keeps
// one connection listening on its channels, replacing it with backoff
// whenever it drops, and checking it after a while without a notification.
// The connections come from a [Source] the adapter picks: [StdlibSource]
// for a database/sql pool whose driver is pgx's stdlib, or one of the
// adapter's own (a session on a *pgx.Conn it holds can be [Serve]; lib/pq's
// and bun pgdriver's listeners are sources in their adapters). A Source
// holds one connection per session and never reconnects by itself:
// deciding when to try again is this package's alone.
package pglisten

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
	"github.com/cairnq/cairnq-go/internal/quietlog"
)

// The listener's timing: how long a connection attempt may take, and the
// defaults of Config. The package documentation of executor states these
// figures for users; change both together.
const (
	// ConnectTimeout bounds one attempt of a [Source]'s session to connect
	// and LISTEN on all its channels, the first one included (whose context
	// may end it sooner).
	ConnectTimeout = 15 * time.Second

	// The defaults of Config.BackoffMin and BackoffMax.
	backoffMin = 50 * time.Millisecond
	backoffMax = 5 * time.Second

	// The defaults of Config.IdleCheck and PingTimeout. TCP keepalive alone
	// would take the better part of an hour to notice a half-open
	// connection.
	idleCheck   = 30 * time.Second
	pingTimeout = 10 * time.Second
)

// initialAttempts bounds the attempts of the first subscription, which
// Group.Listen waits for: a connection the pool handed out may turn out
// stale.
const initialAttempts = 3

// maxIdentifierLen is Postgres's identifier limit (NAMEDATALEN-1): LISTEN
// would truncate a longer channel name and pg_notify rejects one.
const maxIdentifierLen = 63

// sqlStateFeatureNotSupported is what a server (or a proxy speaking for it)
// answers when LISTEN will never work there.
const sqlStateFeatureNotSupported = "0A000"

// Source is where a [Listener] gets its connections.
type Source interface {
	// Session holds one LISTEN connection: it connects within connectCtx
	// (at most ConnectTimeout), LISTENs on every channel of l, calls
	// subscribed, then delivers notifications through l.Deliver until the
	// connection fails or ctx is canceled, checking the connection after
	// l.IdleCheck without one. up reports whether it got as far as
	// subscribed; err is why it ended. An error that wraps
	// executor.ErrListenUnavailable is permanent. A session makes one
	// connection and ends when it fails: when and how often to connect
	// again is the Listener's to decide, however the driver would retry on
	// its own.
	Session(ctx, connectCtx context.Context, l *Listener, subscribed func()) (up bool, err error)
}

// Interrupter is a [Source] whose sessions do not watch their context while
// they wait: stopping a listener calls Interrupt instead.
type Interrupter interface{ Interrupt() }

// Config is what an executor gives each of its listeners.
type Config struct {
	// LogPrefix starts every error and log message, such as "cairnq/gorm".
	LogPrefix string
	// Logger receives the connection events (lost, restored, refused).
	// Nil means quietlog's default.
	Logger *slog.Logger
	// OnReconnect, when set, runs on the listener goroutine each time a
	// dropped connection has been replaced and listens again.
	OnReconnect func()
	// IdleCheck is how long a session waits without a notification before
	// it checks that its connection still answers (a ping, or a
	// notification it sends itself), and PingTimeout how long that check
	// may take before the connection counts as dropped. Zero means
	// idleCheck and pingTimeout.
	IdleCheck, PingTimeout time.Duration
	// BackoffMin is the wait before the first attempt to replace a dropped
	// connection, and BackoffMax caps that wait as it doubles after each
	// failed attempt; each wait is drawn from [d/2, d], and a connection
	// that stayed up for twice BackoffMax starts again from BackoffMin.
	// Zero (or negative) means backoffMin and backoffMax; a BackoffMax
	// below BackoffMin counts as BackoffMin.
	BackoffMin, BackoffMax time.Duration
}

// Listener is one Listen subscription, served by one goroutine. Sources
// read its Config (with the defaults filled in) and its Channels, and hand
// it notifications through Deliver.
type Listener struct {
	Config

	src      Source
	channels []string
	wanted   map[string]struct{}
	onNotify func(channel, payload string)

	cancel   context.CancelFunc
	done     chan struct{} // closed when run returns
	stopOnce sync.Once
	detach   func() // forgets the listener in its Group
}

// NewListener validates channels (non-empty, at most 63 bytes; duplicates
// are dropped) and returns a listener on them with cfg, defaults filled in,
// that is not started. An executor gets its listeners from [Group.Listen];
// NewListener is for a Source's own tests, which call its Session with one.
func NewListener(channels []string, onNotify func(channel, payload string), cfg Config) (*Listener, error) {
	if onNotify == nil {
		return nil, errors.New("nil onNotify")
	}
	cfg.Logger = quietlog.Or(cfg.Logger)
	if cfg.IdleCheck == 0 {
		cfg.IdleCheck = idleCheck
	}
	if cfg.PingTimeout == 0 {
		cfg.PingTimeout = pingTimeout
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = backoffMin
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = backoffMax
	}
	cfg.BackoffMax = max(cfg.BackoffMax, cfg.BackoffMin)
	l := &Listener{Config: cfg, wanted: map[string]struct{}{}, onNotify: onNotify}
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

// Channels returns the channels l listens on, without duplicates, in the
// order given to Group.Listen. The caller must not modify the slice.
func (l *Listener) Channels() []string { return l.channels }

// Deliver hands a notification on a requested channel to onNotify; one on
// any other channel is dropped.
func (l *Listener) Deliver(channel, payload string) {
	if _, ok := l.wanted[channel]; ok {
		l.onNotify(channel, payload)
	}
}

// start subscribes within ctx (at most ConnectTimeout per attempt) and
// returns once the first connection LISTENs on every channel, or with why
// it could not. The subscription then lasts until stop. label names the
// listener goroutine in profiles (pprof label "cairnq").
func (l *Listener) start(ctx context.Context, label string) error {
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
func (l *Listener) stop() {
	l.stopOnce.Do(func() {
		l.cancel()
		if i, ok := l.src.(Interrupter); ok {
			i.Interrupt()
		}
		<-l.done
		if l.detach != nil {
			l.detach()
		}
	})
}

// run subscribes (reporting the outcome on ready), then keeps a connection
// listening, replacing it with backoff whenever it drops, until ctx is
// canceled or LISTEN turns out to be unavailable. This is the one
// reconnect loop of every adapter: the wait before an attempt starts at
// BackoffMin and doubles up to BackoffMax, drawn from [d/2, d]; a
// connection that stayed up for twice BackoffMax resets it, so a server
// that accepts and drops at once is not hammered.
func (l *Listener) run(ctx, firstCtx context.Context, ready chan<- error) {
	var upSince time.Time
	var up bool
	var err error
	for attempt := 1; ; attempt++ {
		up, err = l.src.Session(ctx, firstCtx, l, func() {
			upSince = time.Now()
			ready <- nil
		})
		if up || attempt == initialAttempts || firstCtx.Err() != nil ||
			errors.Is(err, executor.ErrListenUnavailable) || SQLState(err) != "" {
			break
		}
	}
	if !up {
		ready <- err
		return
	}
	delay := l.BackoffMin
	for ctx.Err() == nil {
		l.Logger.WarnContext(ctx, l.LogPrefix+": LISTEN connection lost; reconnecting", "channels", l.channels, "err", err)
		if time.Since(upSince) >= 2*l.BackoffMax {
			delay = l.BackoffMin
		}
		for attempt := 1; ; attempt++ {
			timer := time.NewTimer(delay/2 + rand.N(delay/2+1))
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
			delay = min(2*delay, l.BackoffMax)
			up, err = l.src.Session(ctx, ctx, l, func() {
				upSince = time.Now()
				l.Logger.InfoContext(ctx, l.LogPrefix+": LISTEN connection restored", "channels", l.channels, "attempts", attempt)
				if l.OnReconnect != nil {
					l.OnReconnect()
				}
			})
			if up || ctx.Err() != nil {
				break
			}
			if errors.Is(err, executor.ErrListenUnavailable) {
				l.Logger.InfoContext(ctx, l.LogPrefix+": LISTEN refused; notifications stop, polling continues", "channels", l.channels, "err", err)
				return
			}
			l.Logger.DebugContext(ctx, l.LogPrefix+": LISTEN reconnect failed", "attempt", attempt, "err", err)
		}
	}
}

// Unavailable wraps err in executor.ErrListenUnavailable when it says the
// server refuses LISTEN for good (SQLSTATE 0A000).
func Unavailable(err error) error {
	if SQLState(err) == sqlStateFeatureNotSupported {
		return fmt.Errorf("%w: %w", executor.ErrListenUnavailable, err)
	}
	return err
}

// SQLState is err's SQLSTATE (from a SQLState method anywhere in its
// chain), or "" when it carries none.
func SQLState(err error) string {
	var s interface{ SQLState() string }
	if errors.As(err, &s) {
		return s.SQLState()
	}
	return ""
}
