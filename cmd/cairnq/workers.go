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
"silent"}]}, running being the calls at the last beat.`

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
				Concurrency: w.Concurrency, Running: w.Running, StartedAt: w.StartedAt.UnixMilli(),
				BeatAt: w.BeatAt.UnixMilli(), Every: w.Every.Milliseconds(), Silent: w.Silent(now)}
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
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d/%d\t%s\t%s ago\t%s\n", printable(w.ID), printable(w.Host), w.PID,
			printable(strings.Join(w.Queues, ",")), w.Running, w.Concurrency, w.StartedAt.Format(time.DateTime),
			now.Sub(w.BeatAt).Round(time.Second), state)
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
