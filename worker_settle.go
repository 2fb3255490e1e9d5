package cairnq

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/attempt"
	"github.com/cairnq/cairnq-go/internal/completer"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// settleLeftover records one task's outcome from how its call ended. It
// runs the handler's own values (its error's methods, its result's
// MarshalJSON) outside the handler's recover, so a panic here is
// recovered too: reported, and the task left to its lease, which expires
// and lets the task run again, rather than the worker process dying with
// every other task it holds. It reports whether it handed a lone task's
// success over (settle).
func (w *Worker) settleLeftover(ctx context.Context, tc *TaskContext, reg *registration, callErr error, result any, results map[string]any) (handedOver bool) {
	defer func() {
		if p := recover(); p != nil {
			w.report(fmt.Errorf("cairnq: settling task %s panicked: %v", tc.task.ID, p), PhaseExecute, tc.task.ID)
		}
	}()
	if err := tc.durableBroken(); err != nil {
		callErr = err // whatever the handler made of a changed step
	}
	if callErr != nil {
		return w.settleFailure(ctx, tc, callErr)
	}
	st := tc.settlement(engine.Succeeded)
	st.Result = result
	if reg.batch > 0 {
		st.Result = results[tc.task.ID]
	}
	return w.settle(ctx, tc, st, reg.batch == 0)
}

// settleFailure records how a call that failed, or snoozed, ended;
// settleLeftover's recover covers it. It is apart from settleLeftover so
// that a success, nearly every call, settles in small stack frames: each
// call runs on a goroutine of its own, and frames that push its stack
// past the size the runtime starts goroutines with (4 KiB while the
// calls are short) make every one of them copy its stack once, which
// cost a SQLite burn-down at concurrency 8 about 5% of its CPU
// (docs/benchmarks.md).
func (w *Worker) settleFailure(ctx context.Context, tc *TaskContext, callErr error) (handedOver bool) {
	if d, ok := snoozeOf(callErr); ok {
		if d < 0 {
			return w.settle(ctx, tc, tc.failure(negativeSnooze(d).Envelope(), false), false)
		}
		st := tc.settlement(engine.Snoozed)
		st.Delay = d
		return w.settle(ctx, tc, st, false)
	}
	if env, retryable, record := w.failureOf(tc, callErr); record {
		w.settle(ctx, tc, tc.failure(env, retryable), false)
	}
	return false
}

// failureOf turns how a call failed into the envelope to record, and
// whether there is anything to record at all.
func (w *Worker) failureOf(tc *TaskContext, callErr error) (env ErrorEnvelope, retryable, record bool) {
	if callErr == attempt.ErrTimeout {
		return ErrorEnvelope{
			Type: "HandlerTimeout", Code: "handler_timeout", Retryable: true, Details: map[string]any{},
			Message: fmt.Sprintf("handler for %s ran past MaxRun=%v; the attempt was abandoned", tc.task.Name, w.opts.MaxRun),
		}, true, true
	}
	if pe, ok := callErr.(*attempt.PanicError); ok {
		return panicEnvelope(pe.Value, pe.Stack), true, true
	}
	if err := tc.refusal(); err != nil {
		// The workflow refused the steps it added (SucceedTx told the
		// handler so): as final as when the worker settles it.
		return ErrorEnvelope(engine.RefusedEnvelope(err)), false, true
	}
	// A write through the context was already refused: nothing more to
	// record. errors.Is calls the handler's error's own methods, hence
	// the recover (envelopeOf has its own).
	lost := false
	func() {
		defer func() { recover() }()
		lost = errIsLostLease(callErr)
	}()
	if lost {
		return ErrorEnvelope{}, false, false
	}
	env, retryable = envelopeOf(callErr)
	return env, retryable, true
}

// settle writes st, how tc's attempt ended, through tc's completer: one
// call whatever the task is. lone says the call ran tc alone: its
// success may then be handed over (the batch form), and settle reports
// handedOver: the completer ends tc's settling once written, with the
// call's share of the worker's counts.
func (w *Worker) settle(ctx context.Context, tc *TaskContext, st engine.Settlement, lone bool) (handedOver bool) {
	tc.startSettling()
	tc.settleCtx = ctx
	defer func() {
		// The handler's values run in Settle (its result's MarshalJSON):
		// a panic there leaves nothing written or handed over.
		if p := recover(); p != nil {
			tc.doneSettling()
			panic(p) // for settleLeftover to report
		}
	}()
	return tc.comp.Settle(ctx, st, (*settleRecorder)(tc), lone)
}

// settleRecorder is a TaskContext as its completer sees it
// (completer.Recorder): a pointer, so passing it allocates nothing.
type settleRecorder TaskContext

// Settled records how tc's settlement fared and ends its settling; for
// one handed over, the call's share of the worker's counts ends too.
func (r *settleRecorder) Settled(written engine.Settlement, out engine.Settled, err error, handedOver bool) {
	tc := (*TaskContext)(r)
	w := tc.w
	w.recordSettled(tc.settleCtx, tc, &written, &out, err)
	tc.doneSettling()
	if !handedOver {
		return
	}
	w.untrackSettled(tc)
	w.slots.Settled()
}

// recordSettled marks tc by how its settlement fared (settled, or its
// lease gone) and logs what the store made of it; any other error is
// reported. It takes pointers, and a plain success (which logs nothing)
// does not call logSettled, to keep a success's stack shallow (see
// settleFailure).
func (w *Worker) recordSettled(ctx context.Context, tc *TaskContext, st *engine.Settlement, out *engine.Settled, err error) {
	noteRefusal(tc, *out)
	switch {
	case err == nil:
		tc.markSettled()
		if st.Outcome != engine.Succeeded || out.Refused != nil || out.Step != nil {
			w.logSettled(ctx, tc, *st, *out)
		}
	case errIsLostLease(err):
		tc.markLost()
	default:
		w.report(err, PhaseExecute, tc.task.ID)
	}
}

// noteRefusal records a workflow's refusal of the steps tc added, for
// Succeed to return and for the handler's end to fail the step for good
// (failureOf): whether or not the failure written for it committed.
func noteRefusal(tc *TaskContext, out engine.Settled) {
	if out.Refused != nil {
		tc.refuse(out.Refused)
	}
}

// logSettled logs what a written settlement did.
func (w *Worker) logSettled(ctx context.Context, tc *TaskContext, st engine.Settlement, out engine.Settled) {
	if out.Refused != nil {
		st.Error, st.Delay = engine.RefusedEnvelope(out.Refused), 0
	}
	switch {
	case st.Outcome == engine.Failed || out.Refused != nil:
		w.logSettledFailure(ctx, tc, out.Task, st.Error, st.Delay)
	case st.Outcome == engine.Snoozed && out.Status == cairnqtype.StatusQueued:
		w.logTask(ctx, slog.LevelDebug, logTaskSnoozed, tc.task,
			slog.Duration("snooze", st.Delay), slog.Int64("run_at_ms", out.Task.RunAt.UnixMilli()))
	}
	if out.Step != nil {
		w.logAdvance(ctx, tc, *out.Step, out.Advanced)
	}
}

// failure is tc's attempt failing with env, its retry (when retryable)
// due after the worker's backoff.
func (tc *TaskContext) failure(env ErrorEnvelope, retryable bool) engine.Settlement {
	env.Retryable = retryable
	st := tc.settlement(engine.Failed)
	st.Error, st.Retryable, st.Delay = cairnqtype.ErrorEnvelope(env), retryable, tc.w.failDelay(tc.task.Attempt, retryable)
	return st
}

// settlement is tc's attempt ending with outcome, on its worker's
// authority; a success carries the steps the handler added.
func (tc *TaskContext) settlement(outcome engine.Outcome) engine.Settlement {
	st := engine.Settlement{Task: tc.task, WorkerID: tc.w.id, Outcome: outcome, Rows: &tc.w.rowsMu}
	if outcome == engine.Succeeded {
		st.Added = tc.addedSteps()
	}
	return st
}

// settleNow writes st on the handler's behalf (TaskContext.Succeed and
// its kin): once, as the handler's own call, where the worker's
// settlements retry.
func (tc *TaskContext) settleNow(ctx context.Context, st engine.Settlement) error {
	_, err := tc.settleNowOut(ctx, st)
	return err
}

// settleNowOut is settleNow, also returning what the settlement wrote.
func (tc *TaskContext) settleNowOut(ctx context.Context, st engine.Settlement) (out engine.Settled, err error) {
	err = tc.settle(func() error {
		var err error
		out, err = tc.w.st.Settle(ctx, st)
		noteRefusal(tc, out)
		if err == nil {
			tc.w.logSettled(ctx, tc, st, out)
		}
		return err
	})
	return out, err
}

// completerConfig is what w's completers need of it.
func (w *Worker) completerConfig() completer.Config {
	return completer.Config{Store: settleStore{w}, Lease: w.lease, Rows: &w.rowsMu, Wake: w.signalSlot,
		Busy: func(ctx context.Context, backoff time.Duration) {
			w.log.LogAttrs(ctx, slog.LevelDebug, logBusyBackoff, slog.String("worker_id", w.id),
				slog.String("phase", string(PhaseExecute)), slog.Duration("backoff", backoff))
		}}
}

// settleStore is what w's completers write through: the engine's
// settlements, the grouped ones through w.claims, which tests wrap.
type settleStore struct{ w *Worker }

func (s settleStore) Settle(ctx context.Context, st engine.Settlement) (engine.Settled, error) {
	return s.w.st.Settle(ctx, st)
}

func (s settleStore) SettleCompletions(ctx context.Context, cs []*engine.Completion) error {
	return s.w.claims.SettleCompletions(ctx, cs)
}

func (s settleStore) SettleOnClaim() bool { return s.w.st.SettleOnClaim() }
