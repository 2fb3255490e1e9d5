package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

const pauseHelp = `Pauses QUEUE for every Go worker on the database: each one stops
claiming from it within its poll interval (500ms by default), and the
tasks it is running finish as usual. Submits go on; the tasks wait,
queued, until resume. The pause is a row in the database, so it holds
across restarts and needs no worker running. Workers of the TypeScript
and Python SDKs do not read it and go on claiming from the queue.

Pausing a paused queue changes nothing and says since when and by whom
it is paused. --by names who pauses (default: $USER@host),
--reason says why; both show in stats, doctor and the console.

--json: {"queue": Q, "paused_at_ms": N, "by": S, "reason": S, "already": B}.`

const resumeHelp = `Lifts pause's pause of QUEUE: every Go worker claims from it again
within its poll interval. Resuming a queue that is not paused changes
nothing and says so (exit status 0).

--json: {"queue": Q, "resumed": B, "paused_at_ms": N, "by": S, "reason": S}
(the pause lifted; resumed false and the rest absent when there was none).`

// oneQueue is the argument of pause and resume.
var oneQueue = arity{1, 1, "one queue"}

// pauseDoc is a pause in pause's, resume's and stats' --json.
type pauseDoc struct {
	Queue    string `json:"queue"`
	PausedAt int64  `json:"paused_at_ms,omitempty"`
	By       string `json:"by,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

func pauseDocOf(p cairnq.QueuePause) pauseDoc {
	d := pauseDoc{Queue: p.Queue, By: p.By, Reason: p.Reason}
	if !p.At.IsZero() {
		d.PausedAt = p.At.UnixMilli()
	}
	return d
}

func cmdPause(ctx context.Context, e *env, args []string) error {
	fs := e.dbFlags()
	var o cairnq.PauseOptions
	fs.StringVar(&o.By, "by", "", "who pauses the queue (default: $USER@host)")
	fs.StringVar(&o.Reason, "reason", "", "why, for the operators who read it")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	c, err := e.client(ctx)
	if err != nil {
		return err
	}
	if o.By == "" {
		o.By = operatorName()
	}
	queue := fs.Arg(0)
	p, already, err := c.PauseQueue(ctx, queue, &o)
	if err != nil {
		return err
	}
	if e.db.json {
		return writeJSON(e.out, struct {
			pauseDoc
			Already bool `json:"already"`
		}{pauseDocOf(*p), already})
	}
	if already {
		fmt.Fprintf(e.out, "queue %s was already paused: %s\n", printable(queue), pauseText(*p))
		return nil
	}
	fmt.Fprintf(e.out, "queue %s paused for every Go worker: %s\n", printable(queue), pauseText(*p))
	return nil
}

func cmdResume(ctx context.Context, e *env, args []string) error {
	fs := e.dbFlags()
	if err := e.parse(fs, args); err != nil {
		return err
	}
	c, err := e.client(ctx)
	if err != nil {
		return err
	}
	queue := fs.Arg(0)
	p, err := c.ResumeQueue(ctx, queue)
	if err != nil {
		return err
	}
	if e.db.json {
		doc := struct {
			pauseDoc
			Resumed bool `json:"resumed"`
		}{pauseDoc{Queue: queue}, p != nil}
		if p != nil {
			doc.pauseDoc = pauseDocOf(*p)
		}
		return writeJSON(e.out, doc)
	}
	if p == nil {
		fmt.Fprintf(e.out, "queue %s was not paused\n", printable(queue))
		return nil
	}
	fmt.Fprintf(e.out, "queue %s resumed (it was paused %s)\n", printable(queue), pauseText(*p))
	return nil
}

// operatorName is the user running the command at this host, for a
// pause's By.
func operatorName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	name := os.Getenv("USER")
	if u, err := user.Current(); name == "" && err == nil {
		name = u.Username
	}
	if name == "" {
		name = "unknown-user"
	}
	return name + "@" + host
}

// pauseText says since when, by whom and why a queue is paused.
func pauseText(p cairnq.QueuePause) string {
	s := "by " + printable(p.By)
	if p.By == "" {
		s = "by an unknown writer"
	}
	if !p.At.IsZero() {
		s = fmt.Sprintf("since %s %s", p.At.UTC().Format(time.DateTime+" UTC"), s)
	}
	if p.Reason != "" {
		s += ": " + printable(p.Reason)
	}
	return s
}

// printPauses lists the paused queues under stats' table.
func printPauses(out io.Writer, pauses []cairnq.QueuePause) {
	for _, p := range pauses {
		fmt.Fprintf(out, "paused: %s, %s\n", printable(p.Queue), pauseText(p))
	}
}
