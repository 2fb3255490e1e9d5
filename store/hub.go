package store

import (
	"context"
	"sync"
	"time"
)

// hub carries in-process wakeups: a submit wakes this process's idle
// workers, a settlement wakes this process's waiters, without waiting for
// their next poll. Signals carry no state; a woken goroutine re-reads the
// database. A signal nobody waits for is dropped.
type hub struct {
	mu      sync.Mutex
	doneW   map[string][]chan struct{}
	queuedW []queuedWaiter
}

type queuedWaiter struct {
	queues []string
	ch     chan struct{}
}

func newHub() *hub { return &hub{doneW: map[string][]chan struct{}{}} }

func (h *hub) done(id string) {
	h.mu.Lock()
	ws := h.doneW[id]
	delete(h.doneW, id)
	h.mu.Unlock()
	for _, ch := range ws {
		close(ch)
	}
}

func (h *hub) queued(queue string) {
	h.mu.Lock()
	var wake []chan struct{}
	keep := h.queuedW[:0]
	for _, w := range h.queuedW {
		if contains(w.queues, queue) {
			wake = append(wake, w.ch)
		} else {
			keep = append(keep, w)
		}
	}
	clear(h.queuedW[len(keep):])
	h.queuedW = keep
	h.mu.Unlock()
	for _, ch := range wake {
		close(ch)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (h *hub) waitDone(ctx context.Context, id string, d time.Duration) {
	ch := make(chan struct{})
	h.mu.Lock()
	h.doneW[id] = append(h.doneW[id], ch)
	h.mu.Unlock()
	if !sleep(ctx, ch, d) {
		h.mu.Lock()
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
		h.mu.Unlock()
	}
}

func (h *hub) waitQueued(ctx context.Context, queues []string, d time.Duration) {
	ch := make(chan struct{})
	h.mu.Lock()
	h.queuedW = append(h.queuedW, queuedWaiter{queues: queues, ch: ch})
	h.mu.Unlock()
	if !sleep(ctx, ch, d) {
		h.mu.Lock()
		for i, w := range h.queuedW {
			if w.ch == ch {
				h.queuedW = append(h.queuedW[:i], h.queuedW[i+1:]...)
				break
			}
		}
		h.mu.Unlock()
	}
}

// sleep waits for ch, d or ctx, and reports whether ch fired.
func sleep(ctx context.Context, ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	// The signal may have raced the timer; either way it was consumed.
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// DoneWaiters reports how many goroutines of this process are parked in
// WaitDone. It is introspection for tests and diagnostics.
func (s *Store) DoneWaiters() int {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	n := 0
	for _, ws := range s.hub.doneW {
		n += len(ws)
	}
	return n
}
