package engine

import (
	"context"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/workflowspec"
	"github.com/cairnq/cairnq-go/protocol"
)

// recordIn reads the workflow's record under its lock, in q's write
// transaction: ErrNotFound when there is none, an *ArgumentError when
// the task is no workflow's record.
func (s *Store) recordIn(ctx context.Context, q querier, op, id string) (*cairnqtype.Task, error) {
	if _, err := s.exec(ctx, q, stmtLockKey, protocol.Args{"key": workflowspec.WorkflowKey(id)}); err != nil {
		return nil, err
	}
	rows, err := s.exec(ctx, q, stmtGet, protocol.Args{"id": id})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, cairnqtype.ErrNotFound
	}
	rec, err := rowToTask(rows[0])
	if err != nil {
		return nil, err
	}
	if rec.Name != WorkflowName {
		return nil, argError(op, "id", "task %s (named %q) is not a workflow's record", id, rec.Name)
	}
	return rec, nil
}

// CancelWorkflow cancels the workflow whose record is id: the record
// (queued: canceled at once; being checked: asked to stop, and canceled
// when the check ends), every queued step, and asks every running step
// to stop. A workflow that has ended is left as it is. It returns the
// record as left.
func (s *Store) CancelWorkflow(ctx context.Context, id string) (*cairnqtype.Task, error) {
	const op = "cancel workflow"
	if err := checkID(op, id); err != nil {
		return nil, err
	}
	var rec *cairnqtype.Task
	err := s.be.write(ctx, func(q querier) error {
		var err error
		if rec, err = s.recordIn(ctx, q, op, id); err != nil {
			return err
		}
		if rec.IsTerminal() {
			if rec.Status != cairnqtype.StatusCanceled {
				return nil
			}
			// Canceled as a task (Client.Cancel, a console): its steps go
			// with it, as they would have through this call.
			steps, err := s.workflowSteps(ctx, q, id)
			if err != nil {
				return err
			}
			_, err = s.cancelLive(ctx, q, steps)
			return err
		}
		if def, err := workflowspec.Parse(rec.Payload); err == nil && def.Ended == "" {
			// Ended is written where the record ends, so that a retry
			// of the record is told from a workflow still running.
			def.Ended = workflowspec.Canceled
			if err := s.revise(ctx, q, id, def); err != nil {
				return err
			}
		}
		rows, err := s.exec(ctx, q, stmtCancel, protocol.Args{"id": id})
		if err != nil {
			return err
		}
		if t, err := oneTask(rows); err != nil {
			return err
		} else if t != nil {
			rec = t
		}
		steps, err := s.workflowSteps(ctx, q, id)
		if err != nil {
			return err
		}
		_, err = s.cancelLive(ctx, q, steps)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.settled(rec)
	return rec, nil
}

// retryWorker is the worker id under which RetryWorkflow finishes a
// record it finds done (a canceled workflow whose steps had all
// succeeded): a claim needs one.
const retryWorker = "cairnq.workflow.retry"

// RetryWorkflow resumes the failed or canceled workflow whose record is
// id: its failed and canceled steps run again (their attempts counted
// from zero), the steps that never ran are submitted as what they wait
// for succeeds, and the steps that succeeded are left as they are. A
// workflow that has not ended, or has a step still stopping after a
// cancel, is an *ArgumentError. It returns the record as left: queued
// again, or succeeded when every step already had.
func (s *Store) RetryWorkflow(ctx context.Context, id string) (*cairnqtype.Task, error) {
	const op = "retry workflow"
	if err := checkID(op, id); err != nil {
		return nil, err
	}
	var rec *cairnqtype.Task
	var adv Advanced
	err := s.be.write(ctx, func(q querier) error {
		var err error
		if rec, err = s.recordIn(ctx, q, op, id); err != nil {
			return err
		}
		if rec.Status != cairnqtype.StatusFailed && rec.Status != cairnqtype.StatusCanceled {
			return argError(op, "id", "workflow %s is %s; only a failed or canceled one is retried", id, rec.Status)
		}
		steps, err := s.workflowSteps(ctx, q, id)
		if err != nil {
			return err
		}
		for _, st := range steps {
			if st.Status == cairnqtype.StatusRunning {
				// Asked to stop, it would end canceled after the retry and
				// fail the workflow again.
				return argError(op, "id", "workflow %s: step %q is still stopping; retry once it has ended", id, st.Step)
			}
		}
		def, err := workflowspec.Parse(rec.Payload)
		if err != nil {
			return definitionError(op, err)
		}
		rows, err := s.exec(ctx, q, stmtRetry, protocol.Args{"id": id, "reset_attempt": true})
		if err != nil {
			return err
		}
		if rec, err = oneTask(rows); err != nil {
			return err
		}
		if def.Ended == "" {
			// Ended as a task (canceled by Client.Cancel or another SDK):
			// said here, so that the advance resumes it.
			def.Ended = workflowspec.Status(cairnqtype.StatusCanceled)
			if err := s.revise(ctx, q, id, def); err != nil {
				return err
			}
		}
		// The record is live again with its definition saying it ended:
		// the advance resumes it, as it does a record any SDK retried.
		if adv, err = s.advanceIn(ctx, q, op, id, retryWorker, nil); err != nil {
			return err
		}
		if adv.Record != nil {
			rec = adv.Record // done at once: every step had succeeded
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.requeued(rec)
	s.afterAdvance(adv)
	return rec, nil
}

// RetryTask is Retry as Client.Retry runs it. A failed or canceled step
// of a workflow is retried under its workflow's lock, and the workflow
// advanced in the same write transaction: a failed workflow goes on from
// the retried step (reviveIn), a running one takes the step back in. A
// step of a canceled workflow is an *ArgumentError and is left as it is:
// the cancel stands, and RetryWorkflow resumes the workflow. Any other
// task is retried as Retry retries it. It returns the task as left (the
// advance may cancel it again, in a workflow stopping after another
// step failed), or nil when no failed or canceled task has that id.
func (s *Store) RetryTask(ctx context.Context, id string, resetAttempt bool) (*cairnqtype.Task, error) {
	const op = "retry"
	if err := checkID(op, id); err != nil {
		return nil, err
	}
	var t *cairnqtype.Task
	var adv Advanced
	err := s.be.write(ctx, func(q querier) error {
		t, adv = nil, Advanced{}
		rows, err := s.exec(ctx, q, stmtGet, protocol.Args{"id": id})
		if err != nil || len(rows) == 0 {
			return err
		}
		if t, err = rowToTask(rows[0]); err != nil {
			return err
		}
		mark, isStep := StepMarkOf(t)
		isStep = isStep && (t.Status == cairnqtype.StatusFailed || t.Status == cairnqtype.StatusCanceled)
		if isStep {
			if err := s.stepRetryIn(ctx, q, op, id, mark.Record); err != nil {
				return err
			}
		}
		rows, err = s.exec(ctx, q, stmtRetry, protocol.Args{"id": id, "reset_attempt": resetAttempt})
		if err != nil {
			return err
		}
		if t, err = oneTask(rows); err != nil || t == nil || !isStep {
			return err
		}
		if adv, err = s.advanceIn(ctx, q, op, mark.Record, retryWorker, nil); err != nil {
			return err
		}
		rows, err = s.exec(ctx, q, stmtGet, protocol.Args{"id": id})
		if err != nil {
			return err
		}
		t, err = oneTask(rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.requeued(t)
	s.afterAdvance(adv)
	return t, nil
}

// stepRetryIn takes the lock of the workflow whose record is record, as
// every writer of a workflow's steps takes it before their rows, and
// refuses the retry of step id when the workflow was canceled. A record
// gone or no workflow's leaves the step a task like any other.
func (s *Store) stepRetryIn(ctx context.Context, q querier, op, id, record string) error {
	if _, err := s.exec(ctx, q, stmtLockKey, protocol.Args{"key": workflowspec.WorkflowKey(record)}); err != nil {
		return err
	}
	rows, err := s.exec(ctx, q, stmtGet, protocol.Args{"id": record})
	if err != nil || len(rows) == 0 {
		return err
	}
	rec, err := rowToTask(rows[0])
	if err != nil || rec.Name != WorkflowName {
		return err
	}
	if rec.Status == cairnqtype.StatusCanceled || rec.CancelRequested() {
		return argError(op, "id", "task %s is a step of workflow %s, which was canceled: retry the workflow (RetryWorkflow) to run its steps again", id, record)
	}
	return nil
}

// resumeIn puts a retried workflow's failed and canceled steps back in
// the queue (their attempts from zero), forgets in the ledger the ones
// whose tasks are gone so that they are submitted again when ready, and
// clears def's end. It returns steps as they now stand and the queues of
// the steps it queued again.
func (s *Store) resumeIn(ctx context.Context, q querier, record string, def *workflowspec.Definition, steps []StepRow) ([]StepRow, []string, error) {
	var queues []string
	if def.Seen == nil {
		def.Seen = map[string]workflowspec.Status{}
	}
	rowOf := make(map[string]bool, len(steps))
	for i, st := range steps {
		rowOf[st.Step] = true
		if st.Status != cairnqtype.StatusFailed && st.Status != cairnqtype.StatusCanceled {
			continue
		}
		rows, err := s.exec(ctx, q, stmtRetry, protocol.Args{"id": st.ID, "reset_attempt": true})
		if err != nil {
			return nil, nil, err
		}
		t, err := oneTask(rows)
		if err != nil {
			return nil, nil, err
		}
		if t != nil {
			steps[i].Status, steps[i].Attempt = cairnqtype.StatusQueued, 0
			def.Seen[st.Step] = workflowspec.Queued
			queues = append(queues, t.Queue)
		}
	}
	var forget []string
	for name, seen := range def.Seen {
		if !rowOf[name] && seen != workflowspec.Succeeded {
			delete(def.Seen, name) // gone, and did not succeed: runs again
			forget = append(forget, workflowspec.LedgerKey(record, name), workflowspec.SucceededKey(record, name))
		}
	}
	if len(forget) > 0 {
		// Its ledger keys go too, or they would keep it from running.
		if _, err := s.exec(ctx, q, stmtWorkflowForget, protocol.Args{"keys": s.list(forget)}); err != nil {
			return nil, nil, err
		}
	}
	def.Ended = ""
	return steps, queues, nil
}
