package conformance

// The LISTEN checks (listen_*): Listen delivers the channels asked for,
// until stop, or reports executor.ErrListenUnavailable.

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/executor"
)

// note is one notification as Listen delivered it.
type note struct{ channel, payload string }

// inbox collects notifications and lets a check wait for one.
type inbox struct {
	mu     sync.Mutex
	notes  []note
	signal chan struct{}
}

func newInbox() *inbox { return &inbox{signal: make(chan struct{}, 1)} }

func (b *inbox) add(channel, payload string) {
	b.mu.Lock()
	b.notes = append(b.notes, note{channel, payload})
	b.mu.Unlock()
	select {
	case b.signal <- struct{}{}:
	default:
	}
}

func (b *inbox) all() []note {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.notes)
}

func (b *inbox) has(n note) bool { return slices.Contains(b.all(), n) }

// await waits for n, calling resend now and then in case it was sent
// before the subscription took effect; it reports whether n arrived.
func (b *inbox) await(ctx context.Context, n note, resend func()) bool {
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for !b.has(n) {
		select {
		case <-b.signal:
		case <-tick.C:
			if resend != nil {
				resend()
			}
		case <-ctx.Done():
			return b.has(n)
		}
	}
	return true
}

// listener returns the executor as a Listener, skipping the check when it
// is none.
func (s *suite) listener(r reporter, e env) executor.Listener {
	r.Helper()
	l, ok := e.ex.(executor.Listener)
	if !ok {
		r.Skipf("%s is not an executor.Listener: with it cairnq polls, which costs latency, never correctness, so there is no LISTEN to certify (for adapter authors: an executor.Listener wakes workers and waiters at once)", s.name)
	}
	return l
}

// listen subscribes, skipping the check when LISTEN is unavailable.
func (s *suite) listen(r reporter, e env, l executor.Listener, b *inbox, channels ...string) func() {
	r.Helper()
	stop, err := l.Listen(e.ctx, channels, b.add)
	if errors.Is(err, executor.ErrListenUnavailable) {
		r.Skipf("Listen reports executor.ErrListenUnavailable on a server that accepts LISTEN, so cairnq polls: %v", err)
	}
	if err != nil {
		r.Fatalf("Listen(%v) failed: %v. Fix: LISTEN on a dedicated connection; return an error wrapping executor.ErrListenUnavailable only where LISTEN can never work", channels, err)
	}
	if stop == nil {
		r.Fatalf("Listen returned a nil stop func. Fix: return a func that unsubscribes")
	}
	return stop
}

// notify sends a notification through the executor.
func notify(r reporter, e env, channel, payload string) {
	r.Helper()
	if _, err := e.ex.Query(e.ctx, "SELECT pg_notify($1, $2)", channel, payload); err != nil {
		r.Fatalf("pg_notify through the executor failed: %v", err)
	}
}

// listenChannels: Listen delivers notifications on the channels asked for,
// payloads intact, and nothing from other channels.
func (s *suite) listenChannels(r reporter) {
	e := s.setup(r)
	l := s.listener(r, e)
	const a, b, other = "cairnq_certify_a", "cairnq_certify_b", "cairnq_certify_other"
	box := newInbox()
	stop := s.listen(r, e, l, box, a, b)
	defer stop()
	warm := note{a, "warm-up"}
	if !box.await(e.ctx, warm, func() { notify(r, e, a, "warm-up") }) {
		r.Fatalf("no notification arrived on %s within %v of NOTIFY. Fix: Listen must call onNotify(channel, payload) for every notification on its channels", a, notifyTimeout)
	}
	payload := `naïve "payload", with commas`
	notify(r, e, other, "not subscribed")
	notify(r, e, a, payload)
	notify(r, e, b, "b")
	end := note{a, "end"}
	notify(r, e, end.channel, end.payload) // notifications arrive in commit order
	if !box.await(e.ctx, end, nil) {
		r.Fatalf("a notification on %s never arrived within %v (got %v). Fix: deliver every notification on the subscribed channels", a, notifyTimeout, box.all())
	}
	got := box.all()
	for _, want := range []note{{a, payload}, {b, "b"}} {
		if !slices.Contains(got, want) {
			r.Errorf("the notification %q on %s never arrived (got %v). Fix: deliver every subscribed channel, with the payload unchanged and the channel named as it was asked for", want.payload, want.channel, got)
		}
	}
	for _, n := range got {
		if n.channel != a && n.channel != b {
			r.Errorf("onNotify got a notification on %q (payload %q), a channel Listen was not asked for. Fix: deliver only the requested channels", n.channel, n.payload)
		}
	}
}

// listenStop: after stop returns, onNotify is not called again.
func (s *suite) listenStop(r reporter) {
	e := s.setup(r)
	l := s.listener(r, e)
	const a = "cairnq_certify_stop"
	stopped, witness := newInbox(), newInbox()
	stop := s.listen(r, e, l, stopped, a)
	stopWitness := s.listen(r, e, l, witness, a)
	defer stopWitness()
	warm := note{a, "warm-up"}
	send := func() { notify(r, e, a, "warm-up") }
	if !stopped.await(e.ctx, warm, send) || !witness.await(e.ctx, warm, send) {
		r.Fatalf("a notification on %s did not reach both of two Listens on it within %v. Fix: let Listen be called more than once (two stores may share an executor), each delivering every notification", a, notifyTimeout)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		stop()
	}()
	select {
	case <-done:
	case <-time.After(notifyTimeout):
		r.Fatalf("stop did not return within %v. Fix: stop must unsubscribe, end the listener's goroutine and return", notifyTimeout)
	}
	after := note{a, "after stop"}
	notify(r, e, after.channel, after.payload)
	if !witness.await(e.ctx, after, nil) {
		r.Fatalf("the other Listen on %s stopped delivering when one was stopped. Fix: stop must end only its own subscription", a)
	}
	if stopped.has(after) {
		r.Errorf("onNotify was called for a notification sent after stop returned. Fix: stop must unsubscribe before it returns, and no call may follow it")
	}
}

// listenUnavailable: Listen works on a server that accepts LISTEN, or
// reports executor.ErrListenUnavailable. A refusing server (a transaction
// pooler) cannot be arranged here.
func (s *suite) listenUnavailable(r reporter) {
	e := s.setup(r)
	l := s.listener(r, e)
	stop, err := l.Listen(e.ctx, []string{"cairnq_certify_unavailable"}, func(string, string) {})
	switch {
	case err == nil:
		stop()
		r.Logf("LISTEN works here. Where the server refuses it (a transaction-mode pooler answers SQLSTATE 0A000), Listen must return an error wrapping executor.ErrListenUnavailable; a normal server cannot refuse, so that part is not exercised")
	case errors.Is(err, executor.ErrListenUnavailable):
		r.Logf("Listen reports executor.ErrListenUnavailable (%v): cairnq will poll", err)
	default:
		r.Errorf("Listen failed with %q, which does not wrap executor.ErrListenUnavailable, on a server that accepts LISTEN. Fix: make LISTEN work here; where it can never work (a transaction-mode pooler, no way to reach a dedicated connection) return fmt.Errorf(\"...: %%w\", executor.ErrListenUnavailable), so the store stops retrying and polls", err)
	}
}
