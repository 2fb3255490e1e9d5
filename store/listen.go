package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/executor"
)

// The notification channels the 0003 trigger emits on.
const (
	channelQueued = "cairnq_queued" // payload: the queue
	channelDone   = "cairnq_done"   // payload: the task id
)

// The timings are executor's, where every adapter's documentation cites
// them.
const (
	listenLinger = executor.ListenLinger
	listenRetry  = executor.ListenRetryPause
)

// demandListener runs LISTEN on one channel only while this process has a
// subscriber that a notification on it could wake (and for listenLinger
// after the last one left). A notification costs the server and the
// listening client work for every row it names: a worker process has no
// use for cairnq_done, one per settled task, and a process that only
// submits has none for either channel.
//
// A subscriber acquires before it reads the database, and acquire returns
// once LISTEN is in effect, so a change committed after the read is
// always announced to it. If LISTEN cannot be had the subscriber polls.
type demandListener struct {
	l       executor.Listener
	channel string
	deliver func(payload string)
	log     *slog.Logger
	linger  time.Duration
	check   *deliveryCheck // nil: what the listener reports is trusted

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

	probe       string             // the delivery check's payload while one runs
	probeGot    chan struct{}      // closed when the probe came back
	probeCancel context.CancelFunc // ends the running check, on close
	probing     sync.WaitGroup     // the running check, which close waits for
}

func newDemandListener(l executor.Listener, channel string, deliver func(string), log *slog.Logger, check *deliveryCheck) *demandListener {
	return &demandListener{l: l, channel: channel, deliver: deliver, log: log, linger: listenLinger, check: check}
}

// acquire registers a subscriber and returns once the channel is listened
// to, or once it is clear that it will not be (ctx ended, LISTEN failed or
// is unavailable): the subscriber then relies on its poll. Every acquire
// is paired with one release. A nil demandListener does nothing.
func (d *demandListener) acquire(ctx context.Context) {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.users++
	d.gen++
	for {
		if d.off || d.stop != nil {
			d.mu.Unlock()
			return
		}
		if d.starting == nil {
			break
		}
		starting := d.starting
		d.mu.Unlock()
		select {
		case <-starting:
		case <-ctx.Done():
			return
		}
		d.mu.Lock()
	}
	if d.check.failed() {
		d.off = true
		d.mu.Unlock()
		return
	}
	if !d.failedAt.IsZero() && time.Since(d.failedAt) < listenRetry {
		d.mu.Unlock()
		return
	}
	starting := make(chan struct{})
	d.starting = starting
	d.mu.Unlock()

	stop, err := d.l.Listen(ctx, []string{d.channel}, d.receive)

	d.mu.Lock()
	if err == nil && d.off { // closed meanwhile: close waits for this stop
		d.mu.Unlock()
		stop()
		d.mu.Lock()
		d.starting = nil
		close(starting)
		d.mu.Unlock()
		return
	}
	d.starting = nil
	close(starting)
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
		d.startCheck()
	case errors.Is(err, executor.ErrTransactionPooler) && d.check != nil:
		d.off = true
		d.check.record(false, d.channel, err)
	case errors.Is(err, executor.ErrListenUnavailable):
		d.off = true
		d.log.Info("cairnq: notifications unavailable; waiting by polling", "channel", d.channel, "err", err)
	case ctx.Err() != nil: // the subscriber gave up; the next one tries again
	default:
		d.failedAt = time.Now()
		d.log.Warn("cairnq: notifications failed; waiting by polling", "channel", d.channel, "err", err)
	}
	d.mu.Unlock()
}

// release ends one acquire.
func (d *demandListener) release() {
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
func (d *demandListener) scheduleIdleStop() {
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

func (d *demandListener) stopIfIdle() {
	d.mu.Lock()
	if d.users > 0 || d.gen != d.armedGen || d.stop == nil {
		d.mu.Unlock()
		return
	}
	stop := d.stop
	d.stop = nil
	// A delivery check cut short by the stop has no answer; the next
	// listener starts another.
	if d.probeCancel != nil {
		d.probeCancel()
		d.probe = ""
	}
	d.stopping.Add(1)
	d.mu.Unlock()
	defer d.stopping.Done()
	stop()
}

// listening reports whether LISTEN is in effect now. For tests.
func (d *demandListener) listening() bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stop != nil
}

// close stops the listener for good and waits for a LISTEN being set up.
func (d *demandListener) close() {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.off = true
	if d.idle != nil {
		d.idle.Stop()
	}
	stop, starting := d.stop, d.starting
	d.stop = nil
	if d.probeCancel != nil {
		d.probeCancel()
	}
	d.mu.Unlock()
	d.probing.Wait()
	if stop != nil {
		stop()
	}
	if starting != nil {
		<-starting // the starter sees off and stops what it got
	}
	d.stopping.Wait()
}

// receive is the listener's onNotify: the delivery check's own
// notification proves delivery and goes no further; every other one is
// the subscribers'.
func (d *demandListener) receive(_, payload string) {
	d.mu.Lock()
	probe, got := d.probe, d.probeGot
	if probe != "" && payload == probe {
		d.probe = ""
		d.mu.Unlock()
		close(got)
		return
	}
	d.mu.Unlock()
	d.deliver(payload)
}

// The delivery check: how long a new LISTEN waits for a notification of
// its own before it is known not to receive any, and how often that
// notification is sent meanwhile. A direct connection receives it within
// milliseconds; waiting long costs nothing, since subscribers poll
// throughout.
const (
	deliveryTimeout = 10 * time.Second
	deliveryResend  = time.Second
)

// deliveryCheck is what a store knows of whether its LISTEN connections
// receive notifications at all. LISTEN through a transaction-mode pooler
// (pgbouncer, or a hosted "pooled" endpoint) is accepted and never
// delivers anything: the pooler runs it on whichever server connection
// is free, and hands that connection to other clients once the statement
// ends. So a listener is trusted only once a notification it did not send
// itself, sent through the store's executor like every task's, has come
// back to it. Until then, and for good if none does, subscribers poll as
// they always can.
type deliveryCheck struct {
	notify func(ctx context.Context, channel, payload string) error
	log    *slog.Logger

	mu     sync.Mutex
	proven bool // a notification came back
	dead   bool // none did: LISTEN is off for the store
}

// failed reports whether LISTEN was found not to deliver. A nil check
// never fails.
func (c *deliveryCheck) failed() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// settled reports whether the check has its answer.
func (c *deliveryCheck) settled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proven || c.dead
}

// record sets the check's answer: delivered, or not, and then why (nil:
// the check's own notification never came back). Only the first answer
// counts, and only a first "not delivered" is logged, once for the store
// whichever channel found it.
func (c *deliveryCheck) record(delivered bool, channel string, why error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proven || c.dead {
		return
	}
	if delivered {
		c.proven = true
		c.log.Debug("cairnq: LISTEN receives notifications", "channel", channel)
		return
	}
	c.dead = true
	if why != nil {
		c.log.Warn("cairnq: no LISTEN: the connection goes through a transaction-mode connection pooler "+
			"(pgbouncer with pool_mode=transaction, a hosted pooled endpoint), where notifications never arrive; "+
			"workers and waiters poll instead", "channel", channel, "err", why)
		return
	}
	c.log.Warn("cairnq: LISTEN was accepted but no notification arrives (a transaction-mode connection pooler "+
		"in front of Postgres?); workers and waiters poll instead", "channel", channel, "waited", deliveryTimeout)
}

// startCheck starts the delivery check on the listener that has just
// begun, unless the store's check has its answer. Called with mu held.
func (d *demandListener) startCheck() {
	if d.check == nil || d.check.settled() || d.probe != "" {
		return
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	d.probe = "cairnq-delivery-check:" + hex.EncodeToString(b[:])
	d.probeGot = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	d.probeCancel = cancel
	d.probing.Add(1)
	go d.runCheck(ctx, d.probe, d.probeGot)
}

// runCheck sends probe on the channel until it comes back or
// deliveryTimeout passes, and records the outcome; on none it turns the
// listener off.
func (d *demandListener) runCheck(ctx context.Context, probe string, got <-chan struct{}) {
	defer d.probing.Done()
	timeout := time.NewTimer(deliveryTimeout)
	defer timeout.Stop()
	resend := time.NewTicker(deliveryResend)
	defer resend.Stop()
	for {
		// A failed send is tried again at the next tick; should every
		// send fail, no notification comes back, which is the answer.
		sctx, cancel := context.WithTimeout(ctx, deliveryResend)
		_ = d.check.notify(sctx, d.channel, probe)
		cancel()
		select {
		case <-got:
			d.check.record(true, d.channel, nil)
			return
		case <-ctx.Done():
			return
		case <-timeout.C:
			d.check.record(false, d.channel, nil)
			d.turnOff()
			return
		case <-resend.C:
		}
	}
}

// turnOff stops the listener for good, its subscribers left to poll.
func (d *demandListener) turnOff() {
	d.mu.Lock()
	d.off = true
	d.probe = ""
	if d.idle != nil {
		d.idle.Stop()
	}
	stop := d.stop
	d.stop = nil
	d.mu.Unlock()
	if stop != nil {
		stop()
	}
}
