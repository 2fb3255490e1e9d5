package cairnq

import (
	"context"
	"log/slog"
	"math/rand/v2"
)

// sweepBatch is how many due records one sweep claims at most.
const sweepBatch = 16

// sweepLoop sweeps the workflows' due records every WorkflowSweep (with
// a tenth of jitter, so that a fleet started together does not sweep in
// step) until ctx ends. A sweep that filled its batch runs again at once.
func (w *Worker) sweepLoop(ctx context.Context) {
	for {
		wait := w.opts.WorkflowSweep + rand.N(w.opts.WorkflowSweep/10+1)
		if !sleepCtx(ctx, wait) {
			return
		}
		for ctx.Err() == nil {
			sw, err := w.st.SweepWorkflows(ctx, w.id, sweepBatch)
			for id, why := range sw.Unread {
				w.log.LogAttrs(ctx, slog.LevelWarn, logWorkflowUnread, slog.String("workflow", id),
					slog.String("reason", why), slog.String("worker_id", w.id))
			}
			if err != nil {
				if ctx.Err() == nil {
					w.report(err, PhaseClaim, "")
				}
				break
			}
			if sw.Records < sweepBatch {
				break
			}
		}
	}
}
