package cairnq

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/cairnq/cairnq-go/internal/engine"
)

// sweepBatch is how many due records one sweep claims at most.
const sweepBatch = 16

// endedPage is how many records of ended workflows one read of a look
// over them takes at most.
const endedPage = 256

// A sweep then looks over the workflows that ended (lookEnded): it reads
// the records that ended since its last look, from endedSlack before the
// last one that look read (an end whose transaction began before that
// one's may commit after it). A worker's first look starts endedFirst
// ago, by its own clock, and reads every record of a failed or canceled
// workflow too, as every look does each endedFullEvery: a step retried
// long after its workflow ended (by another SDK, and run by another
// SDK's worker) moves a record no look reads otherwise.
const (
	endedSlack     = 5 * time.Second
	endedFirst     = time.Minute
	endedFullEvery = 5 * time.Minute
)

// endedLook is where a worker's looks over the ended workflows stand.
type endedLook struct {
	from   engine.EndedFrom // where the next look starts
	fullAt time.Time        // when the next look reads every record; zero: first look
}

// sweepLoop sweeps the workflows' due records every WorkflowSweep (with
// a tenth of jitter, so that a fleet started together does not sweep in
// step) until ctx ends. A sweep that filled its batch runs again at once.
// Each sweep then looks over the workflows that ended (lookEnded).
func (w *Worker) sweepLoop(ctx context.Context) {
	var look endedLook
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
		w.lookEnded(ctx, &look)
	}
}

// lookEnded advances the workflows that ended failed or canceled and
// whose steps moved since, whoever moved them: a canceled workflow's
// steps still live are asked to stop (another SDK's plain cancel of the
// record reached none of them), and a failed workflow one of whose steps
// was retried goes on (Client.Retry revives it at once; another SDK's
// retry at the step's settlement by a Go worker, or here).
func (w *Worker) lookEnded(ctx context.Context, look *endedLook) {
	now := time.Now()
	if look.fullAt.IsZero() {
		look.from = engine.EndedFrom{MS: now.Add(-endedFirst).UnixMilli()}
	}
	if !now.Before(look.fullAt) {
		look.fullAt = now.Add(endedFullEvery + rand.N(endedFullEvery/10))
		for _, status := range []Status{StatusFailed, StatusCanceled} {
			w.walkEnded(ctx, engine.OldestEnded(), func(from engine.EndedFrom) (engine.EndedSwept, error) {
				return w.st.SweepEndedByStatus(ctx, w.id, status, from, endedPage)
			})
		}
	}
	from := w.walkEnded(ctx, look.from, func(from engine.EndedFrom) (engine.EndedSwept, error) {
		return w.st.SweepEndedSince(ctx, w.id, from, endedPage)
	})
	if from != look.from {
		look.from = engine.EndedFrom{MS: from.MS - endedSlack.Milliseconds()}
	}
}

// walkEnded reads page after page from from until one comes back short
// (or fails) and returns where it stopped.
func (w *Worker) walkEnded(ctx context.Context, from engine.EndedFrom, page func(engine.EndedFrom) (engine.EndedSwept, error)) engine.EndedFrom {
	for ctx.Err() == nil {
		sw, err := page(from)
		from = sw.Next
		if err != nil && ctx.Err() == nil {
			w.report(err, PhaseClaim, "")
		}
		if sw.Read < endedPage {
			break
		}
	}
	return from
}
