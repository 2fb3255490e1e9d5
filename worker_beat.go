package cairnq

import (
	"context"
	"errors"
	"time"

	"github.com/cairnq/cairnq-go/internal/completer"
)

// track adds or removes contexts from the set the heartbeat renews.
func (w *Worker) track(tcs []*TaskContext, add bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, tc := range tcs {
		if add {
			w.live[tc.task.ID] = tc
		} else {
			delete(w.live, tc.task.ID)
		}
	}
}

// heartbeatLoop renews every lease the worker holds with one statement per
// beat. A task missing from the reply lost its lease: only its context is
// flagged, its neighbours run on.
func (w *Worker) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(w.beat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.mu.Lock()
		ids := make([]string, 0, len(w.live))
		tcs := make([]*TaskContext, 0, len(w.live))
		for id, tc := range w.live {
			if !tc.LostLease() && !tc.isSettled() {
				ids = append(ids, id)
				tcs = append(tcs, tc)
			}
		}
		w.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		renewed, err := w.renew(ctx, ids)
		if err != nil {
			if ctx.Err() == nil {
				w.report(err, PhaseExecute, ids[0])
			}
			continue
		}
		for _, tc := range tcs {
			if cancel, ok := renewed[tc.task.ID]; ok {
				tc.observeCancel(cancel)
			} else {
				// The task may have settled while the beat was in flight,
				// which takes it out of running and out of the reply.
				tc.missedByBeat()
			}
		}
	}
}

// renew renews ids' leases in one statement, tried again within the beat's
// interval while it fails for a reason that may pass: a busy database, a
// dropped connection, or a deadlock. A beat and a grouped settlement
// lock the rows they share in whatever order their plans visit them (heap
// order for a bitmap scan or a hash join), so under load they can
// deadlock, and the server rolls one back; a settlement is retried the
// same way (internal/completer). Within a worker they no longer overlap
// (rowsMu); the retries stay for beats and settlements that meet other
// writers. The next beat would renew the leases anyway; what is reported
// is only what outlasts the interval.
func (w *Worker) renew(ctx context.Context, ids []string) (map[string]bool, error) {
	deadline := time.Now().Add(w.beat)
	backoff := 10 * time.Millisecond
	for {
		w.rowsMu.Lock() // see Worker.rowsMu
		renewed, err := w.st.HeartbeatBatch(ctx, ids, w.id, w.lease)
		w.rowsMu.Unlock()
		if err == nil || !completer.Transient(err) || time.Now().Add(backoff).After(deadline) || ctx.Err() != nil {
			return renewed, err
		}
		sleepCtx(ctx, backoff)
		backoff = min(2*backoff, time.Second)
	}
}

func errIsLostLease(err error) bool { return errors.Is(err, ErrLostLease) }

func errIsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
