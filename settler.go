package cairnq

import (
	"cmp"
	"context"
	"errors"
	"sync"

	"github.com/cairnq/cairnq-go/internal/storeaccess"
)

// On Postgres a call whose handler succeeded does not wait for its
// completion to commit: it hands the completion to the worker's settler
// and ends, and the settler writes everything handed to it since its last
// write in one complete_many, then records each outcome on the task's
// context. The context stays live (its lease renewed by the heartbeat)
// until then, and the call's share of the settling bound (settlingCap)
// is released only then, so a database that settles slowly still slows
// the claims.
//
// Waiting cost more than the write: every call parked on its own reply
// and was woken by it, ~60 wake-ups per statement, and a pgx burn-down
// measured client CPU 21-23 -> 16 ms per 1k tasks for this hand-over
// (docs/benchmarks.md). SQLite keeps its own path: there completions
// ride on the loop's next claim (settle_claim.go), and the single writer,
// not the wake-ups, sets the pace.
//
// What the settler does not take settles on the call's own goroutine as
// before: failures, batch calls, results that are not JSON or too large
// to share a write (rideResult), and anything after the settler stopped.
type settler struct {
	w   *Worker
	ctx context.Context // the settlements': Run's handlerCtx

	mu      sync.Mutex
	pending []*pendingCompletion
	stopped bool

	kick chan struct{} // something was handed over (capacity 1)
	quit chan struct{} // closed by stop
	done chan struct{} // closed when run returns
}

// startSettler starts w's settler for one Run; its owner stops it with
// stop once every call has ended.
func (w *Worker) startSettler(ctx context.Context) *settler {
	s := &settler{w: w, ctx: ctx, kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go w.runSettler(s) // a Worker method, so that stacks name the worker
	return s
}

// handOver leaves tc's success, with its handler's result, to the
// settler. It reports false, having taken nothing, when the settler has
// stopped or the result cannot share a write; the caller then settles tc
// itself.
func (s *settler) handOver(tc *TaskContext, result any) bool {
	enc, ok := s.w.rideResult(result)
	if !ok {
		return false
	}
	p := &pendingCompletion{c: storeaccess.Completion{ID: tc.task.ID, WorkerID: s.w.id, Result: enc}, tc: tc}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return false
	}
	tc.startSettling() // done once write has recorded the outcome
	s.pending = append(s.pending, p)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return true
}

// stop has the settler write what is still handed over and end, and
// returns a channel closed once it has. Call it once, when no call can
// hand anything over any more; the settler ends early only when the
// settlements' context ends (Run abandoning its calls).
func (s *settler) stop() <-chan struct{} {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	close(s.quit)
	return s.done
}

// errNoOutcome reports a settlement its write neither settled nor
// refused, which the store's statements never leave.
var errNoOutcome = errors.New("cairnq: the settlement's write gave the task no outcome")

// runSettler writes what calls hand over to s until stop.
func (w *Worker) runSettler(s *settler) {
	defer close(s.done)
	for {
		select {
		case <-s.kick:
		case <-s.quit:
			s.writeAll()
			return
		}
		s.writeAll()
	}
}

// writeAll writes what is handed over until nothing is left, at most
// maxRideBytes of results per statement.
func (s *settler) writeAll() {
	for {
		s.mu.Lock()
		var taken []*pendingCompletion
		taken, s.pending = cutPending(s.pending)
		s.mu.Unlock()
		if len(taken) == 0 {
			return
		}
		s.write(taken)
	}
}

// write settles taken in one statement, retried as a lone settlement
// would be (retrySettle), records each outcome on its context, and
// releases the calls' share of the settling bound.
func (s *settler) write(taken []*pendingCompletion) {
	w := s.w
	cs := completions(taken)
	err := w.retrySettle(s.ctx, func() error { return w.ops.SettleCompletions(s.ctx, cs) })
	for _, p := range taken {
		switch {
		case err != nil:
			w.report(err, PhaseExecute, p.c.ID)
		case !recordOutcome(p.tc, &p.c):
			w.report(cmp.Or(p.c.Err, errNoOutcome), PhaseExecute, p.c.ID)
		}
		p.tc.doneSettling()
	}
	w.mu.Lock()
	for _, p := range taken {
		delete(w.live, p.c.ID)
	}
	w.settling -= len(taken)
	w.mu.Unlock()
	w.signalSlot()
}
