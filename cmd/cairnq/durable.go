package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

const eventHelp = `Sends an event to a task whose durable handler waits for it
(cairnq.WaitEvent), or will: 'cairnq event send ID NAME [JSON]' delivers
the event NAME with the JSON payload (default null) to task ID, or, with
--key, to the task with the key ID. A task waiting for it is made due at
once. An event counts once per task and name: a second one, one after
the wait timed out, or one to a task that has ended is refused (exit
status 1). Exit status 3 when there is no such task.

--json: {"sent": true, "task": ID, "event": NAME}.`

func cmdEvent(ctx context.Context, e *env, args []string) error {
	fs := e.dbFlags()
	byKey := fs.Bool("key", false, "ID is a task's key, not its id")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if verb := fs.Arg(0); verb != "send" {
		return e.usageError("takes send before the task and the event, got %q", verb)
	}
	if fs.NArg() < 3 {
		return e.usageError("takes send, a task's id (or --key its key), an event's name and an optional JSON payload")
	}
	target, name := fs.Arg(1), fs.Arg(2)
	var payload any
	if fs.NArg() == 4 {
		if !json.Valid([]byte(fs.Arg(3))) {
			return e.usageError("the payload is not valid JSON")
		}
		payload = json.RawMessage(fs.Arg(3))
	}
	c, err := e.client(ctx)
	if err != nil {
		return err
	}
	if *byKey {
		err = c.SendEventByKey(ctx, target, name, payload)
	} else {
		err = c.SendEvent(ctx, target, name, payload)
	}
	if err != nil {
		return fmt.Errorf("event send %s %s: %w", target, name, err)
	}
	if e.db.json {
		return writeJSON(e.out, map[string]any{"sent": true, "task": target, "event": name})
	}
	fmt.Fprintf(e.out, "sent %s to %s\n", name, target)
	return nil
}

// printDurable writes what t's durable handler recorded, if anything:
// its steps, the events delivered to it, and what it is parked in.
func printDurable(w io.Writer, t *cairnq.Task) error {
	rec, err := cairnq.DurableOf(t)
	if err != nil {
		// get reads what is there: a record another SDK or a hand made
		// is no failure of the command.
		fmt.Fprintf(w, "\ndurable record not readable: %s\n", printable(err.Error()))
		return nil
	}
	if len(rec.Steps) == 0 && len(rec.Events) == 0 {
		return nil
	}
	if p := rec.Parked; p != nil {
		if p.Kind == cairnq.DurableWait {
			fmt.Fprintf(w, "\nwaiting for event \"%s\" until %s\n", printable(p.Name), stamp(p.Until))
		} else {
			fmt.Fprintf(w, "\nsleeping in \"%s\" until %s\n", printable(p.Name), stamp(p.Until))
		}
	}
	if len(rec.Steps) > 0 {
		fmt.Fprintf(w, "\ndurable steps:\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "#\tSTEP\tKIND\tATTEMPT\tAT\tTOOK\tOUTPUT / UNTIL")
		for i, s := range rec.Steps {
			kind, last := "step", string(s.Output)
			if s.Kind != "" {
				kind, last = s.Kind, "until "+stamp(s.Until)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", i, printable(s.Name), kind, s.Attempt, stamp(s.At), s.Took, cut(last, 60))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(rec.Events) > 0 {
		fmt.Fprintf(w, "\nevents:\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "EVENT\tAT\tPAYLOAD")
		for _, ev := range rec.Events {
			payload := string(ev.Payload)
			if ev.TimedOut {
				payload = "(its wait timed out)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", printable(ev.Name), stamp(ev.At), cut(payload, 60))
		}
		return tw.Flush()
	}
	return nil
}

// stamp is t in UTC to the millisecond.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// cut is s escaped for a table's cell (printable), cut to n runes.
func cut(s string, n int) string {
	r := []rune(printable(s))
	if len(r) > n {
		r = append(r[:n-1], '…')
	}
	return string(r)
}
