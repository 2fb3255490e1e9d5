package cairnq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/outage"
)

// settleLeftover records one task's outcome from how its call ended. It
// runs the handler's own values (its error's methods, its result's
// MarshalJSON) outside the handler's recover, so a panic here is
// recovered too: reported, and the task left to its lease, which expires
// and lets the task run again, rather than the worker process dying with
// every other task it holds. It reports whether it handed a lone task's
// success to the settler (complete).
func (w *Worker) settleLeftover(ctx context.Context, tc *TaskContext, reg *registration, callErr error, result any, results map[string]any) (handedOver bool) {
	defer func() {
		if p := recover(); p != nil {
			w.report(fmt.Errorf("cairnq: settling task %s panicked: %v", tc.task.ID, p), PhaseExecute, tc.task.ID)
		}
	}()
	if callErr == nil {
		if reg.batch > 0 {
			result = results[tc.task.ID]
		}
		return w.complete(ctx, tc, result, reg.batch == 0)
	}
	if d, ok := snoozeOf(callErr); ok {
		w.snooze(ctx, tc, d)
		return
	}
	if env, retryable, record := w.failureOf(tc, callErr); record {
		w.fail(ctx, tc, env, retryable)
	}
	return false
}

// failureOf turns how a call failed into the envelope to record, and
// whether there is anything to record at all.
func (w *Worker) failureOf(tc *TaskContext, callErr error) (env ErrorEnvelope, retryable, record bool) {
	if callErr == errAttemptTimeout {
		return ErrorEnvelope{
			Type: "HandlerTimeout", Code: "handler_timeout", Retryable: true, Details: map[string]any{},
			Message: fmt.Sprintf("handler for %s ran past MaxRun=%v; the attempt was abandoned", tc.task.Name, w.opts.MaxRun),
		}, true, true
	}
	if pe, ok := callErr.(*panicError); ok {
		return panicEnvelope(pe.value, pe.stack), true, true
	}
	if err := tc.refusal(); err != nil {
		// The workflow refused the steps it added (SucceedTx told the
		// handler so): as final as when the worker settles it.
		return refusedEnvelope(err), false, true
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

// complete settles tc's success: through the loop's next claim (SQLite)
// or, for a lone task's call when handOver allows, by handing it to the
// settler (Postgres), which it then reports; else on its own.
func (w *Worker) complete(ctx context.Context, tc *TaskContext, result any, handOver bool) (handedOver bool) {
	if _, step := engine.StepMarkOf(tc.task); !step {
		// A step's settlement advances its workflow in the same
		// transaction, so it rides on no claim and joins no group.
		if w.completeByClaim(tc, result) {
			return false
		}
		if handOver && w.settler != nil && w.settler.handOver(tc, result) {
			return true
		}
	}
	err := w.settleTask(ctx, tc, func() error { return w.completeWrite(ctx, tc, result) })
	var se *SerializationError
	switch {
	case err == nil:
	case errors.As(err, &se):
		// Deterministic: every attempt would fail the same way, so the task
		// fails for good instead of being redelivered.
		w.fail(ctx, tc, ErrorEnvelope{
			Type: "SerializationError", Code: "unserializable_result", Retryable: false, Details: map[string]any{},
			Message: "handler result is not JSON-serializable: " + se.Err.Error(),
		}, false)
	default:
		w.report(err, PhaseExecute, tc.task.ID)
	}
	return false
}

// completeWrite writes tc's success on its own: Complete, or for a
// workflow's step CompleteStep, which advances the workflow in the same
// transaction.
func (w *Worker) completeWrite(ctx context.Context, tc *TaskContext, result any) error {
	step := tc.stepOf()
	if step == nil {
		_, err := w.st.Complete(ctx, tc.task.ID, w.id, result)
		return err
	}
	res, err := w.st.CompleteStep(ctx, tc.task.ID, w.id, *step, result)
	if refusedSteps(tc, err) {
		return w.recordFailure(ctx, tc, refusedEnvelope(tc.refusal()), false)
	}
	if err == nil {
		w.logAdvance(ctx, tc, res.Advanced)
	}
	return err
}

// refusedSteps reports whether err is the workflow refusing the steps tc
// added, which nothing of the settlement wrote; it records the refusal
// for Succeed to return. The caller then fails the step for good: the
// refusal is as deterministic as an unencodable result.
func refusedSteps(tc *TaskContext, err error) bool {
	var refused *engine.AddedStepsError
	if !errors.As(err, &refused) {
		return false
	}
	tc.refuse(refused)
	return true
}

// refusedEnvelope is the failure a step whose added steps were refused
// ends with.
func refusedEnvelope(err error) ErrorEnvelope {
	return ErrorEnvelope{Type: "InvalidSteps", Code: "invalid_added_steps", Retryable: false, Details: map[string]any{},
		Message: err.Error()}
}

func (w *Worker) fail(ctx context.Context, tc *TaskContext, env ErrorEnvelope, retryable bool) {
	env.Retryable = retryable
	if err := w.settleTask(ctx, tc, func() error { return w.recordFailure(ctx, tc, env, retryable) }); err != nil {
		w.report(err, PhaseExecute, tc.task.ID)
	}
}

// settleTask writes a settlement of tc on the worker's authority,
// retrying while the failure may pass (retrySettle), and marks tc settled
// or lease-lost by the outcome. Any other error is returned for the caller
// to handle.
func (w *Worker) settleTask(ctx context.Context, tc *TaskContext, write func() error) error {
	tc.startSettling()
	defer tc.doneSettling()
	err := w.retrySettle(ctx, write)
	switch {
	case err == nil:
		tc.markSettled()
	case errIsLostLease(err):
		tc.markLost()
	default:
		return err
	}
	return nil
}

// recordFailure writes one failed attempt, the retry's delay chosen here,
// and logs what the store made of it.
func (w *Worker) recordFailure(ctx context.Context, tc *TaskContext, env ErrorEnvelope, retryable bool) error {
	delay := w.failDelay(tc.task.Attempt, retryable)
	var settled *Task
	var err error
	if step := tc.stepOf(); step != nil {
		var res engine.StepSettled
		if res, err = w.st.FailStep(ctx, tc.task.ID, w.id, *step, env, retryable, delay); err == nil {
			settled = res.Task
			w.logAdvance(ctx, tc, res.Advanced)
		}
	} else {
		settled, err = w.st.Fail(ctx, tc.task.ID, w.id, env, retryable, delay)
	}
	if err == nil {
		w.logSettledFailure(ctx, tc, settled, env, delay)
	}
	return err
}

// retrySettle runs a settlement again while it fails for a reason that
// may pass (another process holding the SQLite write lock past the busy
// timeout, a dropped connection, a restarting server), for up to a
// lease's length: the heartbeat keeps the lease alive meanwhile where it
// can, and giving up early would leave the task to lease expiry and a
// second run of work that already finished.
func (w *Worker) retrySettle(ctx context.Context, settle func() error) error {
	deadline := time.Now().Add(w.lease)
	backoff := 10 * time.Millisecond
	for {
		err := settle()
		if !transient(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		if errors.Is(err, ErrBusy) {
			w.log.LogAttrs(ctx, slog.LevelDebug, logBusyBackoff, slog.String("worker_id", w.id),
				slog.String("phase", string(PhaseExecute)), slog.Duration("backoff", backoff))
		}
		sleepCtx(ctx, backoff)
		backoff = min(backoff*2, time.Second)
	}
}

// transient reports whether a failed write may succeed if run again: not
// a refusal that would repeat (bad input, a lost lease, a closed store,
// the server rejecting the statement itself), but a busy database, the
// database out of reach (outage.Is, which every ErrUnavailable is), or an
// error that carries no SQLSTATE or one of the classes of transaction
// rollback, resource, operator and system faults.
func transient(err error) bool {
	switch {
	case err == nil, errIsLostLease(err), errors.Is(err, ErrInvalidArgument), storeGone(err),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.Is(err, ErrBusy), outage.Is(err):
		return true
	}
	var se interface{ SQLState() string }
	if errors.As(err, &se) {
		code := se.SQLState()
		switch code[:min(2, len(code))] {
		case "40", "53", "57", "58":
			return true
		}
		return false
	}
	return true
}
