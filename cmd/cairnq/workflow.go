package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	cairnq "github.com/cairnq/cairnq-go"
)

const workflowHelp = `Lists the workflows (Client.SubmitWorkflow), or shows, cancels or retries
one, named by its record task's id:

  list       the newest workflows' records, as list prints tasks (--json:
             {"tasks": [...]}); --status and --limit as list's. A live
             workflow's record is queued (running only while a worker
             advances it): --status queued lists the live workflows,
             which get shows as running.
  get ID     the workflow's status and each step's state, task id and
             attempts. Reads only.
  cancel ID  cancels the workflow: the record, its queued steps at once,
             its running steps asked to stop. A workflow that has ended is
             left as it is. Prints the record's id and status.
  retry ID   runs again the steps of a failed or canceled workflow that did
             not succeed, and submits the ones that never ran as what they
             wait for succeeds. Prints the record's id and status.

Exit status 3 when there is no task with that id, 1 when the task is not
a workflow's record (and, for retry, when the workflow has not failed or
been canceled).

--json: get prints {"id", "status", "continue_on_failure", "steps":
[{"step", "task", "after", "state", "task_id", "attempt"}]}, where a
step's state is its task's status, or waiting, skipped or lost; cancel
and retry print the record task.`

// workflowVerbs are workflow's verbs.
var workflowVerbs = []string{"list", "get", "cancel", "retry"}

// workflowJSON is what workflow get --json prints.
type workflowJSON struct {
	ID                string                     `json:"id"`
	Status            cairnq.Status              `json:"status"`
	ContinueOnFailure bool                       `json:"continue_on_failure"`
	Steps             []cairnq.WorkflowStepState `json:"steps"`
}

func cmdWorkflow(ctx context.Context, e *env, args []string) error {
	fs := e.dbFlags()
	o := cairnq.ListOptions{Name: cairnq.WorkflowName}
	fs.Func("status", "list: only workflows of this `status` (queued, running, succeeded, failed, canceled)", statusFlag(&o.Status, cairnq.StatusQueued, cairnq.StatusRunning, cairnq.StatusSucceeded, cairnq.StatusFailed, cairnq.StatusCanceled))
	limit := fs.Int("limit", 20, "list: at most this many (at least 1)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	verb, id := fs.Arg(0), fs.Arg(1)
	listing := false
	fs.Visit(func(f *flag.Flag) { listing = listing || f.Name == "status" || f.Name == "limit" })
	switch {
	case verb == "list" && fs.NArg() == 1:
		return printList(ctx, e, &o, *limit)
	case verb == "list":
		return e.usageError("list takes no workflow id")
	case verb == "get" || verb == "cancel" || verb == "retry":
		if fs.NArg() != 2 {
			return e.usageError("%s takes one workflow id", verb)
		}
		if listing {
			return e.usageError("--status and --limit are list's")
		}
	default:
		if n := nearest(verb, workflowVerbs); n != "" {
			return e.usageError("takes list, or get, cancel or retry before the workflow's id, got %q; did you mean %s?", verb, n)
		}
		return e.usageError("takes list, or get, cancel or retry before the workflow's id, got %q", verb)
	}
	c, err := e.client(ctx)
	if err != nil {
		return err
	}
	var rec *cairnq.Task
	var wf *cairnq.Workflow
	switch verb {
	case "get":
		wf, err = c.GetWorkflow(ctx, id)
	case "cancel":
		rec, err = c.CancelWorkflow(ctx, id)
	case "retry":
		rec, err = c.RetryWorkflow(ctx, id)
	}
	var ae *cairnq.ArgumentError
	if errors.As(err, &ae) {
		// The id names a task that is no workflow, or one that cannot
		// be retried now: as retry of a queued task, not a usage error.
		return fmt.Errorf("workflow %s %s: %s", verb, id, ae.Reason)
	}
	if err != nil {
		return fmt.Errorf("workflow %s %s: %w", verb, id, err)
	}
	if wf != nil {
		return printWorkflow(e, wf)
	}
	if e.db.json {
		return writeJSON(e.out, rec)
	}
	fmt.Fprintf(e.out, "%s %s\n", printable(rec.ID), rec.Status)
	return nil
}

// printWorkflow prints a workflow as a table, or as workflowJSON. Step
// and task names are anybody's text, escaped as every table's are (see
// printable).
func printWorkflow(e *env, wf *cairnq.Workflow) error {
	if e.db.json {
		return writeJSON(e.out, workflowJSON{ID: wf.ID, Status: wf.Status, ContinueOnFailure: wf.ContinueOnFailure, Steps: wf.Steps})
	}
	policy := "cancel the rest on a failure"
	if wf.ContinueOnFailure {
		policy = "continue the other branches on a failure"
	}
	fmt.Fprintf(e.out, "workflow %s: %s (%s)\n", printable(wf.ID), wf.Status, policy)
	tw := tabwriter.NewWriter(e.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tSTATE\tATTEMPT\tTASK ID\tTASK\tAFTER")
	for _, s := range wf.Steps {
		id, attempt := "-", "-"
		if s.TaskID != "" {
			id, attempt = printable(s.TaskID), fmt.Sprint(s.Attempt)
		}
		after := printable(strings.Join(s.After, ","))
		if after == "" {
			after = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", printable(s.Step), s.State, attempt, id, printable(s.Task), after)
	}
	return tw.Flush()
}
