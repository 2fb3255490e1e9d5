package cairnq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/workflowspec"
)

// WorkflowName is the name and the queue of every workflow's record task.
// The SDK's workers sweep it themselves; registering a handler for it is
// an *ArgumentError.
const WorkflowName = engine.WorkflowName

// WorkflowStep is one step of a workflow: an ordinary task (Submit's
// name, payload and options) that is submitted once every step named in
// After has succeeded. Its handler reads their results with StepResult.
type WorkflowStep struct {
	// Step names the step within its workflow: non-empty, unique, at
	// most 200 bytes, without ':'.
	Step string
	// Task is the task's name: the handler that runs the step.
	Task    string
	Payload any
	// Options are Submit's, but for Key, Conflict, ParentID and RootID,
	// which the workflow sets (naming one is an *ArgumentError): the
	// step's key is StepKey(workflow, step), its parent and root the
	// workflow's record.
	Options *SubmitOptions
	// After names the steps this one waits for.
	After []string
}

// Step returns the WorkflowStep named step that runs d with payload p
// once every step of after has succeeded.
func (d TaskDef[P, R]) Step(step string, p P, opts *SubmitOptions, after ...string) WorkflowStep {
	return WorkflowStep{Step: step, Task: d.Name, Payload: p, Options: opts, After: after}
}

// WorkflowOptions are a workflow's own options.
type WorkflowOptions struct {
	// ContinueOnFailure lets the steps that do not wait on a step that
	// failed for good run on; the workflow fails once nothing more can
	// run. By default the first such failure cancels the steps not
	// finished (running ones are asked to stop) and fails the workflow.
	ContinueOnFailure bool
	// Metadata and CorrelationID are the record task's.
	Metadata      any
	CorrelationID string
}

// SubmitWorkflow submits a workflow: its record task (named WorkflowName,
// returned) and the steps that wait for nothing, in one transaction. Each
// other step is submitted, exactly once, when every step it waits for has
// succeeded: by the Go worker that settles the last of them, in that
// settlement's transaction, or else by a Go worker's sweep of the record
// (a step settled by another SDK's worker, or failed by lease recovery).
//
// Wait on the record's id returns the workflow's outcome: succeeded once
// every step has, failed (a *TaskFailedError from Call, its envelope's
// Type "WorkflowFailed" naming the steps that did not succeed) when one
// failed for good, canceled when the workflow was. GetWorkflow lists its
// steps.
//
// A bad step (input Submit would refuse, a name used twice, an After
// naming no step, a cycle) is an *ArgumentError naming it, and nothing is
// written. The client's SubmitHooks and queue gates do not apply to
// workflows: the steps are written by whichever process advances the
// workflow.
func (c *Client) SubmitWorkflow(ctx context.Context, steps []WorkflowStep, opts *WorkflowOptions) (*Task, error) {
	if err := checkCtx(ctx, "submit workflow"); err != nil {
		return nil, err
	}
	p, err := workflowParams(steps, opts)
	if err != nil {
		return nil, err
	}
	return taskResult(c.store.SubmitWorkflow(ctx, p))
}

// SubmitWorkflowTx is SubmitWorkflow inside a transaction the application
// holds, through sess (as SubmitTx): the workflow exists once the
// application commits, and not at all if it rolls back. Postgres only: on
// SQLite it returns ErrUnsupported.
func (c *Client) SubmitWorkflowTx(ctx context.Context, sess executor.Session, steps []WorkflowStep, opts *WorkflowOptions) (*Task, error) {
	if err := checkCtx(ctx, "submit workflow"); err != nil {
		return nil, err
	}
	p, err := workflowParams(steps, opts)
	if err != nil {
		return nil, err
	}
	return taskResult(c.store.SubmitWorkflowTx(ctx, sess, p))
}

// workflowParams checks steps and opts and builds what the engine
// submits.
func workflowParams(steps []WorkflowStep, opts *WorkflowOptions) (engine.WorkflowParams, error) {
	if opts == nil {
		opts = &WorkflowOptions{}
	}
	policy := workflowspec.CancelRest
	if opts.ContinueOnFailure {
		policy = workflowspec.ContinueBranches
	}
	specs, err := stepSpecs("submit workflow", steps)
	if err != nil {
		return engine.WorkflowParams{}, err
	}
	def, err := engine.NewDefinition("submit workflow", policy, specs)
	if err != nil {
		return engine.WorkflowParams{}, err
	}
	return engine.WorkflowParams{Def: def, Metadata: opts.Metadata, CorrelationID: opts.CorrelationID}, nil
}

// stepSpecs turns the user's steps into the engine's.
func stepSpecs(op string, steps []WorkflowStep) ([]engine.StepSpec, error) {
	if len(steps) == 0 {
		return nil, &ArgumentError{Op: op, Arg: "steps", Reason: "none given"}
	}
	out := make([]engine.StepSpec, len(steps))
	for i, s := range steps {
		out[i] = engine.StepSpec{Step: s.Step, Task: s.Task, Payload: s.Payload, After: s.After}
		if s.Options != nil {
			out[i].Options = s.Options.row()
		}
	}
	return out, nil
}

// StepKey is the key of a workflow's step's task: "cairnq:workflow:",
// the record's id, ":" and the step's name. Step names hold no ':', so a
// key splits at its last colon. Any process, in any SDK, inserting a
// step under its key with the reject strategy inserts it at most once;
// the record's ledger keeps a step whose row retention purged from being
// inserted again. The record's own key is StepKey(workflow, "").
func StepKey(workflow, step string) string { return workflowspec.StepKey(workflow, step) }

// StepState is where a step of a workflow stands: a task's status once
// its task exists, StepWaiting before, StepSkipped when the workflow
// ended without it.
type StepState string

// The states of a step besides a task's statuses.
const (
	// StepWaiting: a step it waits for has not succeeded yet.
	StepWaiting StepState = "waiting"
	// StepSkipped: the workflow ended before the step could run.
	StepSkipped StepState = "skipped"
	// StepLost: the step's task is gone (purged or deleted) and nothing
	// the workflow keeps says how it ended (its ledger, the steps
	// submitted after it, its succeeded key); its outcome is unknown and
	// counts as a failure.
	StepLost StepState = "lost"
)

// WorkflowStepState is one step as GetWorkflow reads it.
type WorkflowStepState struct {
	Step  string
	Task  string
	After []string
	// State is the step's task's status, or StepWaiting, StepSkipped or
	// StepLost.
	State StepState
	// TaskID and Attempt are the step's task's, once it exists.
	TaskID  string
	Attempt int
}

// MarshalJSON writes s as the CLI and the console show a step: {"step",
// "task", "after" (an array, empty for none), "state", "task_id" (null
// before the step's task exists), "attempt"}.
func (s WorkflowStepState) MarshalJSON() ([]byte, error) {
	out := struct {
		Step    string    `json:"step"`
		Task    string    `json:"task"`
		After   []string  `json:"after"`
		State   StepState `json:"state"`
		TaskID  *string   `json:"task_id"`
		Attempt int       `json:"attempt"`
	}{Step: s.Step, Task: s.Task, After: s.After, State: s.State, Attempt: s.Attempt}
	if out.After == nil {
		out.After = []string{}
	}
	if s.TaskID != "" {
		out.TaskID = &s.TaskID
	}
	return json.Marshal(out)
}

// Workflow is a workflow as GetWorkflow reads it.
type Workflow struct {
	// ID is the record task's id, which Wait, CancelWorkflow and
	// RetryWorkflow take (Cancel on it cancels the workflow too).
	ID string
	// Status is the workflow's: StatusRunning until it ends (its record
	// is queued between checks and running while one checks it), then
	// the record's terminal status.
	Status Status
	// ContinueOnFailure is the workflow's failure policy.
	ContinueOnFailure bool
	// Steps are in the order they were defined, the steps added while
	// the workflow ran after.
	Steps []WorkflowStepState
	// Record is the record task as read.
	Record *Task
}

// GetWorkflow reads the workflow whose record is id: ErrNotFound when no
// task has that id, an *ArgumentError when that task is not a workflow's
// record, and an error naming the reason when its definition is not one
// this SDK reads (a newer format).
func (c *Client) GetWorkflow(ctx context.Context, id string) (*Workflow, error) {
	if err := checkCtx(ctx, "get workflow"); err != nil {
		return nil, err
	}
	st, err := c.store.GetWorkflow(ctx, id)
	if err != nil {
		return nil, userErr(err)
	}
	if st.DefErr != nil {
		return nil, fmt.Errorf("cairnq: workflow %s: %w", id, st.DefErr)
	}
	wf := &Workflow{ID: id, Status: Status(st.Record.Status), Record: taskOf(st.Record),
		ContinueOnFailure: st.Def.OnFailure == workflowspec.ContinueBranches}
	if !wf.Status.IsTerminal() {
		wf.Status = StatusRunning
	}
	rows := make(map[string]engine.StepRow, len(st.Steps))
	for _, r := range st.Steps {
		rows[r.Step] = r
	}
	for _, s := range st.Def.Steps {
		ss := WorkflowStepState{Step: s.Step, Task: s.Task, After: slices.Clone(s.After)}
		r, ok := rows[s.Step]
		seen, inLedger := st.Seen[s.Step]
		switch {
		case ok:
			ss.State, ss.TaskID, ss.Attempt = StepState(r.Status), r.ID, r.Attempt
		case inLedger && (seen == workflowspec.Queued || seen == workflowspec.Running):
			ss.State = StepLost
		case inLedger:
			ss.State = StepState(seen) // finished, and its row purged since
		case wf.Status.IsTerminal():
			ss.State = StepSkipped
		default:
			ss.State = StepWaiting
		}
		wf.Steps = append(wf.Steps, ss)
	}
	return wf, nil
}

// StepResult decodes into an R the result of the step named step of the
// workflow tc's task is a step of: a step it waits for, which has
// succeeded. It fails when tc's task is not a workflow's step, when the
// workflow has no succeeded step of that name, or when the result is not
// an R.
func StepResult[R any](ctx context.Context, tc *TaskContext, step string) (R, error) {
	var r R
	raw, err := tc.StepResult(ctx, step)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("cairnq: decoding the result of step %q as %T: %w", step, r, err)
	}
	return r, nil
}

// StepResult returns the result, as stored, of the step named step of
// the workflow tc's task is a step of (see the generic StepResult).
func (tc *TaskContext) StepResult(ctx context.Context, step string) (json.RawMessage, error) {
	mark, ok := engine.StepMarkOf(tc.task)
	if !ok {
		return nil, &ArgumentError{Op: "step result", Arg: "task", Reason: fmt.Sprintf("task %s is not a step of a workflow", tc.task.ID)}
	}
	id, ok := mark.After[step]
	if !ok || id == "" {
		t, err := tc.w.st.GetByKey(ctx, StepKey(mark.Record, step))
		if err != nil {
			return nil, fmt.Errorf("cairnq: step %q of workflow %s: %w", step, mark.Record, err)
		}
		id = t.ID
	}
	t, err := tc.w.st.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("cairnq: step %q of workflow %s (task %s): %w", step, mark.Record, id, err)
	}
	if t.Status != cairnqtype.StatusSucceeded {
		return nil, fmt.Errorf("cairnq: step %q of workflow %s (task %s) is %s, not succeeded", step, mark.Record, id, t.Status)
	}
	return t.Result, nil
}

// AddSteps adds steps to the workflow tc's task is a step of, while it
// runs: one per item of a list, say, and a step that waits for all of
// them. Each added step waits for tc's step (added to its After if
// absent) and may wait for other added steps and for steps already in
// the workflow; nothing already in the workflow can wait for it. The
// steps are written into the workflow when tc's step succeeds, in its
// settlement's transaction, and only then: an attempt that fails adds
// nothing, and its retry adds again.
//
// What can be refused without reading the workflow is an *ArgumentError
// now, and adds nothing: a task that is no workflow's step, steps added
// once tc has settled, and steps bad on their own or together with those
// tc added before, as SubmitWorkflow checks them (a name, a task, a name
// used twice, a cycle among them, more than the 10,000 steps a workflow
// may hold). Steps that do not fit the workflow as it stands at the
// settlement (a name the workflow has, an After naming no step of it,
// more steps in all than it may hold) fail tc's step for good, with the
// envelope type "InvalidSteps" (and TaskContext.Succeed returns an error
// wrapping the *ArgumentError). Add steps before the handler settles
// (returns, or calls Succeed): steps added while a settlement is being
// written may be lost.
func (tc *TaskContext) AddSteps(steps ...WorkflowStep) error {
	const op = "add steps"
	mark, ok := engine.StepMarkOf(tc.task)
	if !ok {
		return &ArgumentError{Op: op, Arg: "task", Reason: fmt.Sprintf("task %s is not a step of a workflow", tc.task.ID)}
	}
	specs, err := stepSpecs(op, steps)
	if err != nil {
		return err
	}
	add, err := engine.SpecSteps(op, specs)
	if err != nil {
		return err
	}
	if tc.isSettled() {
		return &ArgumentError{Op: op, Arg: "task", Reason: fmt.Sprintf("step %s has settled; steps added now would be lost", tc.task.ID)}
	}
	tc.addMu.Lock()
	defer tc.addMu.Unlock()
	return tc.added.Add(op, mark.Step, add)
}

// refuse records that the workflow refused the steps tc added, for
// Succeed to return: the step has been failed for it.
func (tc *TaskContext) refuse(err error) {
	tc.addMu.Lock()
	defer tc.addMu.Unlock()
	tc.refused = err
}

// refusal is what refuse recorded, nil if nothing.
func (tc *TaskContext) refusal() error {
	tc.addMu.Lock()
	defer tc.addMu.Unlock()
	return tc.refused
}

// addedSteps are the steps tc's handler added to its workflow, nil for
// none.
func (tc *TaskContext) addedSteps() []workflowspec.Step {
	tc.addMu.Lock()
	defer tc.addMu.Unlock()
	return slices.Clone(tc.added.Steps)
}

// CancelWorkflow cancels the workflow whose record is id: the record, its
// queued steps at once, and its running steps by asking them to stop (a
// handler sees its context canceled at its next heartbeat). A workflow
// that has ended is left as it is. It returns the record as left;
// ErrNotFound when there is no such task, an *ArgumentError when the task
// is not a workflow's record.
func (c *Client) CancelWorkflow(ctx context.Context, id string) (*Task, error) {
	if err := checkCtx(ctx, "cancel workflow"); err != nil {
		return nil, err
	}
	return taskResult(c.store.CancelWorkflow(ctx, id))
}

// RetryWorkflow resumes a failed or canceled workflow: its failed and
// canceled steps run again (their attempts counted from zero), the
// steps that never ran are submitted as what they wait for succeeds, and
// the steps that succeeded are not run again. A workflow that has not
// ended is an *ArgumentError. Another SDK's retry of the record resumes
// the workflow the same way, at a Go worker's next sweep, when the
// workflow ended through a Go process (a record canceled by another
// SDK's plain cancel is failed again instead: nothing said it ended).
//
// A plain retry of a failed workflow's step ([Client.Retry] or
// RetryByKey, or another SDK's retry) resumes the workflow too, from
// that step: by default (the first failure stopped every branch) as
// RetryWorkflow does, every step that did not succeed running again;
// with ContinueOnFailure only the retried step's branch goes on, and a
// step still failed keeps the workflow failed unless it is retried too.
// Client.Retry revives the workflow at once; another SDK's retry is seen
// when a Go worker settles the step, or else by a Go worker's look over
// the ended workflows (about every 5 minutes, one for all a Client's
// workers). In a workflow still running the retried step simply joins it
// again. A step of a canceled workflow stays canceled: Client.Retry
// refuses it with an *ArgumentError, and a Go worker's look cancels one
// another SDK retried, unless it ran first.
func (c *Client) RetryWorkflow(ctx context.Context, id string) (*Task, error) {
	if err := checkCtx(ctx, "retry workflow"); err != nil {
		return nil, err
	}
	return taskResult(c.store.RetryWorkflow(ctx, id))
}

// retryStepByKey is RetryByKey for a workflow step's key (StepKey), which
// Retry runs on the step's task: isStep is false for any other key.
func (c *Client) retryStepByKey(ctx context.Context, key string, resetAttempt bool) (t *Task, isStep bool, err error) {
	if _, step, ok := workflowspec.ParseKey(key); !ok || step == "" {
		return nil, false, nil
	}
	// A step's key never moves to another task (steps are submitted with
	// ConflictReject), so reading it apart from the retry races nothing.
	found, err := c.store.GetByKey(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return nil, true, nil
	}
	if err != nil {
		return nil, true, err
	}
	t, err = taskResult(c.store.RetryTask(ctx, found.ID, resetAttempt))
	return t, true, err
}

// CallWorkflow submits a workflow and waits for it, as Call does for a
// task: the succeeded record (its Result names each step's task), a
// *TaskFailedError whose envelope's Type is "WorkflowFailed" when a step
// failed for good, *TaskCanceledError when the workflow was canceled, or
// *TaskTimeoutError when it did not end in time (it goes on).
func (c *Client) CallWorkflow(ctx context.Context, steps []WorkflowStep, opts *WorkflowOptions, wait *WaitOptions) (*Task, error) {
	if _, _, _, err := wait.resolved(); err != nil {
		return nil, err
	}
	rec, err := c.SubmitWorkflow(ctx, steps, opts)
	if err != nil {
		return nil, err
	}
	final, err := c.Wait(ctx, rec.ID, wait)
	if err != nil {
		return nil, err
	}
	return final, outcome(final)
}
