package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// printTask prints t for a person: one field a line, times in UTC with
// how long ago or ahead, the key that points at it (key, "" for none),
// then its payload, result and metadata (the SDK's own members, shown
// below it, left out) as indented JSON and its error.
// An error a succeeded task still holds is an earlier attempt's, and
// says so.
func printTask(w io.Writer, t *cairnq.Task, key string, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	field := func(name, value string) { fmt.Fprintf(tw, "%s\t%s\n", name, value) }
	at := func(t time.Time) string {
		s := t.UTC().Format("2006-01-02 15:04:05.000 UTC")
		if d := now.Sub(t).Round(time.Second); d < 0 {
			return s + " (in " + (-d).String() + ")"
		}
		return s + " (" + now.Sub(t).Round(time.Second).String() + " ago)"
	}
	field("id", printable(t.ID))
	field("name", printable(t.Name))
	field("queue", printable(t.Queue))
	field("status", fmt.Sprintf("%s, %s", t.Status, attemptText(t)))
	if key == "" {
		key = "none"
	}
	// key may be a sentence saying it was not looked up.
	field("key", printable(key))
	field("priority", fmt.Sprint(t.Priority))
	field("created", at(t.CreatedAt))
	field("run at", at(t.RunAt))
	if !t.CompletedAt.IsZero() {
		field("completed", at(t.CompletedAt))
	}
	if t.WorkerID != "" {
		w := printable(t.WorkerID)
		if !t.LeaseUntil.IsZero() {
			w += ", its lease until " + at(t.LeaseUntil)
		}
		field("worker", w)
	}
	if !t.CancelRequestedAt.IsZero() {
		field("cancel asked", at(t.CancelRequestedAt))
	}
	if t.Progress != nil || t.Message != nil {
		p := ""
		if t.Progress != nil {
			p = fmt.Sprintf("%.0f%%", *t.Progress*100)
		}
		if t.Message != nil {
			p = strings.TrimSpace(p + " " + printable(*t.Message))
		}
		field("progress", p)
	}
	for _, f := range []struct{ name, v string }{{"parent", t.ParentID}, {"root", t.RootID}, {"correlation", t.CorrelationID}} {
		if f.v != "" && (f.name != "root" || f.v != t.ID) {
			field(f.name, printable(f.v))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, doc := range []struct {
		name string
		raw  json.RawMessage
	}{{"payload", t.Payload}, {"result", t.Result}, {"metadata", engine.UserMetadata(t.Metadata)}} {
		if len(doc.raw) == 0 || doc.name == "metadata" && string(doc.raw) == "{}" {
			continue
		}
		var b bytes.Buffer
		if json.Indent(&b, doc.raw, "  ", "  ") != nil {
			b.Reset()
			b.Write(doc.raw)
		}
		fmt.Fprintf(w, "%s:\n  %s\n", doc.name, printableJSON(b.Bytes()))
	}
	if e := t.Error; e != nil {
		head := "error"
		if t.Status == cairnq.StatusSucceeded {
			head = "error of an earlier attempt (the task then succeeded)"
		}
		kind := e.Code
		if kind == "" {
			kind = e.Type
		} else if e.Type != "" {
			kind = e.Type + " " + kind
		}
		fmt.Fprintf(w, "%s:\n  %s: %s\n  retryable: %v\n", head, printable(kind), printable(e.Message), e.Retryable)
		if len(e.Details) > 0 {
			b, _ := json.Marshal(e.Details)
			fmt.Fprintf(w, "  details: %s\n", printableJSON(b))
		}
	}
	if es := cairnq.AttemptErrorsOf(t); len(es) > 0 {
		fmt.Fprintln(w, "every attempt's error (the newest ten, oldest first):")
		for _, a := range es {
			kind := a.Code
			if kind == "" {
				kind = a.Type
			}
			fmt.Fprintf(w, "  attempt %d, %s: %s: %s\n", a.Attempt, at(a.At), printable(kind), printable(cut(a.Message, errorLineMax)))
		}
	}
	return nil
}

// attemptText is t's attempts, "attempt 2 of 3"; a workflow's record,
// whose attempts are unbounded and mean nothing to a person, says so.
func attemptText(t *cairnq.Task) string {
	if t.Name == cairnq.WorkflowName {
		return "a workflow's record (cairnq workflow get " + printable(t.ID) + " shows its steps)"
	}
	return fmt.Sprintf("attempt %d of %d", t.Attempt, t.MaxAttempts)
}
