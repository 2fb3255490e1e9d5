package completer

import (
	"cmp"
	"context"
	"sync"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// batch is the form where a plain success does not wait for its write: it
// is handed to the completer's goroutine, which writes everything handed
// to it since its last write in one statement, then tells each caller's
// Recorder. Waiting cost more than the write: every call parked on its own
// reply and was woken by it, one wake-up per call for each statement
// (docs/benchmarks.md has the measurement). On Postgres the grouped
// write runs on a connection of its own, beside the claims.
type batch struct {
	*writer
	noClaims

	pending engine.Pending
	mu      sync.Mutex
	started bool
	ctx     context.Context               // the settlements' (Start's)
	handed  map[*engine.Completion]handed // whose outcome each is

	kick chan struct{} // something was handed over (capacity 1)
	quit chan struct{} // closed by Stop
	done chan struct{} // closed when run returns
}

func newBatch(w *writer) *batch {
	return &batch{writer: w, handed: map[*engine.Completion]handed{},
		kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
}

func (b *batch) Start(ctx context.Context) {
	b.mu.Lock()
	b.ctx, b.started = ctx, true
	b.mu.Unlock()
	go b.run()
}

// Stop has the goroutine write what is still handed over and end. It
// ends early only when the settlements' context ends.
func (b *batch) Stop() <-chan struct{} {
	b.mu.Lock()
	started := b.started
	b.mu.Unlock()
	if !started {
		return closed
	}
	close(b.quit)
	return b.done
}

// handed is a success handed over: its task, and who is told how it
// fared. Small, so that the map holds it in place (a value past 128
// bytes would cost an allocation a task).
type handed struct {
	task *cairnqtype.Task
	r    Recorder
}

// written is the settlement a handed-over success was written as: c's,
// its result as the JSON text it was written with.
func (h handed) written(c *engine.Completion) engine.Settlement {
	return engine.Settlement{Task: h.task, WorkerID: c.WorkerID, Outcome: engine.Succeeded, Result: c.Result}
}

func (b *batch) Settle(ctx context.Context, st engine.Settlement, r Recorder, later bool) bool {
	if later && b.handOver(st, r) {
		return true
	}
	b.settle(ctx, st, r)
	return false
}

// handOver leaves st to the goroutine, reporting false, having taken
// nothing, when it cannot share a write or the goroutine is not running.
func (b *batch) handOver(st engine.Settlement, r Recorder) bool {
	c, ok := groupable(st)
	if !ok {
		return false
	}
	b.mu.Lock()
	if !b.started {
		b.mu.Unlock()
		return false
	}
	b.handed[c] = handed{st.Task, r}
	b.mu.Unlock()
	if !b.pending.Add(c) {
		b.mu.Lock()
		delete(b.handed, c)
		b.mu.Unlock()
		return false
	}
	select {
	case b.kick <- struct{}{}:
	default:
	}
	return true
}

// run writes what is handed over until Stop.
func (b *batch) run() {
	defer close(b.done)
	for {
		select {
		case <-b.kick:
		case <-b.quit:
			b.pending.Close() // what was handed over before it is written next
			b.writeAll()
			return
		}
		b.writeAll()
	}
}

// writeAll writes what is handed over until nothing is left, at most
// engine.MaxHandOverBytes of results per statement.
func (b *batch) writeAll() {
	for {
		taken := b.pending.Take()
		if len(taken) == 0 {
			return
		}
		b.write(taken)
	}
}

// write settles taken in one statement, retried as a lone settlement
// would be, and tells each caller how its success fared.
func (b *batch) write(taken []*engine.Completion) {
	err := b.grouped(b.ctx, taken)
	b.mu.Lock()
	hs := make([]handed, len(taken))
	for i, c := range taken {
		hs[i] = b.handed[c]
		delete(b.handed, c)
	}
	b.mu.Unlock()
	for i, c := range taken {
		if err != nil {
			hs[i].r.Settled(hs[i].written(c), engine.Settled{}, err, true)
			continue
		}
		out, ok, cerr := outcomeOf(c)
		if !ok {
			cerr = cmp.Or(cerr, errNoOutcome)
		}
		hs[i].r.Settled(hs[i].written(c), out, cerr, true)
	}
}
