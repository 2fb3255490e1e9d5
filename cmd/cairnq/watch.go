package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

const watchHelp = `Prints the counts per queue and status whenever they may have changed:
at the start, on a change made through this database (on Postgres, by any
process, through LISTEN), and on the poll timer. Runs until interrupted,
or for --for. Reads only.

--json: one JSON document per line, {"at_ms": N, "reason": "start" |
"queued" | "done" | "poll", "queue": "Q" (queued only), "task_id": "ID"
(done only), "queues": {"QUEUE": {"queued": N, "running": N,
"succeeded": N, "failed": N, "canceled": N}}}.`

// watchLine is one line of watch --json.
type watchLine struct {
	AtMs   int64                          `json:"at_ms"`
	Reason string                         `json:"reason"`
	Queue  string                         `json:"queue,omitempty"`
	TaskID string                         `json:"task_id,omitempty"`
	Queues map[string]cairnq.StatusCounts `json:"queues"`
}

// cmdWatch prints the queue counts whenever they may have changed: on a
// change made by this process, on Postgres through LISTEN, and on the poll
// timer. It runs until interrupted, or for --for.
func cmdWatch(ctx context.Context, e *env, args []string) error {
	fs := e.dbFlags()
	queue := fs.String("queue", "", "only this `queue`")
	poll := fs.Duration("poll", time.Second, "how often to re-read without a signal")
	limit := fs.Duration("for", 0, "stop after this long (default: until interrupted)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	c, err := e.client(ctx)
	if err != nil {
		return err
	}
	if *limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *limit)
		defer cancel()
	}
	var queues []string
	if *queue != "" {
		queues = []string{*queue}
	}
	var failed error
	show := func(s cairnq.Signal) {
		stats, err := c.Stats(ctx, *queue)
		if err != nil {
			if ctx.Err() == nil {
				failed = err
				fmt.Fprintln(e.errOut, "cairnq: watch:", err)
			}
			return
		}
		now := time.Now()
		if e.db.json {
			writeJSON(e.out, watchLine{AtMs: now.UnixMilli(), Reason: s.Reason, Queue: s.Queue, TaskID: s.TaskID, Queues: stats})
			return
		}
		names := make([]string, 0, len(stats))
		for q := range stats {
			names = append(names, q)
		}
		sort.Strings(names)
		fmt.Fprintf(e.out, "%s %-6s", now.Format(time.TimeOnly), s.Reason)
		for _, q := range names {
			s := stats[q]
			fmt.Fprintf(e.out, "  %s: %d queued %d running %d succeeded %d failed %d canceled",
				printable(q), s.Queued, s.Running, s.Succeeded, s.Failed, s.Canceled)
		}
		fmt.Fprintln(e.out)
	}
	show(cairnq.Signal{Reason: "start"})
	if failed != nil {
		return failed
	}
	stop := c.Watch(ctx, &cairnq.WatchOptions{Queues: queues, PollInterval: *poll}, show)
	<-ctx.Done()
	stop()
	return nil
}
