package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
)

// workflow get shows each step's state, cancel cancels the workflow and
// its queued steps, retry queues again what did not succeed; a task that
// is no workflow's record is an error (exit 1), a missing id exit 3, a
// verb the command lacks a usage error.
func TestCLIWorkflow(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "tasks.db")
	c, err := cairnq.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
		{Step: "extract", Task: "etl.extract"},
		{Step: "load", Task: "etl.load", After: []string{"extract"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := c.Submit(ctx, "plain", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	run := func(args ...string) result { t.Helper(); return ok(t, append(args, "--db", db)...) }
	code := func(want int, args ...string) result {
		t.Helper()
		args = append(args, "--db", db)
		r := cli(t, args...)
		if r.code != want {
			t.Fatalf("cairnq %s: exit %d, want %d\n%s", strings.Join(args, " "), r.code, want, r)
		}
		return r
	}

	// list shows the records, not the steps or the plain task.
	var listed struct {
		Tasks []struct{ ID string } `json:"tasks"`
	}
	decode(t, run("workflow", "list", "--json"), &listed)
	if len(listed.Tasks) != 1 || listed.Tasks[0].ID != rec.ID {
		t.Errorf("workflow list --json = %+v, want the record %s alone", listed.Tasks, rec.ID)
	}
	if r := run("workflow", "list", "--status", "queued"); !strings.Contains(r.stdout, rec.ID) || strings.Contains(r.stdout, plain.ID) {
		t.Errorf("workflow list --status queued:\n%s", r)
	}
	if r := run("workflow", "list", "--status", "failed"); strings.Contains(r.stdout, rec.ID) {
		t.Errorf("workflow list --status failed shows the queued workflow:\n%s", r)
	}
	code(exitUsage, "workflow", "list", rec.ID)
	code(exitUsage, "workflow", "get", rec.ID, "--status", "failed")

	r := run("workflow", "get", rec.ID)
	for _, want := range []string{"workflow " + rec.ID + ": running", "extract", "queued", "load", "waiting"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("workflow get lacks %q:\n%s", want, r)
		}
	}
	var got struct {
		ID     string        `json:"id"`
		Status cairnq.Status `json:"status"`
		Steps  []struct {
			State  cairnq.StepState `json:"state"`
			TaskID *string          `json:"task_id"`
			After  []string         `json:"after"`
		} `json:"steps"`
	}
	decode(t, run("workflow", "get", "--json", rec.ID), &got)
	if got.ID != rec.ID || got.Status != cairnq.StatusRunning || len(got.Steps) != 2 ||
		got.Steps[0].State != "queued" || got.Steps[0].TaskID == nil || got.Steps[1].State != cairnq.StepWaiting ||
		got.Steps[1].TaskID != nil || len(got.Steps[1].After) != 1 {
		t.Errorf("workflow get --json = %+v", got)
	}

	if r := run("workflow", "cancel", rec.ID); r.stdout != rec.ID+" canceled\n" {
		t.Errorf("workflow cancel:\n%s", r)
	}
	decode(t, run("workflow", "get", "--json", rec.ID), &got)
	if got.Status != cairnq.StatusCanceled || got.Steps[0].State != "canceled" || got.Steps[1].State != cairnq.StepSkipped {
		t.Errorf("after cancel: %+v", got)
	}
	var task taskJSON
	decode(t, run("workflow", "retry", "--json", rec.ID), &task)
	if task.ID != rec.ID || task.Status != "queued" {
		t.Errorf("workflow retry --json = %+v", task)
	}
	decode(t, run("workflow", "get", "--json", rec.ID), &got)
	if got.Status != cairnq.StatusRunning || got.Steps[0].State != "queued" {
		t.Errorf("after retry: %+v", got)
	}

	if r := code(exitError, "workflow", "get", plain.ID); !strings.Contains(r.stderr, "not a workflow") {
		t.Errorf("workflow get of a plain task:\n%s", r)
	}
	code(exitError, "workflow", "retry", rec.ID) // running: nothing to retry
	code(exitNotFound, "workflow", "get", cairnq.NewTaskID())
	code(exitNotFound, "workflow", "cancel", cairnq.NewTaskID())
	code(exitUsage, "workflow", "show", rec.ID)
	code(exitUsage, "workflow", "get")
}
