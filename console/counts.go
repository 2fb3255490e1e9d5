package console

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// The overview's aggregates (tasks per queue and status, the oldest due
// task per queue, the settled chart, the failing names) read every row
// they count: at a million tasks a count takes a second. No index of
// protocol v1 holds a count, so the overview never waits on one: a
// goroutine of the handler counts in the background and the page shows
// the last count with its age.

// countIdle is how long the counting goroutine outlives the last overview
// request.
const countIdle = time.Minute

// countRest is how many times a count's duration the counter rests before
// the next one: the database spends at most a fifth of one connection
// counting, however often the page asks.
const countRest = 4

// counts is one background count of the overview's aggregates.
type counts struct {
	// At is when the count began, on the store's clock (ConsoleNow).
	At      time.Time
	Took    time.Duration
	Queues  []queueRow
	Settled []engine.ConsoleMinute
	Failing []cairnqtype.FailureCount
	// Names is Queues by name too, and Rates the tasks each queue and
	// name settled in the rateWindow before At: the metrics' counts.
	Names []engine.ConsoleNameCount
	Rates []engine.ConsoleNameCount

	began time.Time // this process's clock, to tell counts apart from requests
}

// same reports whether two counts found the same aggregates.
func (c *counts) same(o *counts) bool {
	return c != nil && o != nil && reflect.DeepEqual(c.Queues, o.Queues) &&
		reflect.DeepEqual(c.Names, o.Names) &&
		reflect.DeepEqual(c.Settled, o.Settled) && reflect.DeepEqual(c.Failing, o.Failing)
}

// counter owns the counting goroutine: started by the first overview
// request, stopped countIdle after the last one, when the Client is closed,
// or by Close. Requests never start a count themselves; they ask the
// goroutine for one and wait at most Options.CountWait.
type counter struct {
	k    *console
	ctx  context.Context // ends with Close
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu       sync.Mutex
	cur      *counts
	err      error     // the last count's error, cleared by a success
	errBegan time.Time // when the failed count began
	took     time.Duration
	running  bool          // the goroutine is alive
	counting bool          // a count is under way
	kick     chan struct{} // a request wants a count; capacity 1
	ended    chan struct{} // closed (and replaced) when a count ends
	changed  chan struct{} // closed (and replaced) when a count found other numbers
	closed   bool
}

func newCounter(k *console) *counter {
	ctx, stop := context.WithCancel(context.Background())
	return &counter{k: k, ctx: ctx, stop: stop, kick: make(chan struct{}, 1),
		ended: make(chan struct{}), changed: make(chan struct{})}
}

// get returns the last count, asking for a new one. It waits up to
// CountWait for a count that began after the request when none exists yet
// or when counts are quick (five of the last count's duration fit in
// CountWait); otherwise it returns at once, with nil when no count has
// ended yet.
func (c *counter) get(ctx context.Context) (*counts, bool, error) {
	asked := time.Now()
	c.mu.Lock()
	if !c.closed && !c.running {
		c.running = true
		c.wg.Add(1)
		go c.loop()
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
	cur, took := c.cur, c.took
	c.mu.Unlock()
	wait := c.k.opts.CountWait
	if wait <= 0 || (cur != nil && 5*took > wait) {
		return cur, c.isCounting(), nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		c.mu.Lock()
		cur, err, errBegan, ended, closed := c.cur, c.err, c.errBegan, c.ended, c.closed
		c.mu.Unlock()
		switch {
		case cur != nil && !cur.began.Before(asked):
			return cur, false, nil
		case err != nil && !errBegan.Before(asked) && cur == nil:
			return nil, false, err
		case closed:
			return cur, false, nil
		}
		select {
		case <-ended:
		case <-timer.C:
			return cur, c.isCounting(), nil
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

func (c *counter) isCounting() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counting
}

// changes returns a channel closed when a count next finds numbers other
// than the last one's.
func (c *counter) changes() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

func (c *counter) loop() {
	defer c.wg.Done()
	idle := time.NewTimer(countIdle)
	defer idle.Stop()
	for {
		idle.Reset(countIdle)
		select {
		case <-c.ctx.Done():
			c.exit()
			return
		case <-idle.C:
			if c.exitIdle() {
				return
			}
			<-c.kick
		case <-c.kick:
		}
		c.mu.Lock()
		c.counting = true
		c.mu.Unlock()
		began := time.Now()
		n, err := c.k.count(c.ctx)
		took := time.Since(began)
		c.mu.Lock()
		c.counting, c.took = false, took
		if err == nil {
			n.began, n.Took = began, took
			if !n.same(c.cur) {
				close(c.changed)
				c.changed = make(chan struct{})
			}
			c.cur, c.err = n, nil
		} else {
			c.err, c.errBegan = err, began
		}
		close(c.ended)
		c.ended = make(chan struct{})
		c.mu.Unlock()
		if err != nil && c.ctx.Err() == nil && !errors.Is(err, cairnq.ErrClosed) {
			c.k.opts.Logger.Error("cairnq console: counting tasks", "err", err)
		}
		if errors.Is(err, cairnq.ErrClosed) { // the Client is closed: nothing more to count
			c.exit()
			return
		}
		rest := time.NewTimer(countRest * took)
		select {
		case <-c.ctx.Done():
			rest.Stop()
			c.exit()
			return
		case <-rest.C:
		}
	}
}

// exitIdle ends the goroutine unless a request asked for a count as the
// idle timer fired (requests ask under the lock, so none is lost).
func (c *counter) exitIdle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.kick) > 0 {
		return false
	}
	c.running = false
	return true
}

func (c *counter) exit() {
	c.mu.Lock()
	c.running = false
	c.mu.Unlock()
}

// close stops the goroutine and waits for it.
func (c *counter) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.stop()
	c.wg.Wait()
}

// count reads the overview's aggregates.
func (k *console) count(ctx context.Context) (*counts, error) {
	now, err := k.st.ConsoleNow(ctx)
	if err != nil {
		return nil, err
	}
	names, err := k.st.ConsoleNameCounts(ctx)
	if err != nil {
		return nil, err
	}
	ages, err := k.st.QueueAges(ctx)
	if err != nil {
		return nil, err
	}
	due := make(map[string]time.Time, len(ages))
	for _, a := range ages {
		due[a.Queue] = a.OldestRunAt
	}
	n := &counts{At: now, Names: names}
	for _, c := range names { // ordered by queue
		if len(n.Queues) == 0 || n.Queues[len(n.Queues)-1].Queue != c.Queue {
			n.Queues = append(n.Queues, queueRow{Queue: c.Queue, OldestDue: due[c.Queue]})
		}
		addCounts(&n.Queues[len(n.Queues)-1].StatusCounts, c.StatusCounts)
	}
	if n.Rates, err = k.st.ConsoleSettledSince(ctx, now.Add(-rateWindow)); err != nil {
		return nil, err
	}
	if n.Settled, err = k.st.ConsoleSettled(ctx, now.Add(-settledWindow), now); err != nil {
		return nil, err
	}
	if n.Failing, err = k.st.RecentFailures(ctx, failingWindow); err != nil {
		return nil, err
	}
	// A failed workflow's record fails because a step did, which is
	// counted under its own name: the record would count it twice.
	n.Failing = slices.DeleteFunc(n.Failing, func(f cairnqtype.FailureCount) bool { return f.Name == cairnq.WorkflowName })
	n.Failing = n.Failing[:min(len(n.Failing), failingShown)]
	return n, nil
}

// addCounts adds b's counts to a's.
func addCounts(a *cairnqtype.StatusCounts, b cairnqtype.StatusCounts) {
	a.Queued += b.Queued
	a.Running += b.Running
	a.Succeeded += b.Succeeded
	a.Failed += b.Failed
	a.Canceled += b.Canceled
}
