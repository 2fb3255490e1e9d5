package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

const watchHelp = `Prints the counts per queue and status at the start and then whenever
they change: it re-reads them on a change made through this database (on
Postgres, by any process, through LISTEN) and on the poll timer, and
prints a line only when what it shows differs from the line before. Runs
until interrupted, or for --for. Reads only.

--json: one JSON document per line, {"at_ms": N, "reason": "start" |
"queued" | "done" | "changed" (another process's commit to the SQLite
file) | "poll" (what made it re-read), "queue": "Q" (queued
only), "task_id": "ID" (done only), "queues": {"QUEUE": {"queued": N,
"running": N, "succeeded": N, "failed": N, "canceled": N}}}.`

// watchLine is one line of watch --json.
type watchLine struct {
	AtMs   int64                          `json:"at_ms"`
	Reason string                         `json:"reason"`
	Queue  string                         `json:"queue,omitempty"`
	TaskID string                         `json:"task_id,omitempty"`
	Queues map[string]cairnq.StatusCounts `json:"queues"`
}

// cmdWatch prints the queue counts at the start and whenever they change,
// re-reading them on a change made by this process, on Postgres through
// LISTEN, and on the poll timer. It runs until interrupted, or for --for.
func cmdWatch(ctx context.Context, e *env, args []string) error {
	fs := e.dbFlags()
	queue := fs.String("queue", "", "only this `queue`")
	poll := fs.Duration("poll", time.Second, "how often to re-read without a signal (more than 0)")
	limit := fs.Duration("for", 0, "stop after this long (default: until interrupted)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if *poll <= 0 {
		return e.usageError("--poll must be more than 0, got %v", *poll)
	}
	if *limit < 0 {
		return e.usageError("--for must not be negative, got %v", *limit)
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
	p := &watchPrinter{out: e.out, json: e.db.json}
	show := func(s cairnq.Signal) {
		stats, err := c.Stats(ctx, *queue)
		if err != nil {
			if ctx.Err() == nil {
				failed = err
				fmt.Fprintln(e.errOut, "cairnq: watch:", err)
			}
			return
		}
		p.show(time.Now(), s, stats)
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

// watchPrinter writes watch's lines: the counts it is shown first, then
// each time they differ from the ones it printed last. A busy database
// signals many times a second, mostly with nothing new to show.
type watchPrinter struct {
	out  io.Writer
	json bool
	last []byte // the counts printed last, as JSON (which orders the queues)
}

// show prints a line for stats, re-read because of s at now, unless they
// are the counts printed last; it reports whether it printed.
func (p *watchPrinter) show(now time.Time, s cairnq.Signal, stats map[string]cairnq.StatusCounts) bool {
	key, err := json.Marshal(stats)
	if err == nil && p.last != nil && bytes.Equal(key, p.last) {
		return false
	}
	p.last = key
	if p.json {
		writeJSON(p.out, watchLine{AtMs: now.UnixMilli(), Reason: s.Reason, Queue: s.Queue, TaskID: s.TaskID, Queues: stats})
		return true
	}
	fmt.Fprintf(p.out, "%s %-6s%s\n", now.Format(time.TimeOnly), s.Reason, countsText(stats))
	return true
}

// countsText is the counts of a watch line, queue by queue in order of
// name.
func countsText(stats map[string]cairnq.StatusCounts) string {
	names := make([]string, 0, len(stats))
	for q := range stats {
		names = append(names, q)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, q := range names {
		s := stats[q]
		fmt.Fprintf(&b, "  %s: %d queued %d running %d succeeded %d failed %d canceled",
			printable(q), s.Queued, s.Running, s.Succeeded, s.Failed, s.Canceled)
	}
	return b.String()
}
