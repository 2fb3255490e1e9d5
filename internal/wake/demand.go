package wake

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/executor"
)

// How a store uses a Listener. The package documentation of executor
// states these figures for users; change both together.
const (
	// listenLinger is how long a channel stays listened to after the last
	// subscriber that needed it (an idle worker, a Wait or Call, a Watch)
	// is gone, so that the next one does not pay a new LISTEN connection.
	listenLinger = 30 * time.Second
	// listenRetry is how long subscribers poll without asking for LISTEN
	// again after a Listen call failed with an error other than
	// ErrListenUnavailable (which stops the asking for good): a server
	// that is down is not asked at every wait.
	listenRetry = 5 * time.Second
	// listenSetup bounds a Listen call, whichever Listener: as long as one
	// connection attempt of this repository's adapters may take, so it
	// never cuts the first one short.
	listenSetup = 15 * time.Second
)

// Demand runs LISTEN on one channel only while this process has a
// subscriber that a notification on it could wake (and for listenLinger
// after the last one left). A notification costs the server and the
// listening client work for every row it names: a worker process has no
// use for cairnq_done, one per settled task, and a process that only
// submits has none for either channel.
//
// A subscriber acquires before it reads the database, and Acquire returns
// once LISTEN is in effect, so a change committed after the read is
// always announced to it. If LISTEN cannot be had, or takes longer than
// setupWait to set up, the subscriber polls.
type Demand struct {
	l       executor.Listener
	channel string
	deliver func(payload string)
	log     *slog.Logger
	linger  time.Duration
	pooled  *PoolerWarning // shared by the store's listeners; nil on SQLite

	mu        sync.Mutex
	users     int
	stop      func()         // set while listening
	starting  chan struct{}  // set while a LISTEN is being set up; closed when that ends
	idle      *time.Timer    // stops the listener listenLinger after the last user left
	gen       uint64         // bumped by every acquire, so a stale idle stop does nothing
	armedGen  uint64         // gen when the idle timer was last armed
	failedAt  time.Time      // the last failed LISTEN, for listenRetry
	stopping  sync.WaitGroup // an idle stop in progress, which close waits for
	off       bool           // the executor refuses LISTEN for good, or the store closed
	connected bool           // LISTEN has succeeded once, so later starts log at debug

	setupCtx    context.Context // the LISTEN setups', canceled by close
	cancelSetup context.CancelFunc
	setup       sync.WaitGroup // the LISTEN setup running, which close waits for
}

// NewDemand returns the Demand of channel on l, which hands each
// notification's payload to deliver. pooled, when not nil, is told when l
// refuses LISTEN behind a transaction-mode pooler; a store's listeners
// share one, so that it warns once.
func NewDemand(l executor.Listener, channel string, deliver func(string), log *slog.Logger, pooled *PoolerWarning) *Demand {
	d := &Demand{l: l, channel: channel, deliver: deliver, log: log, linger: listenLinger, pooled: pooled}
	d.setupCtx, d.cancelSetup = context.WithCancel(context.Background())
	return d
}

// SetLinger sets how long the channel stays listened to after the last
// subscriber left (listenLinger unless set). Call it before the first
// Acquire.
func (d *Demand) SetLinger(linger time.Duration) {
	if d != nil {
		d.linger = linger
	}
}

// PoolerWarning says once for a store, at INFO, that its executor's
// connections go through a transaction-mode pooler, whichever listener
// found it: polling then stands in for LISTEN for good. That is how
// cairnq is meant to run there (the README says there is nothing to
// configure), so it is information, not a warning: a WARN on every
// client's start taught operators to ignore cairnq's warnings.
type PoolerWarning struct {
	once sync.Once
	Log  *slog.Logger // where the word goes
}

func (p *PoolerWarning) warn(channel string, err error) {
	p.once.Do(func() {
		p.Log.Info("cairnq: behind a transaction-mode connection pooler "+
			"(pgbouncer with pool_mode=transaction, a hosted pooled endpoint) no notification arrives; "+
			"workers and waiters poll, as expected there", "channel", channel, "err", err)
	})
}

// setupWait bounds how long a subscriber waits for a LISTEN being set up:
// on a connection that takes it the setup is over within milliseconds, but
// an adapter proving a connection behind a pooler waits seconds for a
// notification that never comes, and a subscriber that waited that long
// would wait for nothing. Past it the subscriber polls; the setup goes on.
const setupWait = time.Second

// Acquire registers a subscriber and returns once the channel is listened
// to, or once it is clear that it will not be (ctx ended, LISTEN failed or
// is unavailable, or its setup outlasted setupWait): the subscriber then
// relies on its poll. Every Acquire is paired with one Release. A nil
// Demand does nothing.
func (d *Demand) Acquire(ctx context.Context) {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.users++
	d.gen++
	if d.off || d.stop != nil {
		d.mu.Unlock()
		return
	}
	if d.starting == nil {
		if !d.failedAt.IsZero() && time.Since(d.failedAt) < listenRetry {
			d.mu.Unlock()
			return
		}
		d.starting = make(chan struct{})
		d.setup.Add(1)
		go d.start(d.starting)
	}
	starting := d.starting
	d.mu.Unlock()
	wait := time.NewTimer(setupWait)
	defer wait.Stop()
	select {
	case <-starting:
	case <-ctx.Done():
	case <-wait.C:
	}
}

// start sets LISTEN up, on a goroutine of its own that close waits for,
// and records the outcome; it closes starting when done.
func (d *Demand) start(starting chan struct{}) {
	defer d.setup.Done()
	ctx, cancel := context.WithTimeout(d.setupCtx, listenSetup)
	defer cancel()
	stop, err := d.l.Listen(ctx, []string{d.channel}, func(_, payload string) { d.deliver(payload) })

	d.mu.Lock()
	defer d.mu.Unlock()
	defer close(starting)
	d.starting = nil
	if err == nil && d.off { // closed meanwhile
		d.mu.Unlock()
		stop()
		d.mu.Lock()
		return
	}
	switch {
	case err == nil:
		d.stop = stop
		d.failedAt = time.Time{}
		d.scheduleIdleStop()
		// Listening starts again after every idle linger: only the first
		// time is news.
		level := slog.LevelDebug
		if !d.connected {
			d.connected, level = true, slog.LevelInfo
		}
		d.log.Log(ctx, level, "cairnq: listening for notifications", "channel", d.channel)
	case errors.Is(err, executor.ErrTransactionPooler) && d.pooled != nil:
		d.off = true
		d.pooled.warn(d.channel, err)
	case errors.Is(err, executor.ErrListenUnavailable):
		d.off = true
		d.log.Info("cairnq: notifications unavailable; waiting by polling", "channel", d.channel, "err", err)
	case d.setupCtx.Err() != nil: // closing
	default:
		d.failedAt = time.Now()
		d.log.Warn("cairnq: notifications failed; waiting by polling", "channel", d.channel, "err", err)
	}
}

// Release ends one Acquire.
func (d *Demand) Release() {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.users--
	d.scheduleIdleStop()
	d.mu.Unlock()
}

// scheduleIdleStop arms the linger timer when nobody uses a running
// listener. Called with mu held.
func (d *Demand) scheduleIdleStop() {
	if d.users > 0 || d.stop == nil {
		return
	}
	d.armedGen = d.gen
	if d.idle == nil {
		d.idle = time.AfterFunc(d.linger, d.stopIfIdle)
	} else {
		d.idle.Reset(d.linger)
	}
}

func (d *Demand) stopIfIdle() {
	d.mu.Lock()
	if d.users > 0 || d.gen != d.armedGen || d.stop == nil {
		d.mu.Unlock()
		return
	}
	stop := d.stop
	d.stop = nil
	d.stopping.Add(1)
	d.mu.Unlock()
	defer d.stopping.Done()
	stop()
}

// Listening reports whether LISTEN is in effect now. For tests.
func (d *Demand) Listening() bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stop != nil
}

// Close stops the listener for good and waits for a LISTEN being set up.
func (d *Demand) Close() {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.off = true
	if d.idle != nil {
		d.idle.Stop()
	}
	stop := d.stop
	d.stop = nil
	d.mu.Unlock()
	d.cancelSetup()
	if stop != nil {
		stop()
	}
	d.setup.Wait() // a setup under way sees off and stops what it got
	d.stopping.Wait()
}
