package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/console"
)

// The workflow page draws a box per step with its state and an edge per
// dependency, follows the workflow as it runs, links the record and the
// steps to it, and cancels and retries it when writes are allowed; the
// API serves the same.
func TestConsoleWorkflowGraph(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		rec, err := c.SubmitWorkflow(ctx(t), []cairnq.WorkflowStep{
			{Step: "extract", Task: "wf.extract"},
			{Step: "left", Task: "wf.slow", After: []string{"extract"}},
			{Step: "right", Task: "wf.slow", After: []string{"extract"}},
			{Step: "join", Task: "wf.join", After: []string{"left", "right"}},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		h := mount(t, c, &console.Options{AllowWrites: true})
		page := "/cairnq/workflows/" + rec.ID

		r := get(t, h, page)
		for _, want := range []string{`<svg class="workflow-graph"`, `data-step="extract" data-state="queued"`,
			`data-step="join" data-state="waiting"`, `data-from="left" data-to="join"`, `data-from="extract" data-to="right"`, "Cancel"} {
			if !strings.Contains(r.Body, want) {
				t.Fatalf("workflow page lacks %q: %d\n%s", want, r.Status, r.Body)
			}
		}
		// Laid out twice: across for a wide window, down for a narrow one.
		if strings.Count(r.Body, `<line class="edge"`) != 8 || strings.Count(r.Body, `<g class="node`) != 8 ||
			!strings.Contains(r.Body, `class="graph-wrap graph-across"`) || !strings.Contains(r.Body, `class="graph-wrap graph-down"`) {
			t.Errorf("want 4 boxes and 4 edges, across and down:\n%s", r.Body)
		}
		if r := get(t, h, "/cairnq/tasks/"+rec.ID); !strings.Contains(r.Body, `href="/cairnq/workflows/`+rec.ID+`"`) {
			t.Errorf("the record's task page does not link its workflow:\n%s", r.Body)
		}

		release := make(chan struct{})
		runWorker(t, c, map[string]cairnq.Handler{
			"wf.extract": func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return nil, nil },
			"wf.slow": func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return nil, nil
			},
			"wf.join": func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return nil, nil },
		})
		waitFor(t, "the page to show the middle steps running", func() bool {
			b := get(t, h, page).Body
			return strings.Contains(b, `data-step="extract" data-state="succeeded"`) &&
				strings.Contains(b, `data-step="left" data-state="running"`) && strings.Contains(b, `data-step="right" data-state="running"`)
		})
		left, err := c.GetByKey(ctx(t), cairnq.StepKey(rec.ID, "left"))
		if err != nil {
			t.Fatal(err)
		}
		if r := get(t, h, "/cairnq/tasks/"+left.ID); !strings.Contains(r.Body, `href="/cairnq/workflows/`+rec.ID+`"`) {
			t.Errorf("a step's task page does not link its workflow:\n%s", r.Body)
		}

		var api struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Steps  []struct {
				Step   string   `json:"step"`
				State  string   `json:"state"`
				After  []string `json:"after"`
				TaskID *string  `json:"task_id"`
			} `json:"steps"`
		}
		getJSON(t, h, "/cairnq/api/workflows/"+rec.ID, &api)
		if api.ID != rec.ID || api.Status != "running" || len(api.Steps) != 4 || api.Steps[3].State != "waiting" ||
			api.Steps[3].TaskID != nil || len(api.Steps[3].After) != 2 {
			t.Errorf("api: %+v", api)
		}

		r = postForm(t, h, page+"/cancel", nil, sameOrigin)
		if r.Status != 303 || !strings.Contains(r.Header.Get("Location"), url.Values{"done": {"Workflow canceled."}}.Encode()) {
			t.Fatalf("cancel: %d %v\n%s", r.Status, r.Header, r.Body)
		}
		waitFor(t, "the canceled workflow's page", func() bool {
			b := get(t, h, page).Body
			return strings.Contains(b, `data-step="left" data-state="canceled"`) && strings.Contains(b, `data-step="right" data-state="canceled"`) &&
				strings.Contains(b, `data-step="join" data-state="skipped"`)
		})
		close(release)
		if r := postForm(t, h, page+"/retry", nil, sameOrigin); r.Status != 303 {
			t.Fatalf("retry: %d\n%s", r.Status, r.Body)
		}
		waitFor(t, "the retried workflow to succeed", func() bool {
			return strings.Contains(get(t, h, page).Body, `data-step="join" data-state="succeeded"`)
		})

		plain := submit(t, c, "plain", nil, nil)
		if r := get(t, h, "/cairnq/workflows/"+plain.ID); r.Status != 400 {
			t.Errorf("a plain task's workflow page: %d", r.Status)
		}
		if r := get(t, h, "/cairnq/workflows/task_NOSUCH"); r.Status != 404 {
			t.Errorf("a missing workflow: %d", r.Status)
		}
		if r := postForm(t, mount(t, c, nil), page+"/cancel", nil, sameOrigin); r.Status != 403 {
			t.Errorf("cancel with writes off: %d", r.Status)
		}
	})
}

// The navigation's Workflows lists the workflows' records, each linking
// to its workflow's page, and is the item a workflow's page is under.
func TestWorkflowsListed(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		rec, err := c.SubmitWorkflow(ctx(t), []cairnq.WorkflowStep{{Step: "a", Task: "step"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		h := mount(t, c, nil)
		r := get(t, h, "/cairnq/")
		if !strings.Contains(r.Body, `<a href="/cairnq/tasks?name=cairnq.workflow">Workflows</a>`) {
			t.Fatalf("the overview's navigation has no Workflows:\n%s", r.Body)
		}
		r = get(t, h, "/cairnq/tasks?name=cairnq.workflow")
		if !strings.Contains(r.Body, `<a href="/cairnq/tasks?name=cairnq.workflow" class="here">Workflows</a>`) ||
			!strings.Contains(r.Body, `<a href="/cairnq/workflows/`+rec.ID+`"`) {
			t.Errorf("the list of workflows marks no Workflows item or links no workflow page:\n%s", r.Body)
		}
		if r := get(t, h, "/cairnq/workflows/"+rec.ID); !strings.Contains(r.Body, `class="here">Workflows</a>`) {
			t.Errorf("a workflow's page is not under Workflows")
		}
	})
}

// A failed workflow's page shows the failed step's error, not only that
// it failed.
func TestWorkflowPageShowsFailedStepError(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		rec, err := c.SubmitWorkflow(ctx(t), []cairnq.WorkflowStep{
			{Step: "charge", Task: "wf.charge", Options: &cairnq.SubmitOptions{MaxAttempts: 1}},
			{Step: "ship", Task: "wf.ship", After: []string{"charge"}},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		runWorker(t, c, map[string]cairnq.Handler{
			"wf.charge": func(context.Context, *cairnq.TaskContext) (any, error) {
				return nil, &cairnq.TaskError{Code: "card_declined", Message: "the issuer said no"}
			},
		})
		h := mount(t, c, nil)
		waitFor(t, "the failed step's error on the page", func() bool {
			b := get(t, h, "/cairnq/workflows/"+rec.ID).Body
			return strings.Contains(b, "<strong>charge</strong> failed: card_declined: the issuer said no")
		})
	})
}

// The overview counts workflows apart from the queues, as workflows, and
// lists a failed step's name as failing, not its workflow's record as
// well; a record's attempts show as a dash (newcomer trip 4).
func TestOverviewCountsWorkflowsApart(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		rec, err := c.SubmitWorkflow(ctx(t), []cairnq.WorkflowStep{
			{Step: "charge", Task: "wf.charge", Options: &cairnq.SubmitOptions{MaxAttempts: 1}},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		runWorker(t, c, map[string]cairnq.Handler{
			"wf.charge": func(context.Context, *cairnq.TaskContext) (any, error) { return nil, errors.New("declined") },
		})
		waitFor(t, "the workflow to fail", func() bool {
			got, err := c.Get(ctx(t), rec.ID)
			return err == nil && got.Status == cairnq.StatusFailed
		})
		h := mount(t, c, nil)
		r := get(t, h, "/cairnq/")
		if strings.Contains(r.Body, `href="/cairnq/tasks?queue=cairnq.workflow"`) || !strings.Contains(r.Body, "Workflows: ") ||
			!strings.Contains(r.Body, "1 failed</a>") {
			t.Errorf("the overview shows the records as a queue, or no workflows' line:\n%s", r.Body)
		}
		if !strings.Contains(r.Body, `tasks?name=wf.charge&amp;status=failed`) || strings.Contains(r.Body, `tasks?name=cairnq.workflow&amp;status=failed">cairnq.workflow`) {
			t.Errorf("the failing names: want the step's, not the record's:\n%s", r.Body)
		}
		var ov struct{ Queues map[string]any }
		getJSON(t, h, "/cairnq/api/overview", &ov)
		if _, ok := ov.Queues[cairnq.WorkflowName]; !ok {
			t.Errorf("the JSON API's queues lack the records' queue: %v", ov.Queues)
		}
		if r := get(t, h, "/cairnq/tasks?name=cairnq.workflow"); strings.Contains(r.Body, "2147483647") {
			t.Errorf("the list shows a record's unbounded attempts:\n%s", r.Body)
		}
	})
}

// A task's page lists every attempt's error, and says a succeeded task's
// error is an earlier attempt's.
func TestTaskPageShowsEveryAttemptsError(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		task, err := c.Submit(ctx(t), "flaky", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{RetryBackoff: cairnq.NoRetryBackoff})
		if err != nil {
			t.Fatal(err)
		}
		w.Handle("flaky", func(_ context.Context, tc *cairnq.TaskContext) (any, error) {
			if tc.Attempt() < 3 {
				return nil, fmt.Errorf("refused on try %d", tc.Attempt())
			}
			return "ok", nil
		}, nil)
		for range 3 {
			if _, err := w.WorkOne(ctx(t)); err != nil {
				t.Fatal(err)
			}
		}
		r := get(t, mount(t, c, nil), "/cairnq/tasks/"+task.ID)
		for _, want := range []string{"Every attempt's error", "refused on try 1", "refused on try 2", "Error of an earlier attempt"} {
			if !strings.Contains(r.Body, want) {
				t.Errorf("the task page lacks %q", want)
			}
		}
	})
}
