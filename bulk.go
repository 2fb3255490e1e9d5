package cairnq

import (
	"context"
	"errors"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// TaskFilter picks the tasks CancelByFilter, RetryByFilter and
// DeleteByFilter act on: each field set must match, and at least one
// must be set, so that an empty filter acts on nothing rather than on
// every task.
type TaskFilter struct {
	// Status, when set, is the one status matched.
	Status Status
	// Queue, when set, is the one queue matched.
	Queue string
	// Name, when set, is the one task name matched.
	Name string
}

// bulkPage is how many ids a bulk action reads at once.
const bulkPage = 500

// Delete deletes a task no worker holds (queued, succeeded, failed or
// canceled) with its keys, and returns it as it was. It returns nil, nil
// when no such task has that id: none has, it is running (cancel it and
// let its worker settle it first), or a workflow that has not ended
// holds it (its record, or one of its steps: cancel the workflow first).
// A waiter on the task (Wait, Call) then reads ErrNotFound.
func (c *Client) Delete(ctx context.Context, id string) (*Task, error) {
	return taskResult(c.store.DeleteTask(ctx, id, ""))
}

// CancelByFilter cancels every task matching f that Cancel would: the
// queued ones at once, the running ones asked to stop (once: a running
// task already asked is left). A workflow's record is canceled as
// CancelWorkflow cancels it. It returns how many it canceled or asked to
// stop.
//
// It reads the matching ids a page at a time through the primary key and
// acts on each task in a statement of its own, while the task still
// matches (a queued task a worker claimed meanwhile no longer matches
// Status queued), so no lock is held past one task's: workers claim on
// as it runs (a figure is in docs/benchmarks.md). A task that comes to
// match while it runs may be acted on too. When ctx ends or a task's
// action fails it stops there, returning how many it changed and the
// error; running it again carries on, the changed tasks no longer
// matching.
func (c *Client) CancelByFilter(ctx context.Context, f TaskFilter) (int, error) {
	return c.byFilter(ctx, "cancel by filter", f, func(m engine.Matching) (bool, error) {
		if m.Name == WorkflowName {
			t, err := c.Cancel(ctx, m.ID)
			return t != nil, err
		}
		t, err := c.store.CancelMatching(ctx, m.ID, cairnqtype.Status(f.Status))
		return t != nil, userErr(err)
	})
}

// RetryByFilter queues again every failed or canceled task matching f, as
// Retry does each (opts as Retry's), and returns how many it queued. A
// step of a canceled workflow, which Retry refuses, is left (its
// workflow's RetryWorkflow runs it again). It goes a page at a time as
// CancelByFilter does.
func (c *Client) RetryByFilter(ctx context.Context, f TaskFilter, opts *RetryOptions) (int, error) {
	return c.byFilter(ctx, "retry by filter", f, func(m engine.Matching) (bool, error) {
		// Retry takes only failed and canceled tasks, which stay so
		// until retried: a task no longer matches only by being queued.
		t, err := c.Retry(ctx, m.ID, opts)
		if _, refused := errors.AsType[*ArgumentError](err); refused {
			return false, nil // a step of a canceled workflow: RetryWorkflow's to retry
		}
		return t != nil, err
	})
}

// DeleteByFilter deletes every task matching f that Delete would (none
// running, none a live workflow holds), while it still matches, with
// their keys, and returns how many it deleted. It goes a page at a time
// as CancelByFilter does.
func (c *Client) DeleteByFilter(ctx context.Context, f TaskFilter) (int, error) {
	return c.byFilter(ctx, "delete by filter", f, func(m engine.Matching) (bool, error) {
		t, err := c.store.DeleteTask(ctx, m.ID, cairnqtype.Status(f.Status))
		return t != nil, userErr(err)
	})
}

// byFilter runs act on each task matching f, counting those it changed.
func (c *Client) byFilter(ctx context.Context, op string, f TaskFilter, act func(engine.Matching) (bool, error)) (int, error) {
	if err := checkCtx(ctx, op); err != nil {
		return 0, err
	}
	ef := cairnqtype.TaskFilter{Status: cairnqtype.Status(f.Status), Queue: f.Queue, Name: f.Name}
	if err := engine.ValidateFilter(op, ef); err != nil {
		return 0, userErr(err)
	}
	n, after := 0, ""
	for {
		page, err := c.store.MatchingIDs(ctx, ef, after, bulkPage)
		if err != nil {
			return n, userErr(err)
		}
		for _, m := range page {
			changed, err := act(m)
			if err != nil {
				return n, err
			}
			if changed {
				n++
			}
		}
		if len(page) < bulkPage {
			return n, nil
		}
		after = page[len(page)-1].ID
	}
}
