package cairnq

import (
	"context"
	"errors"

	"github.com/cairnq/cairnq-go/internal/engine"
)

// On SQLite a busy worker's completions ride on its next claim: a call
// whose handler succeeded leaves its completion with the claim loop, which
// hands the ones waiting to the claim it makes anyway
// (engine.ClaimHints.Settle), so that a cycle of the worker is one
// request to SQLite's single writer and one commit, where it was a
// request per finished call beside the claim's. The loop never holds a
// completion back: it claims as soon as one arrives (the arrival wakes it
// as a freed slot does), and when it cannot claim (every slot busy, every
// queue paused) it settles them alone. Only while the loop's last claim
// drew several tasks, or left other calls running: a lone call's
// completion goes straight to the writer, as the claim would add its
// statement and two hand-offs to the call's latency. (The calls still
// running count too: otherwise, after a claim that drew one task, the
// calls of an earlier draw would each settle with a commit of their own.)
//
// Not on Postgres: there the claim is a round trip during which the slots
// it fills stand idle, and the settlements, on a connection of their own
// (the worker's settler, settler.go), run beside it on another core.
// Riding on the claim would lengthen that round trip (docs/benchmarks.md
// has the measurement).

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
	enc, ok := engine.HandOverResult(result)
	if !ok {
		return false
	}
	c := &engine.Completion{ID: tc.task.ID, WorkerID: w.id, Result: enc, Done: make(chan error, 1)}
	tc.startSettling()
	defer tc.doneSettling()
	if !w.ride.Add(c) { // the loop has ended since
		return false
	}
	w.signalSlot()
	// The loop answers every completion it accepted, at the latest when it
	// ends (rideEnd).
	if err := <-c.Done; err != nil {
		return false
	}
	return recordOutcome(tc, c) // if not, on its own, then
}

// recordOutcome marks tc by what the write that carried c made of it:
// settled, or its lease gone. It reports false when c got neither, which
// leaves tc for its caller to settle or report.
func recordOutcome(tc *TaskContext, c *engine.Completion) bool {
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

// settlePending settles the completions waiting without a claim, the
// loop being unable to claim now, and reports whether there were any.
func (w *Worker) settlePending(ctx context.Context) bool {
	settled := false
	for {
		taken := w.ride.Take()
		if len(taken) == 0 {
			return settled
		}
		settled = true
		engine.Answer(taken, w.claims.SettleCompletions(ctx, taken))
	}
}

// rideStart opens the claim path to completions where the store settles
// on claims; rideEnd closes it and answers what still waits, which then
// settles on its own.
func (w *Worker) rideStart() {
	w.mu.Lock()
	w.riding = w.st.SettleOnClaim()
	w.mu.Unlock()
}

// rideAfterClaim opens the ride to completions after a claim that drew
// several tasks (burst) or left other calls running or settling, and
// closes it otherwise. Settling counts: a call's slot frees when its
// handler returns, before its completion looks at the ride, and a claim
// in between that saw no call running closed the ride on it.
func (w *Worker) rideAfterClaim(burst bool) {
	w.mu.Lock()
	w.rideOpen.Store(w.riding && (burst || w.running > 0 || w.settling > 0))
	w.mu.Unlock()
}

// rideEnd: see rideStart.
func (w *Worker) rideEnd() {
	w.mu.Lock()
	w.riding = false
	w.rideOpen.Store(false)
	w.mu.Unlock()
	w.ride.Close()
	for taken := w.ride.Take(); len(taken) > 0; taken = w.ride.Take() {
		engine.Answer(taken, errRideEnded)
	}
}
