package engine

import (
	"cmp"
	"context"
	"fmt"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/workflowspec"
	"github.com/cairnq/cairnq-go/protocol"
)

// A workflow that has ended can still be moved by plain task operations,
// from this SDK or any other: a retry of a failed step's task, a cancel
// of the record that reached no step. The advance meets them when it runs
// (a Go step's settlement, RetryTask); a Go worker's sweep finds the
// others, reading the records of the workflows that ended since its last
// (SweepEndedSince) and, every few minutes, once for all the workers of
// its store, every record of a failed or canceled one (LookEndedFull,
// workflow_ended_look.go, over SweepEndedByStatus).

// stepsRetried reports whether a step of a failed workflow was retried
// since it failed: its task is queued, running or succeeded while the
// ledger, written in the transaction that failed the record, says it
// failed or was canceled. Only retry.sql moves a finished task, and
// workflow_ended.sql asks the same of the rows.
func stepsRetried(def *workflowspec.Definition, steps []StepRow) bool {
	for _, st := range steps {
		if seen := def.Seen[st.Step]; seen != workflowspec.Failed && seen != workflowspec.Canceled {
			continue
		}
		if st.Status == cairnqtype.StatusQueued || st.Status == cairnqtype.StatusRunning || st.Status == cairnqtype.StatusSucceeded {
			return true
		}
	}
	return false
}

// reviveIn puts the record of a failed workflow one of whose steps was
// retried back in the queue (its attempts from zero), under the
// workflow's lock the caller holds, and returns it. The user who retried
// a step wants the workflow to go on from it, as RetryWorkflow would:
//
//   - Under CancelRest the first failure stopped every branch (the steps
//     it canceled are what the workflow needs as much as the retried
//     one), so the end stays written and the advance resumes the workflow
//     whole (resumeIn): every step that did not succeed runs again.
//   - Under ContinueBranches the branches are independent: the end is
//     cleared and only the retried step's branch goes on; another step
//     still failed stays failed, and the workflow fails again once
//     nothing more can run, unless that step is retried too.
func (s *Store) reviveIn(ctx context.Context, q querier, rec *cairnqtype.Task, def *workflowspec.Definition) (*cairnqtype.Task, error) {
	rows, err := s.exec(ctx, q, stmtRetry, protocol.Args{"id": rec.ID, "reset_attempt": true})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		// Retried meanwhile by someone who takes no lock (another SDK's
		// retry of the record, on Postgres): read as it now stands.
		if rows, err = s.exec(ctx, q, stmtGet, protocol.Args{"id": rec.ID}); err != nil || len(rows) == 0 {
			return rec, err
		}
	}
	if rec, err = rowToTask(rows[0]); err != nil {
		return nil, err
	}
	switch {
	case def.OnFailure == workflowspec.ContinueBranches:
		def.Ended = ""
	case def.Ended == "":
		def.Ended = workflowspec.Failed // failed, but not by an advance: resumed all the same
	}
	return rec, nil
}

// EndedFrom is where a walk over the records of ended workflows carries
// on: after the record at MS with id ID (its completed_at_ms for
// SweepEndedSince, its run_at_ms for SweepEndedByStatus).
type EndedFrom struct {
	MS int64
	ID string
}

// OldestEnded is the EndedFrom before every record.
func OldestEnded() EndedFrom { return EndedFrom{MS: NoPurgeFloor} }

// EndedSwept is what one page of a walk over ended workflows did.
type EndedSwept struct {
	// Read counts the records the page read, Advanced those it advanced.
	Read, Advanced int
	// Next is where the next page starts: after the last record read.
	Next EndedFrom
}

// SweepEndedSince reads up to limit records of ended workflows, after
// from in the order they ended (succeeded ones too, so that a caller's
// floor passes them), and advances each whose steps moved since it
// ended, as workerID, in a write transaction of its own under the
// workflow's lock (advanceIn): a canceled workflow's steps still queued
// are canceled and its running ones asked to stop (another SDK's plain
// cancel of the record reached none of them), and a failed workflow one
// of whose steps was retried since (by another SDK, and settled by no Go
// worker) is revived. The first error is returned once the others are
// swept.
func (s *Store) SweepEndedSince(ctx context.Context, workerID string, from EndedFrom, limit int) (EndedSwept, error) {
	return s.sweepEnded(ctx, workerID, stmtWorkflowEnded, protocol.Args{
		"name": WorkflowName, "from_ms": from.MS, "from_id": from.ID, "limit": int64(limit),
	}, from)
}

// SweepEndedByStatus is SweepEndedSince over every record of a workflow
// that ended status (failed or canceled), after from in the claim index's
// order (run_at_ms, id): for a step retried long after its workflow
// ended, without reading the succeeded records, the most of them.
func (s *Store) SweepEndedByStatus(ctx context.Context, workerID string, status cairnqtype.Status, from EndedFrom, limit int) (EndedSwept, error) {
	return s.sweepEnded(ctx, workerID, stmtWorkflowEndedBy, protocol.Args{
		"name": WorkflowName, "status": string(status), "from_ms": from.MS, "from_id": from.ID, "limit": int64(limit),
	}, from)
}

// sweepEnded runs stmt, workflow_ended or workflow_ended_by_status, and
// advances each record read that moved.
func (s *Store) sweepEnded(ctx context.Context, workerID, stmt string, a protocol.Args, from EndedFrom) (EndedSwept, error) {
	sw := EndedSwept{Next: from}
	rows, err := s.readOne(ctx, stmt, a)
	if err != nil {
		return sw, err
	}
	var firstErr error
	for _, r := range rows {
		id, _, err := asString("id", r["id"])
		if err != nil {
			return sw, err
		}
		at, _, err := asInt64("at_ms", r["at_ms"])
		if err != nil {
			return sw, err
		}
		sw.Read, sw.Next = sw.Read+1, EndedFrom{MS: at, ID: id}
		if moved, err := asBool("moved", r["moved"]); err != nil {
			return sw, err
		} else if !moved {
			continue
		}
		if _, err := s.AdvanceWorkflow(ctx, id, workerID); err != nil {
			firstErr = cmp.Or(firstErr, fmt.Errorf("sweeping ended workflow %s: %w", id, err))
			continue
		}
		sw.Advanced++
	}
	return sw, firstErr
}
