package engine

import (
	"context"
	"sync"
)

// hub carries in-process wakeups: a submit wakes this process's idle
// workers, a settlement wakes this process's waiters, without waiting for
// their next poll. Signals carry no state; a woken goroutine re-reads the
// database. A signal nobody is subscribed to is dropped, so a subscriber
// subscribes before it reads, and a change landing between its read and
// its wait still wakes it.
type hub struct {
	mu       sync.Mutex
	doneW    map[string][]chan struct{}
	queuedW  map[chan struct{}][]string
	watchers map[*watcher]struct{}
}

// watcher is a persistent subscription: every signal goes to its channel,
// dropped when the channel is full (a watcher re-reads on any signal, so
// pending signals stand for any number of them).
type watcher struct {
	ch chan Signal
}

// Signal says why a watch fired. It carries no state: the row is the truth.
type Signal struct {
	Reason string // "queued", "done" or "poll"
	Queue  string // the queue a task was queued on (queued only)
	TaskID string // the task that finished (done only)
}

func (h *hub) broadcast(sig Signal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers {
		select {
		case w.ch <- sig:
		default:
		}
	}
}

func newHub() *hub {
	return &hub{doneW: map[string][]chan struct{}{}, queuedW: map[chan struct{}][]string{}, watchers: map[*watcher]struct{}{}}
}

func (h *hub) done(id string) {
	h.broadcast(Signal{Reason: "done", TaskID: id})
	h.mu.Lock()
	ws := h.doneW[id]
	delete(h.doneW, id)
	h.mu.Unlock()
	for _, ch := range ws {
		close(ch)
	}
}

func (h *hub) queued(queue string) {
	h.broadcast(Signal{Reason: "queued", Queue: queue})
	h.mu.Lock()
	var wake []chan struct{}
	for ch, queues := range h.queuedW {
		for _, q := range queues {
			if q == queue {
				wake = append(wake, ch)
				delete(h.queuedW, ch)
				break
			}
		}
	}
	h.mu.Unlock()
	for _, ch := range wake {
		close(ch)
	}
}

// subscribeDone returns a channel closed when the task with id may have
// reached a terminal status (settled by this process, or on Postgres by
// any, through LISTEN), and a func that unsubscribes. It is a wakeup, not
// a promise: callers re-read the task either way, and subscribe before
// they read. On Postgres the first subscriber may wait for LISTEN to be
// set up, bounded by ctx. Calling the unsubscribe func again does nothing,
// here and in subscribeQueued and subscribe.
func (s *Store) SubscribeDone(ctx context.Context, id string) (<-chan struct{}, func()) {
	h := s.hub
	ch := make(chan struct{})
	h.mu.Lock()
	h.doneW[id] = append(h.doneW[id], ch)
	h.mu.Unlock()
	s.doneListen.acquire(ctx)
	return ch, sync.OnceFunc(func() {
		defer s.doneListen.release()
		h.mu.Lock()
		defer h.mu.Unlock()
		ws := h.doneW[id]
		for i, w := range ws {
			if w == ch {
				ws = append(ws[:i], ws[i+1:]...)
				break
			}
		}
		if len(ws) == 0 {
			delete(h.doneW, id)
		} else {
			h.doneW[id] = ws
		}
	})
}

// subscribeQueued returns a channel closed when a task may have become
// claimable on one of queues (a submit or a requeue, in this process or on
// Postgres in any), and a func that unsubscribes. Like subscribeDone, it
// may wait for LISTEN to be set up.
func (s *Store) SubscribeQueued(ctx context.Context, queues []string) (<-chan struct{}, func()) {
	h := s.hub
	ch := make(chan struct{})
	h.mu.Lock()
	h.queuedW[ch] = queues
	h.mu.Unlock()
	s.queuedListen.acquire(ctx)
	return ch, sync.OnceFunc(func() {
		h.mu.Lock()
		delete(h.queuedW, ch)
		h.mu.Unlock()
		s.queuedListen.release()
	})
}

// doneWaiters reports how many subscriptions wait on a task's settlement
// in this process. It is introspection for tests and diagnostics.
func (s *Store) DoneWaiters() int {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	n := 0
	for _, ws := range s.hub.doneW {
		n += len(ws)
	}
	return n
}

// subscribe returns a channel receiving every queued and done signal of
// this process (from its own writes, and on Postgres from LISTEN), and a
// func that unsubscribes. The channel buffers a few signals; more arriving
// while it is full are dropped, since any signal means "re-read".
func (s *Store) Subscribe(ctx context.Context) (<-chan Signal, func()) {
	w := &watcher{ch: make(chan Signal, 16)}
	s.hub.mu.Lock()
	s.hub.watchers[w] = struct{}{}
	s.hub.mu.Unlock()
	s.queuedListen.acquire(ctx)
	s.doneListen.acquire(ctx)
	return w.ch, sync.OnceFunc(func() {
		s.hub.mu.Lock()
		delete(s.hub.watchers, w)
		s.hub.mu.Unlock()
		s.queuedListen.release()
		s.doneListen.release()
	})
}
