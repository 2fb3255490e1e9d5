package cairnq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// Once runs fn as the durable step named name of the task tc runs, and
// returns its output. The output is recorded in the task's own row when
// fn returns, and a later attempt of the task (after a failure, a crash,
// a recovered lease, on any process) gets the recorded output back,
// decoded from its JSON, without running fn again. fn runs again only
// where no record of it committed: when fn failed (its error is the
// handler's to return, and the task is retried per its attempts), and
// when the attempt ended between fn's return and its record's commit (a
// crash, a lost lease, the database out of reach). So give fn's side
// effects a key of their own where the system they touch takes one
// (tc.ID() and name make one), and a step runs at most once to success.
//
// Steps are matched by the order the handler calls them in: the n-th
// call of an attempt replays the n-th step recorded. So a handler must
// call the same steps, in the same order, on every attempt up to where
// it stopped, deciding what to call only from its payload and from what
// earlier steps returned: not from the clock, from a read outside a
// step, or from a step that failed (a failed step records nothing, and a
// step called after it would take its place; end the attempt instead).
// An attempt whose step at some position has another name than the one
// recorded fails the task for good with a *DurableMismatchError naming
// the position and both names (a deployment changed the handler's steps
// under a live task), whatever the handler does with the error, and so
// does metadata whose member cannot be read. To change a handler's steps
// while tasks of it are live, register the new code under a new task
// name (say "checkout.v2") and keep the old handler until its tasks have
// ended. The steps are this SDK's: a TypeScript or Python worker serving
// the same name would run its handler from the top.
//
// A name is used once per attempt, and steps run one at a time: Once
// called while another step of the task runs is an *ArgumentError. Once
// after the lease was lost or the task settled returns a
// *LostLeaseError without running fn. The output is stored as JSON (T
// must encode and decode through encoding/json; a replay returns the
// JSON's decoding, not fn's value itself) in the cairnq_durable member
// of the task's metadata (docs/plans/durable-execution.md has the
// format), and the metadata with every step's output stays within
// MaxValueBytes.
//
// A StepPolicy given after fn retries fn's errors within the attempt
// before the handler sees one (the last); without one, fn runs once per
// attempt and the task's own attempts retry it.
func Once[T any](ctx context.Context, tc *TaskContext, name string, fn func(ctx context.Context) (T, error), policy ...StepPolicy) (out T, err error) {
	if tc.lost.Load() || tc.isSettled() {
		return out, &LostLeaseError{ID: tc.task.ID}
	}
	if err := engine.ValidateStepName("durable step", name); err != nil {
		return out, userErr(err) // before fn runs: a name the record refuses would leave fn's effect unrecorded
	}
	p, err := stepPolicyOf(policy)
	if err != nil {
		return out, err
	}
	d := tc.durableSteps()
	pos, recorded, err := d.begin(tc, name, "")
	if err != nil {
		return out, err
	}
	if recorded != nil {
		if err := json.Unmarshal(recorded.Output, &out); err != nil {
			return out, d.fail(&TaskError{Type: "DurableDecode", Code: "durable_decode", Err: err,
				Message: fmt.Sprintf("cairnq: task %s: durable step %q: its recorded output does not decode into %T: %v", tc.task.ID, name, out, err)})
		}
		return out, nil
	}
	var step *engine.DurableStep
	defer func() { d.end(step) }() // also when fn panics or exits its goroutine
	start := time.Now()
	run := func(ctx context.Context) (err error) {
		out, err = fn(ctx)
		return err
	}
	if mws := tc.w.opts.DurableStepMiddleware; len(mws) > 0 {
		run = chainDurableSteps(mws, &DurableStepCall{Task: tc, Name: name, Position: pos}, run)
	}
	if err = p.run(ctx, run); err != nil {
		return out, err
	}
	if step, err = tc.recordStep(ctx, d, pos, name, out, start); err != nil {
		step = nil
	}
	return out, err
}

// StepPolicy retries a durable step's function within its attempt (see
// Once): an error is retried after Backoff, doubled each time up to
// MaxBackoff, until fn has run Attempts times; the last error then goes
// to the handler. An error that is not retryable (Permanent, a
// *TaskError whose Retryable is false) and the end of the handler's
// context stop the retries at once.
type StepPolicy struct {
	// Attempts is how many times fn runs at most within one attempt of
	// the task: at least 1 (0 means 1).
	Attempts int
	// Backoff is the wait before fn's second run (default 100ms);
	// MaxBackoff bounds its doubling (default 30s).
	Backoff, MaxBackoff time.Duration
}

// stepPolicyOf is the one policy Once was given, checked, with its
// defaults.
func stepPolicyOf(policy []StepPolicy) (StepPolicy, error) {
	var p StepPolicy
	switch len(policy) {
	case 0:
	case 1:
		p = policy[0]
	default:
		return p, &ArgumentError{Op: "durable step", Arg: "policy", Reason: fmt.Sprintf("%d given, at most 1", len(policy))}
	}
	switch {
	case p.Attempts < 0:
		return p, &ArgumentError{Op: "durable step", Arg: "StepPolicy.Attempts", Reason: fmt.Sprintf("must be >= 0, got %d", p.Attempts)}
	case p.Backoff < 0 || p.MaxBackoff < 0:
		return p, &ArgumentError{Op: "durable step", Arg: "StepPolicy.Backoff", Reason: "a backoff must be >= 0"}
	}
	p.Attempts = max(p.Attempts, 1)
	if p.Backoff == 0 {
		p.Backoff = 100 * time.Millisecond
	}
	if p.MaxBackoff == 0 {
		p.MaxBackoff = 30 * time.Second
	}
	return p, nil
}

// run runs fn until it succeeds, fails for good, or has run p.Attempts
// times, waiting the backoff between runs.
func (p StepPolicy) run(ctx context.Context, fn func(ctx context.Context) error) error {
	wait := p.Backoff
	for n := 1; ; n++ {
		err := fn(ctx)
		if err == nil || n >= p.Attempts {
			return err
		}
		if _, retryable := envelopeOf(err); !retryable || !sleepCtx(ctx, wait) {
			return err
		}
		wait = min(2*wait, p.MaxBackoff)
	}
}

// recordStep writes a step that returned out, started at start, as the
// pos-th of tc's task, past the handler's context (its side effect is
// done: a cancel must not lose its record) but within the lease.
func (tc *TaskContext) recordStep(ctx context.Context, d *durableRun, pos int, name string, out any, start time.Time) (*engine.DurableStep, error) {
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, &SerializationError{Field: "result", Err: err}
	}
	step := &engine.DurableStep{Name: name, Output: raw, AtMs: time.Now().UnixMilli(), TookMs: time.Since(start).Milliseconds()}
	if err := tc.writeStep(ctx, d, pos, step); err != nil {
		return nil, err
	}
	return step, nil
}

// writeStep writes step as the pos-th of tc's task, past the handler's
// context but within the lease, after checking that the metadata keeps
// within MaxValueBytes with it.
func (tc *TaskContext) writeStep(ctx context.Context, d *durableRun, pos int, step *engine.DurableStep) error {
	if size := d.size + len(step.Output) + len(step.Name) + durableEntryBytes; size > MaxValueBytes {
		return &SerializationError{Field: "metadata", Err: fmt.Errorf(
			"%w: durable step %q would make the task's metadata %d bytes, past MaxValueBytes", ErrValueTooLarge, step.Name, size)}
	}
	if tc.lost.Load() || tc.isSettled() {
		return &LostLeaseError{ID: tc.task.ID}
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tc.w.lease)
	defer cancel()
	err := tc.writeRecord(wctx, pos, step)
	var fe *engine.DurableFormatError
	switch {
	case err == nil:
		return nil
	case errIsLostLease(err):
		tc.markLost()
	case errors.As(err, &fe):
		err = d.fail(&TaskError{Type: "DurableFormat", Code: "durable_format", Err: userErr(err), Message: err.Error()})
	case !errors.Is(err, cairnqtype.ErrInvalidArgument): // an input refused writes nothing; this may have
		// Whether the record committed is still unknown after the tries
		// the lease allowed: a step run again in this attempt could
		// repeat its effect, or use another output than the one a later
		// attempt replays. The attempt ends (retryably), and the next one
		// reads the record.
		return d.fail(fmt.Errorf("cairnq: task %s: durable step %q: its record is in doubt, so the attempt ends: %w",
			tc.task.ID, step.Name, userErr(err)))
	}
	return userErr(err)
}

// writeRecord writes step's record, trying again while ctx (the lease)
// lasts when a try fails without saying whether it committed: the same
// record again at the same position is appended at most once, and a try
// that finds it appended by this attempt is a success (RecordStep), so
// fn need not run again.
func (tc *TaskContext) writeRecord(ctx context.Context, pos int, step *engine.DurableStep) error {
	wait := 50 * time.Millisecond
	for {
		err := tc.w.st.RecordStep(ctx, tc.task.ID, tc.w.id, tc.task.Attempt, pos, *step, &tc.w.rowsMu)
		var fe *engine.DurableFormatError
		if err == nil || errIsLostLease(err) || errors.As(err, &fe) || errors.Is(err, cairnqtype.ErrInvalidArgument) ||
			tc.lost.Load() || tc.isSettled() || !sleepCtx(ctx, wait) {
			return err
		}
		wait = min(2*wait, time.Second)
	}
}

// durableEntryBytes bounds what a step's record adds to the metadata
// besides its name and output: the field names, the times, the attempt.
const durableEntryBytes = 128

// DurableMismatchError reports an attempt whose durable steps differ
// from those recorded for its task, at Position (0-based): Recorded is
// the step recorded there, Called the one this attempt called. The task
// fails for good: running new steps against old records could repeat or
// skip side effects.
type DurableMismatchError struct {
	TaskID   string
	Position int
	Recorded string
	Called   string
}

func (e *DurableMismatchError) Error() string {
	return fmt.Sprintf("cairnq: task %s: durable step %d is %q in this attempt, but %q was recorded there: "+
		"the handler's steps changed under a live task (give changed steps a new task name)",
		e.TaskID, e.Position, e.Called, e.Recorded)
}

// DurableFormatError reports a task whose durable record this SDK
// cannot read or append to: metadata that is not a JSON object, or a
// cairnq_durable member that is not format 1's (another SDK's, a newer
// format, a hand-made one). A step that meets one fails its task for
// good: running the steps again could repeat their effects.
type DurableFormatError struct {
	TaskID string
	Reason string
}

func (e *DurableFormatError) Error() string {
	return (*engine.DurableFormatError)(e).Error()
}

// durableRun is what one attempt knows of its task's durable steps: the
// steps recorded (those the claim read, then those this attempt added),
// the next position, the names used, and the error that broke it.
type durableRun struct {
	mu      sync.Mutex
	steps   []engine.DurableStep
	events  map[string]engine.DurableEvent // those the claim read, then those this attempt met
	size    int                            // the metadata's bytes, as claimed and with the steps added
	next    int
	used    map[string]bool
	running string // the step whose fn runs, "" when none
	broken  error  // the failure every later step returns, and the attempt ends with
}

// durableSteps is tc's durableRun, read from the claimed row when first
// asked for. Steps run one at a time, so two first calls at once are a
// misuse begin refuses; the pointer's swap keeps even those to one run.
func (tc *TaskContext) durableSteps() *durableRun {
	if d := tc.durable.Load(); d != nil {
		return d
	}
	d := &durableRun{used: map[string]bool{}, size: len(tc.task.Metadata)}
	rec, err := engine.ReadDurable(tc.task)
	if err != nil {
		d.broken = &TaskError{Type: "DurableFormat", Code: "durable_format", Err: err, Message: err.Error()}
	}
	d.steps, d.events = rec.Steps, rec.Events
	if !tc.durable.CompareAndSwap(nil, d) {
		return tc.durable.Load()
	}
	return d
}

// begin starts the step name of kind (a plain step's is "") at the next
// position: recorded is its record when an earlier attempt recorded it
// (a plain step is then done).
func (d *durableRun) begin(tc *TaskContext, name, kind string) (pos int, recorded *engine.DurableStep, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.broken != nil:
		return 0, nil, d.broken
	case d.running != "":
		return 0, nil, &ArgumentError{Op: "durable step", Arg: "name", Reason: fmt.Sprintf(
			"%q started while step %q runs: a task's steps run one at a time and do not nest", name, d.running)}
	case d.used[name]:
		return 0, nil, &ArgumentError{Op: "durable step", Arg: "name", Reason: fmt.Sprintf(
			"%q was used already in this attempt: each step of a task needs a name of its own", name)}
	}
	pos = d.next
	if pos < len(d.steps) {
		if rec := d.steps[pos]; rec.Name != name || rec.Kind != kind {
			mismatch := &DurableMismatchError{TaskID: tc.task.ID, Position: pos,
				Recorded: stepLabel(rec.Name, rec.Kind), Called: stepLabel(name, kind)}
			d.broken = &TaskError{Type: "DurableMismatch", Code: "durable_mismatch", Err: mismatch, Message: mismatch.Error(),
				Details: map[string]any{"position": pos, "recorded": mismatch.Recorded, "called": mismatch.Called}}
			return 0, nil, d.broken
		}
		d.used[name] = true
		d.next++
		return pos, &d.steps[pos], nil
	}
	d.running = name
	return pos, nil, nil
}

// end ends the step begin started: recorded, or (nil) not.
func (d *durableRun) end(recorded *engine.DurableStep) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if recorded != nil {
		d.steps = append(d.steps, *recorded)
		d.used[recorded.Name] = true
		d.size += len(recorded.Output) + len(recorded.Name) + durableEntryBytes
		d.next++
	}
	d.running = ""
}

// stepLabel names a step in a mismatch: a sleep or a wait by its kind
// and name, a plain step by its name.
func stepLabel(name, kind string) string {
	if kind == "" {
		return name
	}
	return kind + " " + name
}

// event is the event name as this attempt knows it, if it arrived.
func (d *durableRun) event(name string) (engine.DurableEvent, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ev, ok := d.events[name]
	return ev, ok
}

// addEvent records that the event name arrived as ev (or timed out).
func (d *durableRun) addEvent(name string, ev engine.DurableEvent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.events == nil {
		d.events = map[string]engine.DurableEvent{}
	}
	d.events[name] = ev
}

// fail breaks the run with err, which every later step returns and the
// attempt ends with.
func (d *durableRun) fail(err error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.broken = err
	return err
}

// durableBroken is the failure that broke tc's durable steps, if any: the
// attempt ends with it even when the handler returned success (for good
// when it is not retryable, as a changed step's is).
func (tc *TaskContext) durableBroken() error {
	d := tc.durable.Load()
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.broken
}
