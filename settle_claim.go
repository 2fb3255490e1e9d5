package cairnq

import (
	"context"
	"errors"

	"github.com/cairnq/cairnq-go/internal/storeaccess"
	"github.com/cairnq/cairnq-go/protocol"
)

// On SQLite a busy worker's completions ride on its next claim: a call
// whose handler succeeded leaves its completion with the claim loop, which
// hands the ones waiting to the claim it makes anyway
// (storeaccess.ClaimHints.Settle), so that a cycle of the worker is one
// request to SQLite's single writer and one commit, where it was a
// request per finished call beside the claim's. The loop never holds a
// completion back: it claims as soon as one arrives (the arrival wakes it
// as a freed slot does), and when it cannot claim (every slot busy, every
// queue paused) it settles them alone. Only while the loop's last claim
// drew several tasks, or left other calls running: a lone call's
// completion goes straight to the writer, as the claim would add its
// statement and two hand-offs to the call's latency. (The calls still
// running count too: after a claim that drew one task, the ~60 calls of
// an earlier draw finishing each settled with a commit of its own, and a
// burn-down lost a few milliseconds whenever one claim came up short.)
//
// Not on Postgres: there the claim is a round trip during which the slots
// it fills stand idle, and the settlements, on a connection of their own
// (the worker's settler, settler.go), run beside it on another core.
// Riding on the claim lengthened that round trip, and the burn-down lost
// 15-20% of its rate for 15% less server CPU per task.

// pendingCompletion is one completion waiting for the loop's next claim,
// or on Postgres for the worker's settler (settler.go).
type pendingCompletion struct {
	c storeaccess.Completion
	// done receives the error of the write that carried c, nil when it ran
	// (c's Status or Err then says how c fared). The loop's only.
	done chan error
	// tc is the settler's: the call ended when it handed c over, and the
	// settler records the outcome on its context.
	tc *TaskContext
}

// Bounds of what rides on one claim: a larger result settles on its own
// (Store.Complete), and a claim carries at most maxRideBytes of results.
const (
	maxRideResultBytes = 64 << 10
	maxRideBytes       = 1 << 20
)

// errRideEnded answers the completions still waiting when the loop ends;
// they settle on their own.
var errRideEnded = errors.New("cairnq: the claim loop ended")

// completeByClaim settles tc's success through the loop's next claim. It
// reports false, having written nothing, when that path is not open (no
// loop runs, the result is large or not JSON) or the write that carried
// it failed: the caller then settles tc on its own, which retries.
func (w *Worker) completeByClaim(tc *TaskContext, result any) bool {
	if !w.rideOpen.Load() {
		return false // before encoding: the caller's path encodes anyway
	}
	enc, ok := w.rideResult(result)
	if !ok {
		return false
	}
	p := &pendingCompletion{
		c:    storeaccess.Completion{ID: tc.task.ID, WorkerID: w.id, Result: enc},
		done: make(chan error, 1),
	}
	w.mu.Lock()
	if !w.riding { // the loop has ended since
		w.mu.Unlock()
		return false
	}
	tc.startSettling()
	defer tc.doneSettling()
	w.pending = append(w.pending, p)
	w.mu.Unlock()
	w.signalSlot()
	// The loop answers every completion it accepted, at the latest when it
	// ends (rideEnd).
	if err := <-p.done; err != nil {
		return false
	}
	return recordOutcome(tc, &p.c) // if not, on its own, then
}

// recordOutcome marks tc by what the write that carried c made of it:
// settled, or its lease gone. It reports false when c got neither, which
// leaves tc for its caller to settle or report.
func recordOutcome(tc *TaskContext, c *storeaccess.Completion) bool {
	switch {
	case c.Err == nil && c.Status != "":
		tc.markSettled()
	case errIsLostLease(c.Err):
		tc.markLost()
	default:
		return false
	}
	return true
}

// rideResult encodes a handler's result for a completion that shares its
// write with others. ok is false for a result that cannot (not JSON, or
// larger than maxRideResultBytes): its task settles on its own, whose path
// reports what is wrong with it.
func (w *Worker) rideResult(result any) (enc any, ok bool) {
	enc, err := w.ops.EncodeResult(result)
	if err != nil {
		return nil, false
	}
	if text, isText := enc.(string); isText && len(text) > maxRideResultBytes {
		return nil, false
	}
	return enc, true
}

// takePending hands the loop the completions waiting, at most
// maxRideBytes of results; the rest wait for the next claim.
func (w *Worker) takePending() []*pendingCompletion {
	w.mu.Lock()
	defer w.mu.Unlock()
	var taken []*pendingCompletion
	taken, w.pending = cutPending(w.pending)
	return taken
}

// cutPending splits from pending the completions one write carries: at
// least one, and past the first at most maxRideBytes of results.
func cutPending(pending []*pendingCompletion) (taken, rest []*pendingCompletion) {
	size, n := 0, 0
	for n < len(pending) {
		if text, ok := pending[n].c.Result.(string); ok {
			if n > 0 && size+len(text) > maxRideBytes {
				break
			}
			size += len(text)
		}
		n++
	}
	return pending[:n:n], append([]*pendingCompletion(nil), pending[n:]...)
}

// completions lists the completions of taken for a claim.
func completions(taken []*pendingCompletion) []*storeaccess.Completion {
	if len(taken) == 0 {
		return nil
	}
	cs := make([]*storeaccess.Completion, len(taken))
	for i, p := range taken {
		cs[i] = &p.c
	}
	return cs
}

// answer tells the callers of taken how the write carrying them went.
func answer(taken []*pendingCompletion, err error) {
	for _, p := range taken {
		p.done <- err
	}
}

// settlePending settles the completions waiting without a claim, the
// loop being unable to claim now, and reports whether there were any.
func (w *Worker) settlePending(ctx context.Context) bool {
	settled := false
	for {
		taken := w.takePending()
		if len(taken) == 0 {
			return settled
		}
		settled = true
		answer(taken, w.ops.SettleCompletions(ctx, completions(taken)))
	}
}

// rideStart opens the claim path to completions; rideEnd closes it and
// answers what still waits, which then settles on its own.
func (w *Worker) rideStart() {
	w.mu.Lock()
	w.riding = w.st.Dialect() == protocol.SQLite
	w.mu.Unlock()
}

// rideAfterClaim opens the ride to completions after a claim that drew
// several tasks (burst) or left other calls running, and closes it
// otherwise.
func (w *Worker) rideAfterClaim(burst bool) {
	w.mu.Lock()
	w.rideOpen.Store(w.riding && (burst || w.running > 0))
	w.mu.Unlock()
}

// rideEnd: see rideStart.
func (w *Worker) rideEnd() {
	w.mu.Lock()
	w.riding = false
	w.rideOpen.Store(false)
	left := w.pending
	w.pending = nil
	w.mu.Unlock()
	answer(left, errRideEnded)
}
