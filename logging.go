package cairnq

import (
	"context"
	"log/slog"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// The worker's and the scheduler's log events. Each message is a constant, so a log pipeline
// can match on it; the task's identity is in attributes (attrTask), never
// in the message. The package documentation's "Logging" lists them.
const (
	logWorkerStarted = "cairnq: worker started"
	logWorkerStopped = "cairnq: worker stopped"
	logAttemptFailed = "cairnq: task attempt failed; will retry"
	logTaskFailed    = "cairnq: task failed"
	logLeaseLost     = "cairnq: task lease lost"
	logTaskSnoozed   = "cairnq: task snoozed"
	logBusyBackoff   = "cairnq: database busy; backing off"
	logWorkerError   = "cairnq: worker error"

	// A queue paused or resumed for the whole fleet (Client.PauseQueue),
	// as a worker saw it.
	logQueuePaused  = "cairnq: queue paused for the fleet; not claiming from it"
	logQueueResumed = "cairnq: queue resumed for the fleet"

	// A workflow's: an advance that inserted steps or ended the workflow,
	// and a record a sweep left alone.
	logWorkflowAdvanced = "cairnq: workflow advanced"
	logWorkflowUnread   = "cairnq: workflow record left alone"

	// The scheduler's; the entry's identity is in attributes.
	logSchedSubmitted = "cairnq: periodic task submitted"
	logSchedCaughtUp  = "cairnq: periodic slots missed while no scheduler ran"
	logSchedNoHistory = "cairnq: periodic entry has no earlier slot in the database; nothing counted as missed"
	logSchedError     = "cairnq: scheduler error; retrying"
	logSchedClock     = "cairnq: reading the database clock failed; retrying"
)

// attrTask is the attribute group every task event carries.
func attrTask(t *cairnqtype.Task) []slog.Attr {
	return []slog.Attr{
		slog.String("task_id", t.ID), slog.String("task_name", t.Name),
		slog.String("queue", t.Queue), slog.Int("attempt", t.Attempt),
	}
}

// logTask logs one task event with the task's and the worker's attributes.
func (w *Worker) logTask(ctx context.Context, level slog.Level, msg string, t *cairnqtype.Task, attrs ...slog.Attr) {
	if !w.log.Enabled(ctx, level) {
		return
	}
	all := append(attrTask(t), slog.String("worker_id", w.id))
	w.log.LogAttrs(ctx, level, msg, append(all, attrs...)...)
}

// logSettledFailure logs a failure the store recorded: a retry when the
// task went back to the queue, a final failure otherwise.
func (w *Worker) logSettledFailure(ctx context.Context, tc *TaskContext, settled *cairnqtype.Task, env cairnqtype.ErrorEnvelope, delay time.Duration) {
	errAttrs := []slog.Attr{
		slog.String("error_type", env.Type), slog.String("error_code", env.Code),
		slog.String("error", env.Message), slog.Int("max_attempts", tc.task.MaxAttempts),
	}
	if settled != nil && settled.Status == cairnqtype.StatusQueued {
		w.logTask(ctx, slog.LevelWarn, logAttemptFailed, tc.task, append(errAttrs, slog.Duration("retry_in", delay))...)
		return
	}
	w.logTask(ctx, slog.LevelWarn, logTaskFailed, tc.task, errAttrs...)
}

// logAdvance logs what a step's settlement did to its workflow, at debug
// level: a workflow is visible through GetWorkflow, and a log line per
// step would double a busy worker's output.
func (w *Worker) logAdvance(ctx context.Context, tc *TaskContext, mark engine.StepMark, adv engine.Advanced) {
	if adv.Unread != "" {
		w.logTask(ctx, slog.LevelWarn, logWorkflowUnread, tc.task, slog.String("workflow", mark.Record), slog.String("reason", adv.Unread))
		return
	}
	if adv.Inserted == 0 && adv.Record == nil && adv.Canceled == 0 {
		return
	}
	attrs := []slog.Attr{slog.String("workflow", mark.Record), slog.String("step", mark.Step),
		slog.Int("inserted", adv.Inserted), slog.Int("canceled", adv.Canceled)}
	if adv.Record != nil {
		attrs = append(attrs, slog.String("workflow_status", string(adv.Record.Status)))
	}
	w.logTask(ctx, slog.LevelDebug, logWorkflowAdvanced, tc.task, attrs...)
}
