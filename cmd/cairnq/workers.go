package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

const workersHelp = `Lists the Go workers running on the database, idle ones too: each
running worker rewrites a row every 10 seconds and deletes it as it
stops, so a worker listed as silent has missed three beats (killed, or
cut off from the database). Workers of the TypeScript and Python SDKs
write no row; the tasks they run name them (list, get).

--json: {"workers": [{"id", "host", "pid", "queues", "names",
"concurrency", "running", "started_at_ms", "beat_at_ms", "every_ms",
"silent"}]}, running being the calls at the last beat; a time it
does not know is 0.`

// workerDoc is a worker in workers' --json.
type workerDoc struct {
	ID          string   `json:"id"`
	Host        string   `json:"host"`
	PID         int      `json:"pid"`
	Queues      []string `json:"queues"`
	Names       []string `json:"names"`
	Concurrency int      `json:"concurrency"`
	Running     int      `json:"running"`
	StartedAt   int64    `json:"started_at_ms"`
	BeatAt      int64    `json:"beat_at_ms"`
	Every       int64    `json:"every_ms"`
	Silent      bool     `json:"silent"`
}

func cmdWorkers(ctx context.Context, e *env, args []string) error {
	fs := e.dbFlags()
	if err := e.parse(fs, args); err != nil {
		return err
	}
	c, err := e.client(ctx)
	if err != nil {
		return err
	}
	ws, err := c.Workers(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	if e.db.json {
		docs := make([]workerDoc, len(ws))
		for i, w := range ws {
			docs[i] = workerDoc{ID: w.ID, Host: w.Host, PID: w.PID, Queues: nonNil(w.Queues), Names: nonNil(w.Names),
				Concurrency: w.Concurrency, Running: w.Running, StartedAt: msOf(w.StartedAt),
				BeatAt: msOf(w.BeatAt), Every: w.Every.Milliseconds(), Silent: w.Silent(now)}
		}
		return writeJSON(e.out, map[string][]workerDoc{"workers": docs})
	}
	if len(ws) == 0 {
		fmt.Fprintln(e.out, "no Go worker is running on this database")
		return nil
	}
	tw := tabwriter.NewWriter(e.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "id\thost\tpid\tqueues\trunning\tstarted\tlast beat\tstate")
	for _, w := range ws {
		state := "running"
		if w.Silent(now) {
			state = "silent"
		}
		started, beat := "-", "-"
		if !w.StartedAt.IsZero() {
			started = w.StartedAt.Format(time.DateTime)
		}
		if !w.BeatAt.IsZero() {
			beat = now.Sub(w.BeatAt).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d/%d\t%s\t%s\t%s\n", printable(w.ID), printable(w.Host), w.PID,
			printable(strings.Join(w.Queues, ",")), w.Running, w.Concurrency, started, beat, state)
	}
	return tw.Flush()
}

// nonNil is s, or an empty slice for nil, so that JSON shows [].
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

const schedulesHelp = `Lists the periodic schedules (cairnq.Scheduler entries) run on the
database: each running scheduler rewrites its entries' rows every 30
seconds, and the rows stay when it stops (another may run the same
entries), so an entry listed as silent has no scheduler running it and
its next slot will not be submitted until one does. Rows silent for a
day are deleted by the next scheduler to start. Other SDKs' schedulers
write no row.

--json: {"schedules": [{"id", "spec", "name", "queue", "missed",
"next_at_ms", "last_slot_ms" (0: none yet), "beat_at_ms", "every_ms",
"silent"}]}.`

// scheduleDoc is an entry in schedules' --json.
type scheduleDoc struct {
	ID       string `json:"id"`
	Spec     string `json:"spec"`
	Name     string `json:"name"`
	Queue    string `json:"queue"`
	Missed   string `json:"missed"`
	Next     int64  `json:"next_at_ms"`
	LastSlot int64  `json:"last_slot_ms"`
	BeatAt   int64  `json:"beat_at_ms"`
	Every    int64  `json:"every_ms"`
	Silent   bool   `json:"silent"`
}

func cmdSchedules(ctx context.Context, e *env, args []string) error {
	fs := e.dbFlags()
	if err := e.parse(fs, args); err != nil {
		return err
	}
	c, err := e.client(ctx)
	if err != nil {
		return err
	}
	es, err := c.Schedules(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	if e.db.json {
		docs := make([]scheduleDoc, len(es))
		for i, s := range es {
			docs[i] = scheduleDoc{ID: s.ID, Spec: s.Spec, Name: s.Name, Queue: s.Queue, Missed: s.Missed,
				Next: msOf(s.Next), LastSlot: msOf(s.LastSlot), BeatAt: msOf(s.BeatAt), Every: s.Every.Milliseconds(), Silent: s.Silent(now)}
		}
		return writeJSON(e.out, map[string][]scheduleDoc{"schedules": docs})
	}
	if len(es) == 0 {
		fmt.Fprintln(e.out, "no periodic schedule has run on this database in the last day")
		return nil
	}
	tw := tabwriter.NewWriter(e.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "id\tspec\tname\tqueue\tnext run\tlast slot\tstate")
	for _, s := range es {
		state, next, last := "running", "-", "-"
		if s.Silent(now) {
			state = "silent: no scheduler runs it"
		}
		if !s.Next.IsZero() {
			next = s.Next.UTC().Format(time.DateTime) + " UTC"
			if d := s.Next.Sub(now); d > 0 {
				next += " (in " + d.Round(time.Second).String() + ")"
			}
		}
		if !s.LastSlot.IsZero() {
			last = s.LastSlot.UTC().Format(time.DateTime) + " UTC"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", printable(s.ID), printable(s.Spec), printable(s.Name), printable(s.Queue), next, last, state)
	}
	return tw.Flush()
}

// msOf is t in epoch milliseconds, 0 for the zero time.
func msOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
