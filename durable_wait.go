package cairnq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// ErrSuspended is what errors.Is finds in the *SuspendedError Sleep,
// SleepUntil and WaitEvent return when the task was parked.
var ErrSuspended = errors.New("cairnq: task suspended")

// ErrEventRefused is what errors.Is finds in an *EventRefusedError.
var ErrEventRefused = errors.New("cairnq: event refused")

// SuspendedError reports a durable sleep or wait that parked its task:
// the task is queued again, due at Until (or when the event Event
// arrives), with its attempt given back and its worker slot and lease
// released. The handler returns it (or anything: the worker records
// nothing more for this attempt), and a later attempt, on any process,
// replays the recorded steps and goes on from the sleep or the wait.
type SuspendedError struct {
	TaskID string
	Until  time.Time
	Event  string // "" for a sleep
}

func (e *SuspendedError) Error() string {
	if e.Event != "" {
		return fmt.Sprintf("cairnq: task %s waits for event %q until %s", e.TaskID, e.Event, e.Until.Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("cairnq: task %s sleeps until %s", e.TaskID, e.Until.Format(time.RFC3339Nano))
}

// Is reports whether target is ErrSuspended.
func (e *SuspendedError) Is(target error) bool { return target == ErrSuspended }

// EventRefusedError reports an event Client.SendEvent did not deliver:
// the task has ended (Status), an event of that name was delivered
// already (Delivered), or the task's wait for it ended before it came
// (TimedOut). An event counts once per task and name.
type EventRefusedError struct {
	TaskID    string
	Event     string
	Status    Status
	Delivered bool
	TimedOut  bool
}

func (e *EventRefusedError) Error() string {
	switch {
	case e.TimedOut:
		return fmt.Sprintf("cairnq: task %s: event %q refused: its wait timed out", e.TaskID, e.Event)
	case e.Delivered:
		return fmt.Sprintf("cairnq: task %s: event %q refused: it was delivered already (an event counts once)", e.TaskID, e.Event)
	}
	return fmt.Sprintf("cairnq: task %s: event %q refused: the task has ended (%s)", e.TaskID, e.Event, e.Status)
}

// Is reports whether target is ErrEventRefused.
func (e *EventRefusedError) Is(target error) bool { return target == ErrEventRefused }

// SendEvent delivers the event named event, carrying payload (encoded
// as a task's payload is), to task id. A handler waiting for it
// (WaitEvent) is woken at once, on any process; one that waits for it
// later finds it there. An event counts once: a second event of the same
// name, or one sent after the end of the task's recorded wait for it (by
// this process's clock against the worker's), is an *EventRefusedError,
// and so is one sent to a task that has ended. Events may not take the
// task's metadata past MaxValueBytes (ErrValueTooLarge). A task gone is
// ErrNotFound. Nothing is written when it fails.
func (c *Client) SendEvent(ctx context.Context, id, event string, payload any) error {
	return userErr(c.store.SendEvent(ctx, id, event, payload))
}

// SendEventByKey is SendEvent to the task the key names.
func (c *Client) SendEventByKey(ctx context.Context, key, event string, payload any) error {
	return userErr(c.store.SendEventByKey(ctx, key, event, payload))
}

// SendEventTx is SendEvent inside a transaction the application holds,
// through sess (see SubmitTx): the event counts, and its task wakes, only
// if the application commits. Postgres only: on SQLite it returns
// ErrUnsupported.
func (c *Client) SendEventTx(ctx context.Context, sess executor.Session, id, event string, payload any) error {
	return userErr(c.store.SendEventTx(ctx, sess, id, "", event, payload))
}

// SendEventByKeyTx is SendEventTx to the task the key names.
func (c *Client) SendEventByKeyTx(ctx context.Context, sess executor.Session, key, event string, payload any) error {
	return userErr(c.store.SendEventTx(ctx, sess, "", key, event, payload))
}

// Sleep is a durable sleep of d, the step named name of the task tc
// runs. The first time a handler reaches it, the end of the sleep is
// recorded and the task is parked: queued again, due then, its attempt
// given back, its worker slot and lease released, and Sleep returns a
// *SuspendedError for the handler to return. A later attempt, on any
// process, replays the steps before it (Once) and goes on from here:
// Sleep returns nil once the recorded end has passed. The sleep ends
// where it was recorded, whatever d a later attempt passes. A cancel of
// the parked task ends it at once, as of any queued task.
//
//	if err := cairnq.Sleep(ctx, tc, "cool-off", 24*time.Hour); err != nil {
//		return nil, err
//	}
//
// A sleep is a step: it takes its place among the task's steps, by name
// and order, as Once's do. A negative d is an *ArgumentError.
func Sleep(ctx context.Context, tc *TaskContext, name string, d time.Duration) error {
	if d < 0 || d > maxPark {
		return &ArgumentError{Op: "durable sleep", Arg: "d", Reason: fmt.Sprintf("must be between 0 and 100 years, got %v", d)}
	}
	return SleepUntil(ctx, tc, name, time.Now().Add(d))
}

// SleepUntil is Sleep until t.
func SleepUntil(ctx context.Context, tc *TaskContext, name string, t time.Time) error {
	_, err := tc.park(ctx, name, engine.StepSleep, t)
	return err
}

// EventResult is what WaitEvent returns: the event's payload and when it
// arrived, or, TimedOut, that the wait ran out first.
type EventResult[T any] struct {
	Payload  T
	At       time.Time
	TimedOut bool
}

// WaitEvent waits, durably, for the event named name to be sent to the
// task tc runs (Client.SendEvent), for at most timeout. It is a step of
// the task named name: the first time a handler reaches it without the
// event there, the wait is recorded and the task is parked, as Sleep
// parks it, until the event arrives (which wakes it at once, on any
// process) or the timeout passes; WaitEvent then returns a
// *SuspendedError for the handler to return. A later attempt replays
// the steps before it and gets the event: its payload decoded into T, or
// TimedOut when the timeout passed first, a value to act on:
//
//	ok, err := cairnq.WaitEvent[Approval](ctx, tc, "approval", 48*time.Hour)
//	if err != nil {
//		return nil, err
//	}
//	if ok.TimedOut {
//		// refund
//	}
//
// An event sent before the wait begins is kept and returned at once.
// What a wait returns is decided once, and every later attempt gets the
// same outcome: an event sent after the recorded wait's end is refused to
// its sender, and a wait found past its end writes a timeout in the
// event's place. An event's name holds no double quote, backslash or
// control character, and a timeout is at most 100 years (an
// *ArgumentError otherwise).
func WaitEvent[T any](ctx context.Context, tc *TaskContext, name string, timeout time.Duration) (ev EventResult[T], err error) {
	if timeout < 0 || timeout > maxPark {
		return ev, &ArgumentError{Op: "durable wait", Arg: "timeout", Reason: fmt.Sprintf("must be between 0 and 100 years, got %v", timeout)}
	}
	if err := engine.ValidateEvent("durable wait", name); err != nil {
		return ev, userErr(err)
	}
	got, err := tc.park(ctx, name, engine.StepWait, time.Now().Add(timeout))
	if err != nil {
		return ev, err
	}
	ev.At, ev.TimedOut = time.UnixMilli(got.AtMs), got.TimedOut
	if !got.TimedOut && len(got.Payload) > 0 {
		if err := json.Unmarshal(got.Payload, &ev.Payload); err != nil {
			return ev, tc.durableSteps().fail(&TaskError{Type: "DurableDecode", Code: "durable_decode", Err: err,
				Message: fmt.Sprintf("cairnq: task %s: event %q: its payload does not decode into %T: %v", tc.task.ID, name, ev.Payload, err)})
		}
	}
	return ev, nil
}

// park runs the sleep or wait (kind) named name, ending at until unless
// an earlier attempt recorded its end: recorded first if it is new, then
// passed when its end has come (a wait's: the event, or the mark of its
// timeout), or else the task parked and a *SuspendedError returned.
func (tc *TaskContext) park(ctx context.Context, name, kind string, until time.Time) (*engine.DurableEvent, error) {
	if tc.lost.Load() || tc.isSettled() {
		return nil, &LostLeaseError{ID: tc.task.ID}
	}
	if err := engine.ValidateStepName("durable "+kind, name); err != nil {
		return nil, userErr(err)
	}
	if err := checkPark("durable "+kind, until); err != nil {
		return nil, err
	}
	d := tc.durableSteps()
	pos, recorded, err := d.begin(tc, name, kind)
	if err != nil {
		return nil, err
	}
	if recorded == nil {
		step := &engine.DurableStep{Name: name, Kind: kind, Output: json.RawMessage("null"),
			AtMs: time.Now().UnixMilli(), UntilMs: until.UnixMilli()}
		err := tc.writeStep(ctx, d, pos, step)
		if err != nil {
			step = nil
		}
		d.end(step)
		if err != nil {
			return nil, err
		}
		recorded = step
	}
	return tc.resume(ctx, d, *recorded)
}

// resume goes on from a recorded sleep or wait: its end, or the task
// parked until then.
func (tc *TaskContext) resume(ctx context.Context, d *durableRun, step engine.DurableStep) (*engine.DurableEvent, error) {
	wait := step.Kind == engine.StepWait
	if ev, ok := d.event(step.Name); wait && ok {
		return &ev, nil
	}
	now := time.Now().UnixMilli()
	if now >= step.UntilMs {
		if !wait {
			return nil, nil
		}
		if tc.lost.Load() || tc.isSettled() {
			return nil, &LostLeaseError{ID: tc.task.ID}
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tc.w.lease)
		defer cancel()
		ev, err := tc.w.st.TimeOutWait(wctx, tc.task.ID, step.Name)
		if err != nil {
			return nil, userErr(err)
		}
		d.addEvent(step.Name, ev)
		return &ev, nil
	}
	st := tc.settlement(engine.Snoozed)
	st.Delay = time.Duration(min(step.UntilMs-now, maxParkMs)) * time.Millisecond
	if wait {
		st.Event = step.Name
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tc.w.lease)
	defer cancel()
	out, err := tc.settleNowOut(wctx, st)
	var arrived *engine.EventArrivedError
	switch {
	case errors.As(err, &arrived):
		d.addEvent(step.Name, arrived.Event)
		return &arrived.Event, nil
	case err != nil && !errIsLostLease(err) && !errors.Is(err, ErrInvalidArgument):
		return nil, tc.parkInDoubt(err)
	case err != nil:
		return nil, err
	case out.Status == cairnqtype.StatusCanceled: // a cancel requested while the attempt ran won
		return nil, &TaskCanceledError{ID: tc.task.ID}
	}
	return nil, &SuspendedError{TaskID: tc.task.ID, Until: time.UnixMilli(step.UntilMs), Event: st.Event}
}

// parkInDoubt handles a park whose write failed without saying whether
// it committed (its answer lost). The row cannot tell: once parked, the
// task may already be claimed again by this worker, whose claim has the
// same worker id and attempt number as this attempt. So the attempt
// stops writing, and the worker settles nothing for it: parked, the task
// runs on; not parked, its lease runs out and lease recovery requeues it
// (spending an attempt, and failing it when none is left).
func (tc *TaskContext) parkInDoubt(err error) error {
	tc.markStale()
	return err
}

// maxPark bounds how far ahead a sleep or a wait may end: a time.Duration
// holds about 292 years, and a park's delay is one.
const (
	maxPark   = 100 * 365 * 24 * time.Hour
	maxParkMs = int64(maxPark / time.Millisecond)
)

// checkPark refuses a sleep or wait whose end is past maxPark from now.
func checkPark(op string, until time.Time) error {
	if d := time.Until(until); d > maxPark {
		return &ArgumentError{Op: op, Arg: "until", Reason: fmt.Sprintf("is %v from now, past the 100 years a park may last", d.Round(time.Hour))}
	}
	return nil
}
