package cairnq

import (
	"cmp"
	"context"
	"errors"
	"sync"

	"github.com/cairnq/cairnq-go/internal/engine"
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
// and was woken by it, one wake-up per call for each statement
// (docs/benchmarks.md has the measurement). SQLite keeps its own path: there completions
// ride on the loop's next claim (settle_claim.go), and the single writer,
// not the wake-ups, sets the pace.
//
// What the settler does not take settles on the call's own goroutine as
// before: failures, batch calls, results that are not JSON or too large
// to share a write (engine.HandOverResult), and anything after the settler stopped.
type settler struct {
	w   *Worker
	ctx context.Context // the settlements': Run's handlerCtx

	pending engine.Pending
	mu      sync.Mutex
	calls   map[*engine.Completion]*TaskContext // whose outcome each records

	kick chan struct{} // something was handed over (capacity 1)
	quit chan struct{} // closed by stop
	done chan struct{} // closed when run returns
}

// startSettler starts w's settler for one Run; its owner stops it with
// stop once every call has ended.
func (w *Worker) startSettler(ctx context.Context) *settler {
	s := &settler{w: w, ctx: ctx, calls: map[*engine.Completion]*TaskContext{},
		kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go w.runSettler(s) // a Worker method, so that stacks name the worker
	return s
}

// handOver leaves tc's success, with its handler's result, to the
// settler. It reports false, having taken nothing, when the settler has
// stopped or the result cannot share a write; the caller then settles tc
// itself.
func (s *settler) handOver(tc *TaskContext, result any) bool {
	enc, ok := engine.HandOverResult(result)
	if !ok {
		return false
	}
	c := &engine.Completion{ID: tc.task.ID, WorkerID: s.w.id, Result: enc}
	tc.startSettling() // done once write has recorded the outcome
	s.mu.Lock()
	s.calls[c] = tc
	s.mu.Unlock()
	if !s.pending.Add(c) {
		s.mu.Lock()
		delete(s.calls, c)
		s.mu.Unlock()
		tc.doneSettling()
		return false
	}
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
			s.pending.Close() // what was handed over before it is written next
			s.writeAll()
			return
		}
		s.writeAll()
	}
}

// writeAll writes what is handed over until nothing is left, at most
// engine.MaxHandOverBytes of results per statement.
func (s *settler) writeAll() {
	for {
		taken := s.pending.Take()
		if len(taken) == 0 {
			return
		}
		s.write(taken)
	}
}

// write settles taken in one statement, retried as a lone settlement
// would be (retrySettle), records each outcome on its context, and
// releases the calls' share of the settling bound.
func (s *settler) write(taken []*engine.Completion) {
	w := s.w
	err := w.retrySettle(s.ctx, func() error {
		w.rowsMu.Lock() // see Worker.rowsMu
		defer w.rowsMu.Unlock()
		return w.claims.SettleCompletions(s.ctx, taken)
	})
	s.mu.Lock()
	tcs := make([]*TaskContext, len(taken))
	for i, c := range taken {
		tcs[i] = s.calls[c]
		delete(s.calls, c)
	}
	s.mu.Unlock()
	for i, c := range taken {
		switch {
		case err != nil:
			w.report(err, PhaseExecute, c.ID)
		case !recordOutcome(tcs[i], c):
			w.report(cmp.Or(c.Err, errNoOutcome), PhaseExecute, c.ID)
		}
		tcs[i].doneSettling()
	}
	w.mu.Lock()
	for _, c := range taken {
		delete(w.live, c.ID)
	}
	w.settling -= len(taken)
	w.mu.Unlock()
	w.signalSlot()
}
