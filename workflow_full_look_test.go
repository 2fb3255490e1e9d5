package cairnq_test

import (
	"context"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go"
)

// The workers of one Client share its store's full look over the ended
// workflows: three sweeping every 20 ms take one between them, and a
// fourth started after it takes none of its own, rather than each one
// when it starts and every 5 minutes.
func TestWorkflowFullLookOncePerClient(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		st := cairnq.StoreOf(c)
		st.SpreadEndedFull(0) // the first at the first sweep's ask, as before
		start := func() {
			w := newWorker(t, c, &cairnq.WorkerOptions{WorkflowSweep: 20 * time.Millisecond})
			goSteps(t, w, &failSwitch{})
			startWorker(t, w)
		}
		for range 3 {
			start()
		}
		waitFor(t, "a full look", func() bool { return st.EndedFullLooks() > 0 })
		time.Sleep(300 * time.Millisecond) // about 15 sweeps of each
		start()
		time.Sleep(300 * time.Millisecond)
		if n := st.EndedFullLooks(); n != 1 {
			t.Fatalf("the client's four workers took %d full looks, want 1", n)
		}
	})
}

// A failed step another SDK retried and ran, in a workflow whose end no
// worker's read of the recent ends reads any more (here: none sweeps),
// revives the workflow at the store's full look, and a sweeping worker
// then runs it to the end.
func TestWorkflowFullLookRevivesStepRetriedAndRunByAnotherSDK(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		st := cairnq.StoreOf(c)
		st.SpreadEndedFull(time.Hour) // none while w sweeps, most likely
		var fail failSwitch
		rec := failedThenRunByAnotherSDK(t, c, &fail)
		// No worker sweeps now, and none settles the step: only the full
		// look can revive the workflow. Make it due at once.
		st.SpreadEndedFull(0)
		if looked, err := st.LookEndedFull(ctx, "full-look", 256); !looked || err != nil {
			t.Fatalf("LookEndedFull: %v %v, want a look", looked, err)
		}
		if r, err := c.Get(ctx, rec.ID); err != nil || r.Status != cairnq.StatusQueued {
			t.Fatalf("the record after the full look: %+v %v, want queued again", r, err)
		}
		w2 := newWorker(t, c, &cairnq.WorkerOptions{WorkflowSweep: 20 * time.Millisecond})
		goSteps(t, w2, &fail)
		startWorker(t, w2)
		waitStatus(t, c, rec.ID, cairnq.StatusSucceeded, "the workflow the full look revived")
		if st := stepStates(t, c, rec.ID); st["ts"] != "succeeded" || st["go"] != "succeeded" {
			t.Errorf("steps %v, want both succeeded", st)
		}
	})
}
