package cairnq

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/completer"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// TaskContext is a handler's view of the task it runs: the task's fields,
// and the writes a running attempt may make. Every write is checked
// against the lease; once the lease is lost (or the task settled) they fail
// with ErrLostLease without touching the database, because the same task
// may already run elsewhere, possibly re-claimed under this worker's id.
type TaskContext struct {
	task *cairnqtype.Task // as claimed, in the engine's form
	w    *Worker

	viewOnce sync.Once
	view     *Task // task as Task returns it, made once when first asked

	cancel  context.CancelCauseFunc // the handler's context
	endCall context.CancelCauseFunc // the call's context, a batch's too (endCalls)
	lost    atomic.Bool
	// stale is set when this attempt lost its authority to something
	// other than its own timeout (a later claim of the task by this
	// worker, a park in doubt): the worker then settles nothing for it,
	// not even a MaxRun timeout.
	stale    atomic.Bool
	canceled atomic.Bool
	mu       sync.Mutex // serializes settlement
	settled  bool
	// writing counts the settlements of the task being written whose
	// outcome is not recorded yet (see settling).
	writing atomic.Int32
	// added holds the steps the handler added to its workflow
	// (AddSteps), written at its settlement.
	addMu   sync.Mutex
	added   engine.AddedSteps
	refused error // the workflow refused added; the step was failed for it

	// durable holds what this attempt knows of the task's durable steps
	// (Once), made when a step is first run.
	durable atomic.Pointer[durableRun]

	comp      completer.Completer // what the worker settles the task through
	settleCtx context.Context     // the context of the worker's settlement (settle)
}

// ID is the task's id.
func (tc *TaskContext) ID() string { return tc.task.ID }

// Name is the task's name.
func (tc *TaskContext) Name() string { return tc.task.Name }

// Queue is the queue the task came from.
func (tc *TaskContext) Queue() string { return tc.task.Queue }

// Attempt is this attempt's number, from 1.
func (tc *TaskContext) Attempt() int { return tc.task.Attempt }

// Payload is the task's payload as stored.
func (tc *TaskContext) Payload() json.RawMessage { return tc.task.Payload }

// Decode unmarshals the payload into v.
func (tc *TaskContext) Decode(v any) error { return json.Unmarshal(tc.task.Payload, v) }

// Metadata is the task's metadata object as stored.
func (tc *TaskContext) Metadata() json.RawMessage { return tc.task.Metadata }

// MetadataText is the metadata member key as text: a string's value
// unquoted, which is how a GlobalLimit's PerMetadataKey reads a string
// (SQL's ->>), and a number, boolean, object or array as its JSON text as
// stored; ok is false when the member is absent or null, or the metadata
// is no JSON object. A handler reads its tenant so: tenant, _ :=
// tc.MetadataText("tenant").
func (tc *TaskContext) MetadataText(key string) (text string, ok bool) {
	var members map[string]json.RawMessage
	if json.Unmarshal(tc.task.Metadata, &members) != nil {
		return "", false
	}
	raw, found := members[key]
	if !found || string(raw) == "null" {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	return string(raw), true
}

// RootID is the id of the first task of the chain this task belongs to.
func (tc *TaskContext) RootID() string { return tc.task.RootID }

// CorrelationID is the correlation id the task was submitted with.
func (tc *TaskContext) CorrelationID() string { return tc.task.CorrelationID }

// WorkerID is the id of the worker running the task.
func (tc *TaskContext) WorkerID() string { return tc.w.id }

// Task is the task as claimed: a copy made when first asked for, the
// same one on every call. Its payload, metadata and result bytes are the
// worker's own: read them, do not modify them.
func (tc *TaskContext) Task() *Task {
	tc.viewOnce.Do(func() { tc.view = taskOf(tc.task) })
	return tc.view
}

// LostLease reports whether this attempt lost its lease: it expired and
// the task may run elsewhere, or the attempt was abandoned (MaxRun, a
// shutdown past its deadline). Writes through the context then fail.
func (tc *TaskContext) LostLease() bool { return tc.lost.Load() }

// markStale marks tc lost for good (see stale).
func (tc *TaskContext) markStale() {
	tc.stale.Store(true)
	tc.markLost()
}

func (tc *TaskContext) markLost() {
	if tc.lost.CompareAndSwap(false, true) {
		tc.cancel(&LostLeaseError{ID: tc.task.ID})
		tc.w.logTask(context.Background(), slog.LevelWarn, logLeaseLost, tc.task)
	}
}

func (tc *TaskContext) observeCancel(requested bool) {
	if requested && tc.canceled.CompareAndSwap(false, true) {
		tc.cancel(&TaskCanceledError{ID: tc.task.ID})
	}
}

// settling runs a settlement's write and the recording of its outcome,
// counted in writing for its whole length. A heartbeat that finds the task
// no longer running while one is counted has met that settlement, whose
// own outcome decides; the counter drops only after the outcome is
// recorded (settled or lost), so a heartbeat that reads it as zero then
// sees the outcome too.
func (tc *TaskContext) startSettling() { tc.writing.Add(1) }

// doneSettling ends what startSettling began.
func (tc *TaskContext) doneSettling() { tc.writing.Add(-1) }

// missedByBeat handles a heartbeat that found the task no longer running
// under this worker: a lost lease, unless a settlement of the task was
// being written meanwhile or has been recorded.
func (tc *TaskContext) missedByBeat() {
	if tc.writing.Load() > 0 || tc.isSettled() {
		return
	}
	tc.markLost()
}

func (tc *TaskContext) isSettled() bool {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.settled
}

// owned runs one ownership-checked write, short-circuiting when the lease
// is already known lost or the task settled.
func (tc *TaskContext) owned(write func() (*cairnqtype.Task, error)) error {
	if tc.lost.Load() || tc.isSettled() {
		return &LostLeaseError{ID: tc.task.ID}
	}
	t, err := write()
	if err != nil {
		if errIsLostLease(err) {
			tc.markLost()
		}
		return userErr(err)
	}
	tc.observeCancel(t.CancelRequested())
	return nil
}

// Progress records how far the attempt got, as a fraction; the message is kept.
func (tc *TaskContext) Progress(ctx context.Context, fraction float64) error {
	return tc.report(ctx, &fraction, nil)
}

// Message records a progress message; the fraction is kept.
func (tc *TaskContext) Message(ctx context.Context, message string) error {
	return tc.report(ctx, nil, &message)
}

// Report records both a fraction and a message.
func (tc *TaskContext) Report(ctx context.Context, fraction float64, message string) error {
	return tc.report(ctx, &fraction, &message)
}

func (tc *TaskContext) report(ctx context.Context, fraction *float64, message *string) error {
	return tc.owned(func() (*cairnqtype.Task, error) {
		return tc.w.st.Progress(ctx, tc.task.ID, tc.w.id, fraction, message)
	})
}

// Heartbeat extends the lease now. The worker already does this on a
// timer for every running task; call it only around work that must not
// start on a lease about to run out.
func (tc *TaskContext) Heartbeat(ctx context.Context) error {
	return tc.owned(func() (*cairnqtype.Task, error) {
		return tc.w.st.Heartbeat(ctx, tc.task.ID, tc.w.id, tc.w.lease)
	})
}

// Canceled reports whether a cancel was requested for the task. Cancel is
// cooperative: a handler doing long work checks it (or its context, which
// the worker cancels when its heartbeat sees the request) and returns.
func (tc *TaskContext) Canceled(ctx context.Context) (bool, error) {
	if tc.canceled.Load() {
		return true, nil
	}
	t, err := tc.w.st.Get(ctx, tc.task.ID)
	if errIsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	tc.observeCancel(t.CancelRequested())
	return tc.canceled.Load() || t.Status == cairnqtype.StatusCanceled, nil
}

// Succeed settles the task now with result (canceled instead, if a cancel
// was requested). Settling twice is a no-op.
func (tc *TaskContext) Succeed(ctx context.Context, result any) error {
	st := tc.settlement(engine.Succeeded)
	st.Result = result
	if err := tc.settleNow(ctx, st); err != nil {
		return err
	}
	return tc.refusal()
}

// Fail settles the task now as failed with err: queued again with backoff
// when retryable and attempts remain (a *TaskError decides; any other error
// is retryable), failed for good otherwise. Settling twice is a no-op.
func (tc *TaskContext) Fail(ctx context.Context, err error) error {
	env, retryable := envelopeOf(err)
	return tc.settleNow(ctx, tc.failure(env, retryable))
}

func (tc *TaskContext) settle(write func() error) error {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	// Lost first: an attempt abandoned at MaxRun is settled by the worker
	// (handler_timeout), and the handler, still running, must hear that
	// its own settlement was refused, not that it was a repeat.
	if tc.lost.Load() {
		return &LostLeaseError{ID: tc.task.ID}
	}
	if tc.settled {
		return nil
	}
	if err := tc.durableBroken(); err != nil {
		// The attempt's durable steps broke (a changed step): it ends
		// with that failure when the handler returns, not as asked here.
		return err
	}
	tc.startSettling()
	defer tc.doneSettling()
	if err := write(); err != nil {
		if errIsLostLease(err) {
			tc.markLost()
		}
		return userErr(err)
	}
	tc.settled = true
	return nil
}

// Submit submits a child task: its parent is this task, and it inherits
// this task's root and correlation ids unless opts sets them.
func (tc *TaskContext) Submit(ctx context.Context, name string, payload any, opts *SubmitOptions) (*Task, error) {
	o := SubmitOptions{}
	if opts != nil {
		o = *opts
	}
	o.ParentID = tc.task.ID
	if o.RootID == "" {
		o.RootID = tc.task.RootID
	}
	if o.CorrelationID == "" {
		o.CorrelationID = tc.task.CorrelationID
	}
	return tc.w.client.Submit(ctx, name, payload, &o)
}

// Wait waits for another task, as Client.Wait.
func (tc *TaskContext) Wait(ctx context.Context, id string, opts *WaitOptions) (*Task, error) {
	return tc.w.client.Wait(ctx, id, opts)
}

func (tc *TaskContext) markSettled() {
	tc.mu.Lock()
	tc.settled = true
	tc.mu.Unlock()
}
