package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/internal/engine"
)

const taskJSONHelp = `A task's JSON is the protocol's task object: id, name, queue, status,
payload, metadata, result, error ({type, code, message, retryable,
details}), progress, message, attempt, max_attempts, priority, worker_id,
lease_until_ms, run_at_ms, cancel_requested_at_ms, parent_id, root_id,
correlation_id, created_at_ms, updated_at_ms, completed_at_ms (times in
epoch milliseconds, absent values null).`

const statsHelp = `Counts the tasks of every queue (or one) per status, and lists the
queues paused for every Go worker (pause) below. Reads only.

--json: {"queues": {"QUEUE": {"queued": N, "running": N, "succeeded": N,
"failed": N, "canceled": N}}, "paused": [{"queue": Q, "paused_at_ms": N,
"by": S, "reason": S}]}; a queue named by --queue is always present.`

const listHelp = `Lists tasks matching every filter given, newest first, at most --limit
(default 20); when more match, stderr says so ("showing the newest 20
of 143 tasks; use --limit for more": counted where no --name filters)
and stdout holds the list alone. A list with failed tasks shows when
each failed and its error's code (or type) and message, cut short. Reads
only.

--json: {"tasks": [TASK, ...]}.

` + taskJSONHelp

const getHelp = `Shows one task, a field a line: its status and attempts, the key that
points at it (no index finds a key by task: it is looked for among the
keys only where there are fewer than 5000, unless --find-key), its times in UTC with how long ago, its worker and lease,
its progress and links, then its payload, result and metadata as
indented JSON and its error (a succeeded task's error is an earlier
attempt's, and says so). --json prints the task as JSON on one line,
its times in epoch milliseconds, as below. Reads only. Exit status 3
when there is no task with that id. A durable handler's task then lists
its steps (name, kind, the attempt that ran it, when, how long, its
output), the events delivered to it, and the sleep or the wait it is
parked in (not with --json).

` + taskJSONHelp

const cancelHelp = `Cancels a queued task at once, or asks a running one to stop (it ends
canceled when its worker settles it), and prints its id and status
(--json: the task, as below). Exit status 3 when there is no task with
that id, 1 when it has already finished.

With --status, --queue or --name instead of an ID it cancels every
queued or running task matching all of them, a page of ids at a time
and each task in a statement of its own (workers claim on meanwhile),
and prints how many (--json: {"canceled": N}).

` + taskJSONHelp

const retryHelp = `Queues a failed or canceled task again and prints its id and status
(--json: the task, as below). Exit status 3 when there is no task with
that id, 1 when it is not failed or canceled.

With --status, --queue or --name instead of an ID it queues again every
failed or canceled task matching all of them (a step of a canceled
workflow is left to workflow retry), as cancel does, and prints how
many (--json: {"retried": N}).

` + taskJSONHelp

const deleteHelp = `Deletes a task no worker holds (queued, succeeded, failed or canceled)
with its keys, and prints its id (--json: the task as it was, as below).
Exit status 3 when there is no task with that id, 1 when it is running
(cancel it first) or a workflow that has not ended holds it (cancel the
workflow first).

With --status, --queue or --name instead of an ID it deletes every
such task matching all of them, as cancel does, and prints how many
(--json: {"deleted": N}).

` + taskJSONHelp

const purgeHelp = `Deletes finished tasks (succeeded, failed, canceled) that finished more
than --older-than ago, with their keys, and prints how many
(--json: {"purged": N}).`

func cmdStats(ctx context.Context, e *env, args []string) error {
	fs := e.dbFlags()
	queue := fs.String("queue", "", "only this `queue`")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	c, err := e.client(ctx)
	if err != nil {
		return err
	}
	stats, err := c.Stats(ctx, *queue)
	if err != nil {
		return err
	}
	all, err := c.PausedQueues(ctx)
	if err != nil {
		return err
	}
	pauses := []pauseDoc{}
	var shown []cairnq.QueuePause
	for _, p := range all {
		if *queue == "" || p.Queue == *queue {
			pauses, shown = append(pauses, pauseDocOf(p)), append(shown, p)
		}
	}
	if e.db.json {
		return writeJSON(e.out, statsDoc{Queues: stats, Paused: pauses})
	}
	printStats(e.out, stats)
	printPauses(e.out, shown)
	return nil
}

// statsDoc is stats --json.
type statsDoc struct {
	Queues map[string]cairnq.StatusCounts `json:"queues"`
	Paused []pauseDoc                     `json:"paused"`
}

func printStats(out io.Writer, stats map[string]cairnq.StatusCounts) {
	queues := make([]string, 0, len(stats))
	for q := range stats {
		queues = append(queues, q)
	}
	sort.Strings(queues)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "queue\tqueued\trunning\tsucceeded\tfailed\tcanceled\t")
	for _, q := range queues {
		if q == cairnq.WorkflowName {
			continue // the workflows' records, counted below as workflows
		}
		s := stats[q]
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t\n", printable(q), s.Queued, s.Running, s.Succeeded, s.Failed, s.Canceled)
	}
	w.Flush()
	if s, ok := stats[cairnq.WorkflowName]; ok {
		fmt.Fprintf(out, "workflows: %d live, %d succeeded, %d failed, %d canceled (cairnq workflow list)\n",
			s.Queued+s.Running, s.Succeeded, s.Failed, s.Canceled)
	}
}

func cmdList(ctx context.Context, e *env, args []string) error {
	fs := e.dbFlags()
	var o cairnq.ListOptions
	fs.Func("status", "only this `status` (queued, running, succeeded, failed, canceled)", statusFlag(&o.Status, cairnq.StatusQueued, cairnq.StatusRunning, cairnq.StatusSucceeded, cairnq.StatusFailed, cairnq.StatusCanceled))
	fs.StringVar(&o.Queue, "queue", "", "only this `queue`")
	fs.StringVar(&o.Name, "name", "", "only this task `name`")
	fs.StringVar(&o.Search, "search", "", "only tasks whose payload or error holds this `text` (reads every task the other flags leave)")
	limit := fs.Int("limit", 20, "at most this many (at least 1); fewer than match are noted on stderr")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	return printList(ctx, e, &o, *limit)
}

// printList prints the newest limit tasks o matches, as list does.
func printList(ctx context.Context, e *env, o *cairnq.ListOptions, limit int) error {
	if limit < 1 {
		return e.usageError("--limit must be at least 1, got %d", limit)
	}
	c, err := e.client(ctx)
	if err != nil {
		return err
	}
	// One row more than shown tells whether the limit cut the list short.
	o.Limit = limit
	if limit < math.MaxInt {
		o.Limit++
	}
	tasks, err := c.List(ctx, o)
	if err != nil {
		return err
	}
	if len(tasks) > limit {
		tasks = tasks[:limit]
		fmt.Fprintf(e.errOut, "cairnq: showing the newest %d of %s; use --limit for more\n", limit, matching(ctx, c, o))
	}
	if e.db.json {
		if tasks == nil {
			tasks = []*cairnq.Task{}
		}
		return writeJSON(e.out, struct {
			Tasks []*cairnq.Task `json:"tasks"`
		}{tasks})
	}
	// A list with failed tasks shows when each failed and why.
	failed := slices.ContainsFunc(tasks, func(t *cairnq.Task) bool { return t.Status == cairnq.StatusFailed })
	w := tabwriter.NewWriter(e.out, 0, 0, 2, ' ', 0)
	head := "id\tname\tqueue\tstatus\tattempt\tcreated"
	if failed {
		head += "\tfailed\terror"
	}
	fmt.Fprintln(w, head)
	for _, t := range tasks {
		attempts := fmt.Sprintf("%d/%d", t.Attempt, t.MaxAttempts)
		if t.Name == cairnq.WorkflowName {
			attempts = "-" // a record's are unbounded: its steps have the attempts
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s", printable(t.ID), printable(t.Name), printable(t.Queue), t.Status, attempts,
			t.CreatedAt.Format(time.DateTime))
		if failed && t.Status == cairnq.StatusFailed {
			fmt.Fprintf(w, "\t%s\t%s", t.CompletedAt.Format(time.DateTime), errorLine(t.Error))
		}
		fmt.Fprintln(w)
	}
	return w.Flush()
}

// errorLine is a failed task's error on one short line of a table: its
// code (or type) and its message, its whitespace folded, cut to
// errorLineMax runes.
func errorLine(env *cairnq.ErrorEnvelope) string {
	if env == nil {
		return ""
	}
	kind := env.Code
	if kind == "" {
		kind = env.Type
	}
	msg := strings.Join(strings.Fields(env.Message), " ")
	if kind != "" {
		msg = kind + ": " + msg
	}
	return cut(msg, errorLineMax)
}

// errorLineMax bounds the error list shows of a failed task.
const errorLineMax = 80

// matchCountWait bounds the count a cut list reads: the counts read
// every task they count, which on a large database takes longer than the
// list itself is worth.
const matchCountWait = 2 * time.Second

// matching says how many tasks match o's filters: exactly from the
// counts per queue and status where no name or search filters them and the count
// takes at most matchCountWait, else "more that match".
func matching(ctx context.Context, c *cairnq.Client, o *cairnq.ListOptions) string {
	if o.Name != "" || o.Search != "" {
		return "more that match"
	}
	ctx, cancel := context.WithTimeout(ctx, matchCountWait)
	defer cancel()
	stats, err := c.Stats(ctx, o.Queue)
	if err != nil {
		return "more that match"
	}
	n := 0
	for _, s := range stats {
		switch o.Status {
		case "":
			n += s.Queued + s.Running + s.Succeeded + s.Failed + s.Canceled
		case cairnq.StatusQueued:
			n += s.Queued
		case cairnq.StatusRunning:
			n += s.Running
		case cairnq.StatusSucceeded:
			n += s.Succeeded
		case cairnq.StatusFailed:
			n += s.Failed
		case cairnq.StatusCanceled:
			n += s.Canceled
		}
	}
	if n <= o.Limit-1 { // a purge since the list: at least the list and one more match
		return "more that match"
	}
	return plural(n, "task")
}

// writeJSON writes v as one JSON document on one line.
func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printJSON writes v as one indented JSON document for a person to read,
// with nothing in it a terminal acts on (see printableJSON).
func printJSON(out io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := out.Write(printableJSON(b.Bytes()))
	return err
}

func cmdGet(ctx context.Context, e *env, args []string) error {
	fs := e.dbFlags()
	findKey := fs.Bool("find-key", false, fmt.Sprintf("look the key up however many keys there are (without it, only among fewer than %d)", getKeyScan))
	if err := e.parse(fs, args); err != nil {
		return err
	}
	c, err := e.client(ctx)
	if err != nil {
		return err
	}
	t, err := c.Get(ctx, fs.Arg(0))
	if err != nil {
		return fmt.Errorf("get %s: %w", fs.Arg(0), err)
	}
	if e.db.json {
		return writeJSON(e.out, t)
	}
	// The key pointing at the task: no index of protocol v1 finds it by
	// task, so this reads the keys, as the console does, only where they
	// are few unless asked.
	scan := getKeyScan
	if *findKey {
		scan = 0
	}
	key, looked, err := engine.Of(c.Store()).ConsoleTaskKey(ctx, t.ID, scan)
	if err != nil {
		return err
	}
	if !looked {
		key = fmt.Sprintf("not looked up: %d keys or more, none indexed by task (--find-key reads them all)", getKeyScan)
	}
	if err := printTask(e.out, t, key, time.Now()); err != nil {
		return err
	}
	return printDurable(e.out, t)
}

// getKeyScan is how many keys get reads at most to find a task's key
// without --find-key: the console's scan bound.
const getKeyScan = 5000

func cmdCancel(ctx context.Context, e *env, args []string) error {
	return settle(ctx, e, args, nil, "queued or running", taskAction{
		one: func(c *cairnq.Client, id string) (*cairnq.Task, error) { return c.Cancel(ctx, id) },
		all: func(c *cairnq.Client, f cairnq.TaskFilter) (int, error) { return c.CancelByFilter(ctx, f) },
	})
}

func cmdRetry(ctx context.Context, e *env, args []string) error {
	var o cairnq.RetryOptions
	flags := func(fs *flag.FlagSet) {
		fs.BoolVar(&o.ResetAttempt, "reset-attempt", false, "restart the attempt count, giving the task its full max attempts again")
	}
	return settle(ctx, e, args, flags, "failed or canceled", taskAction{
		one: func(c *cairnq.Client, id string) (*cairnq.Task, error) { return c.Retry(ctx, id, &o) },
		all: func(c *cairnq.Client, f cairnq.TaskFilter) (int, error) { return c.RetryByFilter(ctx, f, &o) },
	})
}

func cmdDelete(ctx context.Context, e *env, args []string) error {
	return settle(ctx, e, args, nil, "queued or finished tasks no live workflow holds", taskAction{
		one: func(c *cairnq.Client, id string) (*cairnq.Task, error) { return c.Delete(ctx, id) },
		all: func(c *cairnq.Client, f cairnq.TaskFilter) (int, error) { return c.DeleteByFilter(ctx, f) },
	})
}

// taskAction is what cancel, retry and delete do to one task (one) and
// to every task matching a filter (all).
type taskAction struct {
	one func(*cairnq.Client, string) (*cairnq.Task, error)
	all func(*cairnq.Client, cairnq.TaskFilter) (int, error)
}

// settle runs cancel, retry or delete on the one task id given, or on
// every task matching the filter flags.
func settle(ctx context.Context, e *env, args []string, extra func(*flag.FlagSet), states string, act taskAction) error {
	fs := e.dbFlags()
	if extra != nil {
		extra(fs)
	}
	var f cairnq.TaskFilter
	fs.Func("status", "with no ID: every task of this `status`", statusFlag(&f.Status, cairnq.StatusQueued,
		cairnq.StatusRunning, cairnq.StatusSucceeded, cairnq.StatusFailed, cairnq.StatusCanceled))
	fs.StringVar(&f.Queue, "queue", "", "with no ID: every task of this `queue`")
	fs.StringVar(&f.Name, "name", "", "with no ID: every task of this `name`")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	byFilter := f != (cairnq.TaskFilter{})
	switch {
	case byFilter && fs.NArg() > 0:
		return e.usageError("give a task's ID or --status, --queue and --name, not both")
	case !byFilter && fs.NArg() == 0:
		return e.usageError("give a task's ID, or --status, --queue or --name for every task matching them")
	}
	c, err := e.client(ctx)
	if err != nil {
		return err
	}
	if byFilter {
		n, err := act.all(c, f)
		if err != nil {
			return fmt.Errorf("%s: %w (after %d %s)", e.cmd.name, err, n, pastTense(e.cmd.name))
		}
		if e.db.json {
			return writeJSON(e.out, map[string]int{pastTense(e.cmd.name): n})
		}
		fmt.Fprintf(e.out, "%s %s\n", pastTense(e.cmd.name), plural(n, "task"))
		return nil
	}
	id := fs.Arg(0)
	t, err := act.one(c, id)
	if err != nil {
		return err
	}
	if t == nil {
		ref, err := c.GetStatus(ctx, id)
		if errors.Is(err, cairnq.ErrNotFound) {
			return fmt.Errorf("%s: %w: %s", e.cmd.name, err, id)
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%s: task %s is %s; only %s can be %s", e.cmd.name, id, ref.Status, statesNoun(states), pastTense(e.cmd.name))
	}
	if e.db.json {
		return writeJSON(e.out, t)
	}
	if e.cmd.name == "delete" {
		fmt.Fprintf(e.out, "%s deleted (was %s)\n", printable(t.ID), t.Status)
		return nil
	}
	fmt.Fprintf(e.out, "%s %s\n", printable(t.ID), t.Status)
	return nil
}

// statesNoun is states as the subject of "can be": "failed or canceled
// tasks", or states as it is when it names the tasks already.
func statesNoun(states string) string {
	if strings.Contains(states, "tasks") {
		return states
	}
	return states + " tasks"
}

func pastTense(verb string) string {
	return map[string]string{"cancel": "canceled", "retry": "retried", "delete": "deleted"}[verb]
}

func cmdPurge(ctx context.Context, e *env, args []string) error {
	fs := e.dbFlags()
	var o cairnq.PurgeOptions
	fs.DurationVar(&o.OlderThan, "older-than", 24*time.Hour, "keep tasks that finished more recently than this")
	fs.Func("status", "only this terminal `status` (succeeded, failed, canceled)", statusFlag(&o.Status, cairnq.StatusSucceeded, cairnq.StatusFailed, cairnq.StatusCanceled))
	fs.StringVar(&o.Queue, "queue", "", "only this `queue`")
	fs.StringVar(&o.Name, "name", "", "only this task `name`")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	c, err := e.client(ctx)
	if err != nil {
		return err
	}
	total := 0
	for {
		ids, err := c.Purge(ctx, &o)
		total += len(ids)
		if err != nil {
			return err
		}
		if len(ids) < cairnqPurgeBatch {
			break
		}
	}
	if e.db.json {
		return writeJSON(e.out, struct {
			Purged int `json:"purged"`
		}{total})
	}
	fmt.Fprintf(e.out, "purged %d tasks\n", total)
	return nil
}

// cairnqPurgeBatch is how many rows one Purge deletes by default: a full
// batch means there may be more.
const cairnqPurgeBatch = 1000
