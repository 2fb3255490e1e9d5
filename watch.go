package cairnq

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Signal is why a watch fired: Reason "queued" (with Queue), "done" (with
// TaskID), "changed" (a change no signal names: another process's commit
// to the SQLite file, seen through the watch of its WAL file) or "poll"
// (the timer). It carries no state: re-read the tasks.
type Signal struct {
	Reason string // "queued", "done", "changed" or "poll"
	Queue  string // the queue a task was queued on (queued only)
	TaskID string // the task that finished (done only)
}

// DefaultWatchPoll is how often a watch signals "poll" when nothing else
// happens.
const DefaultWatchPoll = 2 * time.Second

// WatchOptions tunes Watch.
type WatchOptions struct {
	// Queues limits "queued" signals to these queues. Default: every queue.
	// "done" signals name only the task, so they are never filtered.
	Queues []string
	// PollInterval is how often "poll" fires. Default 2s; a shorter one
	// than MinPollInterval is raised to it.
	PollInterval time.Duration
}

// Watch calls fn whenever tasks may have changed: something was queued or
// finished (in this process, or on Postgres anywhere, through LISTEN), or
// the poll timer fired. It is notification-accelerated polling, not an
// event log: treat every signal as "re-read now". fn runs on one goroutine,
// one call at a time. Watch returns a func that stops the watch and waits
// for that goroutine; it also stops when ctx ends.
func (c *Client) Watch(ctx context.Context, opts *WatchOptions, fn func(Signal)) (stop func()) {
	o := WatchOptions{}
	if opts != nil {
		o = *opts
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultWatchPoll
	}
	o.PollInterval = max(o.PollInterval, MinPollInterval)
	if ctx == nil {
		ctx = context.Background() // Watch has no error to return; stop still ends it
	}
	signals, unsubscribe := c.store.Subscribe(ctx)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer unsubscribe()
		t := time.NewTicker(o.PollInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fn(Signal{Reason: "poll"})
			case sig := <-signals:
				if sig.Reason == "queued" && len(o.Queues) > 0 && !slices.Contains(o.Queues, sig.Queue) {
					continue
				}
				fn(Signal(sig))
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}
