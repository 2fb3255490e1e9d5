package pglisten

import (
	"context"
	"fmt"
	"sync"

	"github.com/cairnq/cairnq-go/executor"
)

// Group tracks the running listeners of one executor, so that closing the
// executor stops them all. The zero value is an open, empty group; it is
// safe for concurrent use.
type Group struct {
	mu     sync.Mutex
	closed bool
	ls     map[*Listener]struct{}
}

// Listen is the whole of an executor's Listen: it validates channels
// (non-empty, at most 63 bytes; duplicates are dropped), asks source for
// the listener's Source and the label that names its goroutine in
// profiles, subscribes within ctx (at most ConnectTimeout per attempt) and
// returns once the first connection LISTENs on every channel. The
// subscription then calls onNotify, from its one goroutine, for each
// notification on channels until stop, which is idempotent and returns once
// the goroutine has exited and released its connection. Close stops every
// subscription.
//
// Every error starts with cfg.LogPrefix and "listen"; one that wraps
// executor.ErrListenUnavailable (from source, or a server answering
// SQLSTATE 0A000) is permanent. Once g is closed, Listen fails with
// executor.ErrListenUnavailable: a closed executor never listens again.
func (g *Group) Listen(ctx context.Context, channels []string, onNotify func(channel, payload string),
	cfg Config, source func(l *Listener) (src Source, label string, err error),
) (stop func(), err error) {
	l, err := NewListener(channels, onNotify, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: listen: %w", cfg.LogPrefix, err)
	}
	if g.isClosed() {
		return nil, errClosed(cfg.LogPrefix)
	}
	src, label, err := source(l)
	if err != nil {
		return nil, fmt.Errorf("%s: listen: %w", cfg.LogPrefix, err)
	}
	l.src = src
	if err := l.start(ctx, label); err != nil {
		return nil, fmt.Errorf("%s: listen: %w", cfg.LogPrefix, err)
	}
	if !g.add(l) {
		return nil, errClosed(cfg.LogPrefix)
	}
	return l.stop, nil
}

// errClosed is Listen's error once the group is closed.
func errClosed(prefix string) error {
	return fmt.Errorf("%s: listen: %w: the executor is closed", prefix, executor.ErrListenUnavailable)
}

// isClosed reports whether Close has been called.
func (g *Group) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// add puts l, already started, in g: Close will stop it, and l's own stop
// takes it out of g again. When g is already closed, add stops l instead
// and returns false.
func (g *Group) add(l *Listener) bool {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		l.stop()
		return false
	}
	if g.ls == nil {
		g.ls = map[*Listener]struct{}{}
	}
	g.ls[l] = struct{}{}
	l.detach = func() {
		g.mu.Lock()
		delete(g.ls, l)
		g.mu.Unlock()
	}
	g.mu.Unlock()
	return true
}

// Close closes g, so that later calls to Listen fail, and stops every
// subscription still running. It returns once they have all stopped and is
// idempotent.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	ls := make([]*Listener, 0, len(g.ls))
	for l := range g.ls {
		ls = append(ls, l)
	}
	g.mu.Unlock()
	for _, l := range ls {
		l.stop()
	}
}
