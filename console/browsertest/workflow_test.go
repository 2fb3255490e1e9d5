package browsertest

import (
	"context"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/console"
)

// workflowStatesJS is what the workflow page's graph shows: each drawn
// step box's state by step, and whether every box has a size on screen,
// in the layout shown (across on a desktop, down on a phone).
const workflowStatesJS = `(() => {
  const out = {};
  let drawn = true;
  for (const g of document.querySelectorAll("#live svg.workflow-graph g.node")) {
    if (g.closest(".graph-wrap").offsetParent === null) continue; // the layout for the other width
    const r = g.querySelector("rect").getBoundingClientRect();
    drawn = drawn && r.width > 100 && r.height > 30;
    out[g.getAttribute("data-step")] = g.getAttribute("data-state");
  }
  out["(drawn)"] = drawn ? "yes" : "no";
  return out;
})()`

// testWorkflowGraphLive: the workflow page draws each step as a box with
// its state, and the boxes follow the workflow as another client's worker
// runs it, with no reload.
func testWorkflowGraphLive(t *testing.T, d db, br *browser) {
	c, other := d.open(t), d.open(t)
	rec, err := other.SubmitWorkflow(tctx(t), []cairnq.WorkflowStep{
		{Step: "fetch", Task: "wf.fetch"},
		{Step: "left", Task: "wf.hold", After: []string{"fetch"}},
		{Step: "right", Task: "wf.hold", After: []string{"fetch"}},
		{Step: "join", Task: "wf.join", After: []string{"left", "right"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, c, &console.Options{PollInterval: d.pollInterval()})
	tb := br.newTab(t)
	tb.navigate(base + "/workflows/" + rec.ID)
	s := eval[map[string]string](tb, workflowStatesJS)
	if s["fetch"] != "queued" || s["left"] != "waiting" || s["join"] != "waiting" || s["(drawn)"] != "yes" || len(s) != 5 {
		t.Fatalf("the graph before any worker: %v", s)
	}
	waitLive(tb)

	release := make(chan struct{})
	runWorker(t, other, cairnq.WorkerOptions{ID: "wf-worker-1", Concurrency: 4}, map[string]cairnq.Handler{
		"wf.fetch": func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return nil, nil },
		"wf.hold": func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			select {
			case <-release:
				return nil, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
		"wf.join": func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return nil, nil },
	})
	state := `JSON.stringify(` + workflowStatesJS + `)`
	waitFor[bool](tb, "fetch succeeded and both branches running, without a reload",
		`(() => { const s = `+workflowStatesJS+`; return s.fetch === "succeeded" && s.left === "running" && s.right === "running" && s.join === "waiting"; })()`, state)
	close(release)
	waitFor[bool](tb, "every step succeeded, without a reload",
		`(() => { const s = `+workflowStatesJS+`; return ["fetch", "left", "right", "join"].every(k => s[k] === "succeeded") && s["(drawn)"] === "yes"; })()`, state)
	if !tb.marked() {
		t.Error("the page reloaded: the graph must follow the workflow in place")
	}
	tb.checkConsole()

	// On a phone the graph runs down the page, whole within the window.
	tb.viewport(phoneWidth, 800)
	s = eval[map[string]string](tb, workflowStatesJS)
	if s["join"] != "succeeded" || s["(drawn)"] != "yes" || len(s) != 5 {
		t.Errorf("the graph at %dpx: %v", phoneWidth, s)
	}
	if shown := eval[string](tb, `[...document.querySelectorAll("#live .graph-wrap")].filter(w => w.offsetParent !== null).map(w => w.className).join()`); shown != "graph-wrap graph-down" {
		t.Errorf("at %dpx the graphs shown: %q, want the one laid out down", phoneWidth, shown)
	}
	checkLayout(tb, "workflow", "#live .graph-down svg", "#live .graph-down g.node rect")
	if d.backend == "sqlite" {
		tb.screenshot("console-workflow-390")
	}
	tb.viewport(desktopWidth, 900)
	checkLayout(tb, "workflow", "#live .graph-across svg")
	if d.backend == "sqlite" {
		tb.screenshot("console-workflow-1400")
	}
}
