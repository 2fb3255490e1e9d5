package cairnq

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/maintenance"
)

// RetentionRule keeps finished tasks matching it for OlderThan after they
// finished, then purges them. Empty filters match everything. No rule
// purges a task of a workflow that has not ended (whose root is a
// workflow's record still queued or running), as Client.Purge does not:
// a step still to run reads the results of the steps it waited for
// (StepResult), and the workflow's ledger would count a step it last saw
// running, and then found gone, as lost. Another SDK's purge knows
// nothing of this (the package documentation's "Workflows" says what it
// can still do).
type RetentionRule struct {
	Queue     string
	Status    Status // a terminal status
	Name      string
	OlderThan time.Duration
}

// RetentionOptions configures the background purge of a Client.
type RetentionOptions struct {
	// Rules are swept in order, each draining its matches in batches of
	// Limit. Tiered retention is one rule per tier, e.g. succeeded tasks
	// after an hour, failed ones after a week. At least one rule.
	Rules []RetentionRule
	// Interval between sweeps. Default one hour. A timer's sweep waits
	// after each full batch three times as long as the batch took, within
	// the first half of its interval (so with the default a sweep may run
	// for half an hour): its deletes come spread out rather than in one
	// burst that the claims and submits of that moment wait behind. Past
	// half its interval a sweep runs its batches back to back, so pacing
	// leaves no work to the next one. SweepNow does not pause.
	Interval time.Duration
	// Limit is the rows one purge statement deletes. Default 1000.
	Limit int
	// OnError receives a failed sweep; the sweeper carries on. Default: logged.
	OnError func(error)
}

// newRetention checks o and returns its sweeps, not started.
func newRetention(st *engine.Store, o RetentionOptions, log *slog.Logger) (*maintenance.Retention, error) {
	if len(o.Rules) == 0 {
		return nil, &ArgumentError{Op: "retention", Arg: "rules", Reason: "need at least one"}
	}
	if o.Interval < 0 {
		return nil, &ArgumentError{Op: "retention", Arg: "Interval", Reason: fmt.Sprintf("must be > 0, got %v", o.Interval)}
	}
	if o.Limit < 0 {
		return nil, &ArgumentError{Op: "retention", Arg: "Limit", Reason: fmt.Sprintf("must be >= 1, got %d", o.Limit)}
	}
	interval, limit, onError := o.Interval, o.Limit, o.OnError
	if interval == 0 {
		interval = time.Hour
	}
	if limit == 0 {
		limit = engine.DefaultPurgeLimit
	}
	var rules []cairnqtype.PurgeOptions
	for _, r := range o.Rules {
		p := PurgeOptions{OlderThan: r.OlderThan, Queue: r.Queue, Status: r.Status, Name: r.Name, Limit: limit}.row()
		if err := engine.ValidatePurge(p); err != nil {
			return nil, err
		}
		rules = append(rules, p)
	}
	if onError == nil {
		onError = func(err error) { log.Error("cairnq: retention sweep failed", "err", err) }
	}
	return maintenance.NewRetention(st, rules, interval, onError), nil
}

// SweepNow runs the configured retention rules once, now, and returns how
// many tasks it purged. Without Options.Retention it purges nothing.
func (c *Client) SweepNow(ctx context.Context) (int, error) {
	if c.sweeper == nil {
		return 0, nil
	}
	return c.sweeper.Sweep(ctx, true, false) // from the oldest: "now" misses nothing
}
