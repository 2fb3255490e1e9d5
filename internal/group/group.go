package group

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Ticket decides the race between a caller giving up on a request and a
// group starting it: whichever moves it from queued first wins. A caller
// that lost must wait for the request's outcome, which is the truth.
type Ticket struct{ state atomic.Int32 }

const (
	queued int32 = iota
	started
	abandoned
)

// Start marks the request started and reports true, or false when its
// caller has abandoned it.
func (t *Ticket) Start() bool { return t.state.CompareAndSwap(queued, started) }

// Abandon marks the request abandoned and reports true, or false when a
// group has already started it.
func (t *Ticket) Abandon() bool { return t.state.CompareAndSwap(queued, abandoned) }

// Grouper runs the requests arriving together as one group: one
// statement, so one round trip (and for a write one commit) for all of
// them. On Postgres a write each would pay both per request and, since
// every commit that notifies holds Postgres's notify lock through its WAL
// flush, take turns committing; status reads group on both backends. A
// lone request is flushed at once, so grouping never adds latency to it;
// requests arriving while a flush is in flight go into the next one. Its
// goroutine is owned by whoever made it (the backend, or the Store for
// status reads) and stopped by Close.
type Grouper[In, Out any] struct {
	reqs      chan *groupReq[In, Out]
	quit      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	ctx       context.Context
	cancel    context.CancelFunc
	// flush runs one group and returns one result per input, in order.
	flush func(ctx context.Context, ins []In) []Result[Out]
	// weigh, when set, is an input's size in bytes of statement
	// arguments; a group stops growing at maxGroupBytes.
	weigh func(In) int
	// closed is the error of a request Close refused or cut short.
	closed error
}

type groupReq[In, Out any] struct {
	ctx   context.Context // the caller's
	in    In
	reply chan Result[Out]
	state Ticket
}

// Result is one request's share of a flush: its value, or the error
// that stopped it.
type Result[Out any] struct {
	Value Out
	Err   error
}

// Bounds of one group: requests, and bytes of arguments when the grouper
// weighs its inputs (a text[] literal is built whole on the client and
// Postgres refuses a value past 1GB).
const (
	MaxRequests = 512
	MaxBytes    = 8 << 20
)

// New starts a Grouper that runs each group with flush, which returns one
// result per input, in order. weigh, when set, is an input's size in bytes
// of statement arguments; a group stops growing at MaxBytes. closed is
// the error of a request the Grouper refuses or cuts short because Close
// was called. The Grouper's goroutine runs until Close.
func New[In, Out any](flush func(ctx context.Context, ins []In) []Result[Out], weigh func(In) int, closed error) *Grouper[In, Out] {
	g := &Grouper[In, Out]{
		closed: closed,
		reqs:   make(chan *groupReq[In, Out], MaxRequests), quit: make(chan struct{}), done: make(chan struct{}),
		flush: flush, weigh: weigh,
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	go g.run()
	return g
}

// Do runs in through the next group. A caller that gives up before its
// group starts is left out of it, so its write never lands. Once started,
// the group's outcome is its outcome, and the caller waits for it; the
// group's statement is canceled when every caller in it has given up, so
// a lone request ends with its caller's context as a statement of its own
// would.
func (g *Grouper[In, Out]) Do(ctx context.Context, in In) (Result[Out], error) {
	if err := ctx.Err(); err != nil {
		return Result[Out]{}, err
	}
	req := &groupReq[In, Out]{ctx: ctx, in: in, reply: make(chan Result[Out], 1)}
	select {
	case g.reqs <- req:
	case <-g.quit:
		return Result[Out]{}, g.closed
	case <-ctx.Done():
		return Result[Out]{}, ctx.Err()
	}
	var res Result[Out]
	select {
	case res = <-req.reply:
	case <-g.done:
		select {
		case res = <-req.reply:
		default:
			return Result[Out]{}, g.closed
		}
	case <-ctx.Done():
		if req.state.Abandon() {
			return Result[Out]{}, ctx.Err()
		}
		res = <-req.reply // already sent to the database: its outcome is the truth
	}
	return res, res.Err
}

// Closing reports whether Close has been called. It is introspection for
// tests.
func (g *Grouper[In, Out]) Closing() bool {
	select {
	case <-g.quit:
		return true
	default:
		return false
	}
}

// Waiting reports how many requests wait for their group to start. It is
// introspection for tests.
func (g *Grouper[In, Out]) Waiting() int { return len(g.reqs) }

func (g *Grouper[In, Out]) run() {
	defer close(g.done)
	batch := make([]*groupReq[In, Out], 0, MaxRequests)
	var weigh func(*groupReq[In, Out]) int
	if g.weigh != nil {
		weigh = func(r *groupReq[In, Out]) int { return g.weigh(r.in) }
	}
	for {
		select {
		case <-g.quit:
			for {
				select {
				case r := <-g.reqs:
					r.reply <- Result[Out]{Err: g.closed}
				default:
					return
				}
			}
		case r := <-g.reqs:
			batch = append(batch[:0], r)
		}
		settleArrivals(g.reqs)
		batch = Gather(g.reqs, batch, MaxRequests, weigh, MaxBytes)
		g.flushLive(batch)
		clear(batch)
	}
}

// settleArrivals yields the processor while requests keep arriving on ch,
// a few times at most, before a group is gathered. The calls of one claim
// tend to finish together, and their settlements, already runnable, then
// join this group instead of waiting for the next one. With nothing else
// runnable a yield returns at once, so a lone request loses nothing.
func settleArrivals[T any](ch chan T) {
	for range 4 {
		n := len(ch)
		runtime.Gosched()
		if len(ch) == n {
			return
		}
	}
}

// flushLive flushes the requests of batch whose callers still wait, under
// a context that ends when all of them have given up.
func (g *Grouper[In, Out]) flushLive(batch []*groupReq[In, Out]) {
	live := batch[:0:0]
	ins := make([]In, 0, len(batch))
	for _, r := range batch {
		if r.state.Start() {
			live = append(live, r)
			ins = append(ins, r.in)
		}
	}
	if len(live) == 0 {
		return
	}
	select {
	case <-g.quit: // closing: quit and this batch were both ready
		for _, r := range live {
			r.reply <- Result[Out]{Err: g.closed}
		}
		return
	default:
	}
	ctx, cancel := context.WithCancel(g.ctx)
	defer cancel()
	// One watch per distinct caller context, weighted by its callers: a
	// worker settles every call under the same context, and a watch each
	// would register and unregister hundreds of callbacks per group.
	waiting := atomic.Int32{}
	waiting.Store(int32(len(live)))
	type watch struct {
		ctx      context.Context
		n        int32
		distinct bool // a context type == cannot compare: never shared
	}
	var watches []watch
next:
	for _, r := range live {
		for i := range watches {
			if !watches[i].distinct && watches[i].ctx == r.ctx {
				watches[i].n++
				continue next
			}
		}
		watches = append(watches, watch{r.ctx, 1, !reflect.TypeOf(r.ctx).Comparable()})
	}
	for _, w := range watches {
		stop := context.AfterFunc(w.ctx, func() {
			if waiting.Add(-w.n) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	results := g.flush(ctx, ins)
	closing := g.ctx.Err() != nil
	for i, r := range live {
		if closing && results[i].Err != nil {
			results[i].Err = fmt.Errorf("%w (%v)", g.closed, results[i].Err)
		}
		r.reply <- results[i]
	}
}

// Close stops the Grouper. A group already sent to the database gets
// closeGrace to finish: canceling it at once would fail callers whose
// own contexts are live for a statement that would have committed. One
// still running then (a server that stopped answering) is canceled, and
// its callers get the closed error.
func (g *Grouper[In, Out]) Close() {
	g.closeOnce.Do(func() {
		close(g.quit)
		t := time.NewTimer(closeGrace)
		defer t.Stop()
		select {
		case <-g.done:
		case <-t.C:
		}
		g.cancel()
		<-g.done
	})
}

// closeGrace is how long close waits for a group in flight.
const closeGrace = 5 * time.Second

// Gather appends to batch whatever ch holds right now, without waiting,
// until batch has max entries or, when weigh is set, its entries weigh
// maxWeight or more (the one that crosses it included): the group commits
// (SQLite's writer, Postgres's groupers) take what queued up during the
// previous commit.
func Gather[T any](ch <-chan T, batch []T, max int, weigh func(T) int, maxWeight int) []T {
	weight := 0
	if weigh != nil {
		for _, v := range batch {
			weight += weigh(v)
		}
	}
	for len(batch) < max && (weigh == nil || weight < maxWeight) {
		select {
		case v := <-ch:
			batch = append(batch, v)
			if weigh != nil {
				weight += weigh(v)
			}
		default:
			return batch
		}
	}
	return batch
}
