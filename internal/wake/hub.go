package wake

import (
	"sync"

	"github.com/cairnq/cairnq-go/cairnqtype"
)

// Hub carries in-process wakeups: a submit wakes this process's idle
// workers, a settlement wakes this process's waiters, without waiting for
// their next poll. Signals carry no state; a woken goroutine re-reads the
// database. A signal nobody is subscribed to is dropped, so a subscriber
// subscribes before it reads, and a change landing between its read and
// its wait still wakes it.
type Hub struct {
	mu       sync.Mutex
	doneW    map[string][]chan struct{}
	queuedW  map[chan struct{}][]string
	watchers map[*watcher]struct{}
}

// watcher is a persistent subscription: every signal goes to its channel,
// dropped when the channel is full (a watcher re-reads on any signal, so
// pending signals stand for any number of them).
type watcher struct {
	ch chan cairnqtype.Signal
}

func (h *Hub) broadcast(sig cairnqtype.Signal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers {
		select {
		case w.ch <- sig:
		default:
		}
	}
}

// NewHub returns a Hub nobody is subscribed to.
func NewHub() *Hub {
	return &Hub{doneW: map[string][]chan struct{}{}, queuedW: map[chan struct{}][]string{}, watchers: map[*watcher]struct{}{}}
}

// Done wakes the subscribers waiting on task id and every watcher.
func (h *Hub) Done(id string) {
	h.broadcast(cairnqtype.Signal{Reason: "done", TaskID: id})
	h.mu.Lock()
	ws := h.doneW[id]
	delete(h.doneW, id)
	h.mu.Unlock()
	for _, ch := range ws {
		close(ch)
	}
}

// Queued wakes the subscribers waiting on queue and every watcher.
func (h *Hub) Queued(queue string) {
	h.broadcast(cairnqtype.Signal{Reason: "queued", Queue: queue})
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

// All wakes every subscriber and watcher: something changed that no
// signal names (another process committed to the SQLite file), which
// watchers hear as Reason "changed".
func (h *Hub) All() {
	h.broadcast(cairnqtype.Signal{Reason: "changed"})
	h.mu.Lock()
	queued, done := h.queuedW, h.doneW
	h.queuedW, h.doneW = map[chan struct{}][]string{}, map[string][]chan struct{}{}
	h.mu.Unlock()
	for ch := range queued {
		close(ch)
	}
	for _, ws := range done {
		for _, ch := range ws {
			close(ch)
		}
	}
}

// SubscribeDone returns a channel closed when the task with id may have
// reached a terminal status (Done for it, or All), and a func that
// unsubscribes; calling it again does nothing. It is a wakeup, not a
// promise: callers re-read the task either way, and subscribe before they
// read.
func (h *Hub) SubscribeDone(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	h.mu.Lock()
	h.doneW[id] = append(h.doneW[id], ch)
	h.mu.Unlock()
	return ch, sync.OnceFunc(func() {
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

// SubscribeQueued returns a channel closed when a task may have become
// claimable on one of queues (Queued for one of them, or All), and a func
// that unsubscribes.
func (h *Hub) SubscribeQueued(queues []string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	h.mu.Lock()
	h.queuedW[ch] = queues
	h.mu.Unlock()
	return ch, sync.OnceFunc(func() {
		h.mu.Lock()
		delete(h.queuedW, ch)
		h.mu.Unlock()
	})
}

// Watch returns a channel receiving every signal, and a func that
// unsubscribes. The channel buffers a few signals; more arriving while it
// is full are dropped, since any signal means "re-read".
func (h *Hub) Watch() (<-chan cairnqtype.Signal, func()) {
	w := &watcher{ch: make(chan cairnqtype.Signal, 16)}
	h.mu.Lock()
	h.watchers[w] = struct{}{}
	h.mu.Unlock()
	return w.ch, sync.OnceFunc(func() {
		h.mu.Lock()
		delete(h.watchers, w)
		h.mu.Unlock()
	})
}

// DoneWaiters reports how many subscriptions wait on a task's settlement.
// It is introspection for tests and diagnostics.
func (h *Hub) DoneWaiters() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, ws := range h.doneW {
		n += len(ws)
	}
	return n
}
