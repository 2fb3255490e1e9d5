package cairnq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairnq/cairnq-go/internal/wake"
)

// Wait polling defaults: the first re-read after 100ms, each next one 1.5x
// later, never more than 500ms apart, for 30s in all. A settlement in this
// process wakes a waiter at once.
const (
	DefaultWaitTimeout     = 30 * time.Second
	DefaultPollInterval    = 100 * time.Millisecond
	DefaultMaxPollInterval = 500 * time.Millisecond
)

// WaitOptions tunes Wait, WaitByKey and Call. Zero fields take the
// defaults; a negative field, or a poll interval below MinPollInterval, is
// an *ArgumentError.
type WaitOptions struct {
	// Timeout is how long to wait before *TaskTimeoutError. Default 30s.
	Timeout time.Duration
	// PollInterval is the first interval between status reads. Default 100ms.
	// From 100ms up, a read runs on a 25ms grid of the wall clock, up to
	// 25ms before its interval ends, so that concurrent waits read their
	// statuses together, in one statement.
	PollInterval time.Duration
	// MaxPollInterval caps the growing interval. Default 500ms.
	MaxPollInterval time.Duration
}

func (o *WaitOptions) resolved() (timeout, poll, maxPoll time.Duration, err error) {
	timeout, poll, maxPoll = DefaultWaitTimeout, DefaultPollInterval, DefaultMaxPollInterval
	if o == nil {
		return timeout, poll, maxPoll, nil
	}
	bad := func(arg string, v time.Duration, want string) error {
		return &ArgumentError{Op: "wait", Arg: arg, Reason: fmt.Sprintf("must be %s, got %v", want, v)}
	}
	switch {
	case o.Timeout < 0:
		return 0, 0, 0, bad("Timeout", o.Timeout, ">= 0 (0 for the default)")
	case o.PollInterval != 0 && o.PollInterval < MinPollInterval:
		return 0, 0, 0, bad("PollInterval", o.PollInterval, fmt.Sprintf(">= %v (0 for the default)", MinPollInterval))
	case o.MaxPollInterval != 0 && o.MaxPollInterval < MinPollInterval:
		return 0, 0, 0, bad("MaxPollInterval", o.MaxPollInterval, fmt.Sprintf(">= %v (0 for the default)", MinPollInterval))
	}
	if o.Timeout > 0 {
		timeout = o.Timeout
	}
	if o.PollInterval > 0 {
		poll = o.PollInterval
	}
	if o.MaxPollInterval > 0 {
		maxPoll = o.MaxPollInterval
	}
	return timeout, poll, max(maxPoll, poll), nil
}

// nextPoll grows an interval by 1.5x (at least 1ms) up to maxPoll.
func nextPoll(cur, maxPoll time.Duration) time.Duration {
	return min(maxPoll, max(cur+time.Millisecond, cur*3/2))
}

// pollGrid aligns the polls of concurrent waits: a poll due interval from
// now runs at the last multiple of pollGrid (on the wall clock) before
// that, never after it, so the waits whose polls fall in one slot read
// their statuses together, in one statement (Store.GetStatus groups
// concurrent reads). Intervals under four slots are kept exact.
const pollGrid = 25 * time.Millisecond

// pollDelay is how long to sleep before a poll due interval after now.
func pollDelay(now time.Time, interval time.Duration) time.Duration {
	if interval < 4*pollGrid {
		return interval
	}
	return now.Add(interval).Truncate(pollGrid).Sub(now)
}

// TaskTimeoutError reports a wait that ended before the task finished. The
// task keeps running: wait on ID again to pick it back up. Task is the last
// snapshot read (nil if none was found).
type TaskTimeoutError struct {
	ID      string // the task waited on; for a key that pointed nowhere, the key
	Key     string // set when the wait followed a key
	Timeout time.Duration
	Task    *Task

	stuck string // for a workflow's record: what its steps wait on
}

// TaskID returns the id of the task that did not finish in time.
func (e *TaskTimeoutError) TaskID() string { return e.ID }

func (e *TaskTimeoutError) Error() string {
	subject := "task " + e.ID
	if e.Key != "" {
		subject = fmt.Sprintf("key %q", e.Key)
	}
	return fmt.Sprintf("cairnq: %s did not finish within %v: %s", subject, e.Timeout, e.diagnosis())
}

// diagnosis says what the task was stuck doing, in the words an operator
// needs: a task never claimed usually means no worker serves its name and
// queue on this database.
func (e *TaskTimeoutError) diagnosis() string {
	t := e.Task
	switch {
	case e.stuck != "":
		return e.stuck
	case t == nil && e.Key != "":
		return "no task under this key (never submitted, or purged)"
	case t == nil:
		return "no such task (another database file, or purged)"
	case t.Status == StatusQueued && t.Attempt == 0 && !t.RunAt.After(time.Now()):
		return fmt.Sprintf("never claimed: is a worker with a handler for %q on queue %q running against this database?", t.Name, t.Queue)
	case t.Status == StatusQueued:
		return fmt.Sprintf("queued for attempt %d of %d, due %s", t.Attempt+1, t.MaxAttempts, t.RunAt.Format(time.RFC3339Nano))
	case t.CancelRequested():
		return "cancel requested; the handler has not stopped yet"
	}
	return fmt.Sprintf("still running (attempt %d of %d, worker %s)", t.Attempt, t.MaxAttempts, t.WorkerID)
}

// Wait blocks until the task reaches a terminal status and returns it,
// whatever that status. It polls the status alone (growing from
// PollInterval to MaxPollInterval) and reads the whole row once. Past the
// timeout it returns *TaskTimeoutError; if ctx ends first, ctx.Err(). A
// task that does not exist (never submitted here, or purged) is
// ErrNotFound at once: a task id only ever names a task already written.
// A read that fails (a dropped connection, a restarting server) is tried
// again at the next poll while the timeout lasts; the last such error is
// returned if it outlasts the timeout.
func (c *Client) Wait(ctx context.Context, id string, opts *WaitOptions) (*Task, error) {
	if err := checkCtx(ctx, "wait"); err != nil {
		return nil, err
	}
	return c.poll(ctx, id, "", opts,
		func() (TaskRef, error) { return refResult(c.store.GetStatus(ctx, id)) },
		func() (*Task, error) { return taskResult(c.store.Get(ctx, id)) })
}

// WaitByKey is Wait for the task key points at, re-resolving the key on
// every read so a replace moves the wait to the new task. A key that
// points nowhere yet is waited on: its task may still be submitted.
func (c *Client) WaitByKey(ctx context.Context, key string, opts *WaitOptions) (*Task, error) {
	if err := checkCtx(ctx, "wait"); err != nil {
		return nil, err
	}
	return c.poll(ctx, key, key, opts,
		func() (TaskRef, error) { return refResult(c.store.GetStatusByKey(ctx, key)) },
		func() (*Task, error) { return taskResult(c.store.GetByKey(ctx, key)) })
}

func (c *Client) poll(ctx context.Context, subject, key string, opts *WaitOptions,
	probe func() (TaskRef, error), read func() (*Task, error)) (*Task, error) {
	timeout, interval, maxPoll, err := opts.resolved()
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	id := ""
	if key == "" {
		id = subject
	}
	for {
		// Subscribe before reading: a settlement landing between the read
		// and the sleep must still end the sleep.
		var wake <-chan struct{}
		unsubscribe := func() {}
		if id != "" {
			wake, unsubscribe = c.store.SubscribeDone(ctx, id)
		}
		// Whether this is the last read is decided once, before it: the
		// last one reads the whole row for the timeout error, and a
		// deadline passing during an earlier read only makes the next
		// iteration the last.
		last := time.Until(deadline) <= 0
		t, ref, exists, err := c.probe(probe, read, last)
		switch {
		case err != nil && (last || !retryableRead(err)):
			unsubscribe()
			return nil, err
		case err != nil:
			// Tried again at the next poll; exists is false, so the key
			// branch below is skipped.
		case t != nil && t.IsTerminal():
			unsubscribe()
			return t, nil
		case !exists && key == "":
			unsubscribe()
			return nil, fmt.Errorf("cairnq: wait: task %s: %w", id, ErrNotFound)
		case last:
			unsubscribe()
			if exists {
				subject = ref.ID
			}
			te := &TaskTimeoutError{ID: subject, Key: key, Timeout: timeout, Task: t}
			if t != nil && t.Name == WorkflowName {
				te.stuck = c.workflowStuck(ctx, t.ID)
			}
			return nil, te
		}
		if exists && ref.ID != id {
			// A key resolved to a task for the first time, or to a new one.
			unsubscribe()
			id = ref.ID
			continue
		}
		timer := time.NewTimer(min(pollDelay(time.Now(), interval), time.Until(deadline)))
		select {
		case <-wake:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		unsubscribe()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		interval = nextPoll(interval, maxPoll)
	}
}

// probe reads the status and, when it is terminal (or the wait is over),
// the whole row, through the same path: a purge or a repointed key in
// between just means waiting on.
func (c *Client) probe(probe func() (TaskRef, error), read func() (*Task, error), last bool) (t *Task, ref TaskRef, exists bool, err error) {
	ref, err = probe()
	if errors.Is(err, ErrNotFound) {
		return nil, ref, false, nil
	}
	if err != nil {
		return nil, ref, false, err
	}
	if ref.Status.IsTerminal() || last {
		t, err = read()
		if errors.Is(err, ErrNotFound) {
			return nil, ref, true, nil
		}
	}
	return t, ref, true, err
}

// retryableRead reports whether a failed status read may succeed at the
// next poll: anything but bad input, a closed or lost store, or the caller's
// context ending.
func retryableRead(err error) bool {
	return !errors.Is(err, ErrInvalidArgument) && !storeGone(err) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// sleepCtx waits d, or until ctx ends (then it reports false).
func sleepCtx(ctx context.Context, d time.Duration) bool { return wake.Sleep(ctx, d) }

// CallOptions are a Call's submit and wait options.
type CallOptions struct {
	SubmitOptions
	WaitOptions
}

// Call submits a task and waits for it. It returns the succeeded task (its
// Result holds what the handler returned), *TaskFailedError if it failed,
// *TaskCanceledError (errors.Is ErrTaskCanceled) if it was canceled, or
// *TaskTimeoutError if it did not finish in time, in which case it keeps
// running.
func (c *Client) Call(ctx context.Context, name string, payload any, opts *CallOptions) (*Task, error) {
	if opts == nil {
		opts = &CallOptions{}
	}
	// Bad wait options fail before the submit, which could not be taken back.
	if _, _, _, err := opts.WaitOptions.resolved(); err != nil {
		return nil, err
	}
	t, err := c.Submit(ctx, name, payload, &opts.SubmitOptions)
	if err != nil {
		return nil, err
	}
	final, err := c.Wait(ctx, t.ID, &opts.WaitOptions)
	if err != nil {
		return nil, err
	}
	return final, outcome(final)
}

// outcome turns a terminal task into Call's error.
func outcome(t *Task) error {
	switch t.Status {
	case StatusFailed:
		env := ErrorEnvelope{Type: "TaskError", Code: "task_error", Message: "task failed"}
		if t.Error != nil {
			env = *t.Error
		}
		return &TaskFailedError{ID: t.ID, Envelope: env, Task: t}
	case StatusCanceled:
		return &TaskCanceledError{ID: t.ID, Task: t}
	}
	return nil
}

// stuckShown is how many steps a timed-out wait on a workflow names.
const stuckShown = 5

// workflowStuck says what workflow id's steps wait on, for a wait on its
// record that timed out: its record's own attempts say nothing (a record
// is queued, with no bound on attempts, while its workflow runs). It is
// "" when the workflow cannot be read within a second.
func (c *Client) workflowStuck(ctx context.Context, id string) string {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	wf, err := c.GetWorkflow(rctx, id)
	if err != nil {
		return ""
	}
	done := map[string]bool{}
	for _, s := range wf.Steps {
		done[s.Step] = s.State == StepState(StatusSucceeded)
	}
	var parts []string
	more := 0
	for _, s := range wf.Steps {
		if len(parts) == stuckShown {
			if s.State == StepState(StatusQueued) || s.State == StepState(StatusRunning) || s.State == StepWaiting {
				more++
			}
			continue
		}
		switch s.State {
		case StepState(StatusQueued):
			if s.Attempt == 0 {
				parts = append(parts, fmt.Sprintf("step %q not claimed yet: is a worker with a handler for %q running against this database?", s.Step, s.Task))
			} else {
				parts = append(parts, fmt.Sprintf("step %q queued for attempt %d", s.Step, s.Attempt+1))
			}
		case StepState(StatusRunning):
			parts = append(parts, fmt.Sprintf("step %q running (attempt %d)", s.Step, s.Attempt))
		case StepWaiting:
			var on []string
			for _, a := range s.After {
				if !done[a] {
					on = append(on, a)
				}
			}
			parts = append(parts, fmt.Sprintf("step %q waits for %s", s.Step, strings.Join(on, ", ")))
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("workflow %s: no step queued, running or waiting; its record awaits its last advance", wf.Status)
	}
	if more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more steps (GetWorkflow)", more))
	}
	return fmt.Sprintf("workflow %s: %s", wf.Status, strings.Join(parts, "; "))
}
