package cairnq

import (
	"errors"

	"github.com/cairnq/cairnq-go/internal/heartbeat"
)

// track adds or removes contexts from the set the heartbeat renews.
func (w *Worker) track(tcs []*TaskContext, add bool) {
	var stale []*TaskContext
	w.mu.Lock()
	for _, tc := range tcs {
		id := tc.task.ID
		switch old, ok := w.live[id]; {
		case add && ok && old != tc:
			// This worker claimed the task again while an earlier
			// attempt's call still runs (its lease lost, or a park whose
			// answer was lost): the same worker id and, after a park,
			// the same attempt number, so only this tells them apart.
			// The earlier one writes nothing more, and the worker
			// settles nothing for it.
			stale = append(stale, old)
			w.live[id] = tc
		case add:
			w.live[id] = tc
		case ok && old == tc: // not a later claim's
			delete(w.live, id)
		}
	}
	w.mu.Unlock()
	for _, tc := range stale { // outside w.mu: it logs, through the user's handler
		tc.markStale()
	}
}

// untrackSettled drops tc, whose success a completer wrote, from the
// heartbeat's set, unless a later claim of its task took its place.
func (w *Worker) untrackSettled(tc *TaskContext) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.live[tc.task.ID] == tc {
		delete(w.live, tc.task.ID)
	}
}

// heartbeat is w's heartbeat for a run (internal/heartbeat).
func (w *Worker) heartbeat() *heartbeat.Beat {
	return &heartbeat.Beat{Store: w.st, WorkerID: w.id, Every: w.beat, Lease: w.lease, Rows: &w.rowsMu,
		Held:   w.heldLeases,
		Report: func(err error, id string) { w.report(err, PhaseExecute, id) }}
}

// heldLeases are the leases of the tasks w runs that are neither lost
// nor settled.
func (w *Worker) heldLeases() []heartbeat.Lease {
	w.mu.Lock()
	defer w.mu.Unlock()
	held := make([]heartbeat.Lease, 0, len(w.live))
	for _, tc := range w.live {
		if !tc.LostLease() && !tc.isSettled() {
			held = append(held, beatLease{tc})
		}
	}
	return held
}

// beatLease is a TaskContext as the heartbeat sees it.
type beatLease struct{ tc *TaskContext }

func (l beatLease) ID() string          { return l.tc.task.ID }
func (l beatLease) Renewed(cancel bool) { l.tc.observeCancel(cancel) }
func (l beatLease) Missed()             { l.tc.missedByBeat() }

func errIsLostLease(err error) bool { return errors.Is(err, ErrLostLease) }

func errIsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
