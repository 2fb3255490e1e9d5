package cairnq

import (
	"fmt"
	"math"
	"slices"
)

// RateLimit bounds how fast a worker starts tasks of one name: Rate tasks
// per second sustained, at most Burst at once after an idle spell. The
// worker claims only what the limit lets it start now, so no task waits
// in this process holding a lease for its turn; the rest stay queued for
// this worker's next claim or for another worker.
//
// The limit is per Worker, in this process: N workers with the same limit
// start up to N times Rate. A limit shared across processes needs state
// every claim reads and updates (a bucket row per name, or a count of
// recent starts the claim could filter on); protocol v1's claim statement
// has neither, and the other SDKs' workers would not honour one, so
// cairnq does not pretend to offer it.
type RateLimit struct {
	// Rate is the sustained rate in tasks per second; > 0. 0.5 is one task
	// every two seconds.
	Rate float64
	// Burst is how many tasks may start at once when the limit has been
	// idle; the claim takes up to this many in one statement. Default 1.
	Burst int
}

func (r *RateLimit) validate(name string) error {
	bad := func(arg, format string, a ...any) error {
		return &ArgumentError{Op: "handle", Arg: arg, Reason: fmt.Sprintf("for %q ", name) + fmt.Sprintf(format, a...)}
	}
	if !(r.Rate > 0) || math.IsInf(r.Rate, 1) {
		return bad("RateLimit.Rate", "must be a finite number of tasks per second > 0, got %v", r.Rate)
	}
	if r.Burst < 0 {
		return bad("RateLimit.Burst", "must be >= 0 (0 for 1), got %d", r.Burst)
	}
	return nil
}

// Pause stops the worker claiming tasks from queues (every queue it
// claims from when none are given), leaving calls in flight alone: they
// run and settle as usual. When Pause returns, no claim on those queues
// is in progress and no task of theirs starts until Resume. A paused
// queue's expired leases are not recovered by this worker meanwhile
// (another worker's claim recovers them). Pausing a paused queue does
// nothing; a queue the worker does not claim from is an *ArgumentError.
// Pause may be called before Run. Client.PauseQueue pauses a queue for
// every Go worker on the database instead; a queue paused either way is
// not claimed from, and each resume lifts only its own pause.
func (w *Worker) Pause(queues ...string) error {
	return w.setPaused("pause", queues, true)
}

// Resume restarts claiming on queues (every queue when none are given)
// that Pause stopped. Resuming a queue that is not paused does nothing; a
// queue the worker does not claim from is an *ArgumentError.
func (w *Worker) Resume(queues ...string) error {
	return w.setPaused("resume", queues, false)
}

// Paused returns the queues Pause stopped, in the worker's queue order.
func (w *Worker) Paused() []string { return w.pause.Paused() }

func (w *Worker) setPaused(op string, queues []string, paused bool) error {
	if len(queues) == 0 {
		queues = w.queues
	}
	for _, q := range queues {
		if !slices.Contains(w.queues, q) {
			return &ArgumentError{Op: op, Arg: "queue", Reason: fmt.Sprintf("%q is not one of the worker's queues %q", q, w.queues)}
		}
	}
	w.pause.Set(queues, paused) // after a claim in progress
	return nil
}
