package console

import (
	"errors"
	"net/http"
	"net/url"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// The workflow page (/workflows/{id}): a workflow's steps as a graph,
// each step a box in the column of its depth (one past the deepest step
// it waits for), an edge from each step it waits for, the box's colour
// its state. The page refreshes in place on every change, as the others
// do, so the graph is live.

// The graph's geometry, in CSS pixels.
const (
	nodeW  = 168
	nodeH  = 46
	gapX   = 56
	gapY   = 18
	margin = 8
)

// graphNode is one step's box.
type graphNode struct {
	Step, Task, TaskID string
	State              cairnq.StepState
	Attempt            int
	X, Y               int
}

// graphEdge runs from the right side of a step to the left side of one
// waiting for it.
type graphEdge struct {
	From, To       string
	X1, Y1, X2, Y2 int
}

// workflowView is what page_workflow.html takes: the graph laid out
// across (a step's depth its column), for a wide window, and down (its
// depth its row), for a narrow one; and the failed steps' errors.
type workflowView struct {
	WF           *cairnq.Workflow
	Across, Down graphLayout
	Failed       []failedStep
	MoreFailed   int // failed steps past failedShown, their errors not read
	Flash        string
}

// failedShown is how many failed steps' errors the workflow page reads.
const failedShown = 10

// graphScrollOver is the width or height (CSS pixels) past which a graph
// scrolls in its box rather than shrink to the window: shrunk further,
// its text would be too small to read.
const graphScrollOver = 1600

// graphLayout is the graph's boxes and edges placed, and its size.
type graphLayout struct {
	Nodes         []graphNode
	Edges         []graphEdge
	Width, Height int
	// Scroll: the graph is drawn at its size and scrolls in its box
	// (graphScrollOver), rather than shrink to the window.
	Scroll bool
}

// failedStep is a failed step and its task's error.
type failedStep struct {
	Step, TaskID string
	Error        *cairnqtype.ErrorEnvelope
}

// layoutWorkflow places wf's steps twice: across, a step's column its
// depth and its row its order among the steps of that depth as defined;
// and down, the same with rows and columns swapped.
func layoutWorkflow(wf *cairnq.Workflow) workflowView {
	v := workflowView{WF: wf}
	index := make(map[string]int, len(wf.Steps))
	for i, s := range wf.Steps {
		index[s.Step] = i
	}
	depth := make([]int, len(wf.Steps))
	done := make([]bool, len(wf.Steps))
	// A definition has no cycle (GetWorkflow parses it with its checks).
	var depthOf func(i int) int
	depthOf = func(i int) int {
		if done[i] {
			return depth[i]
		}
		d := 0
		for _, a := range wf.Steps[i].After {
			if j, ok := index[a]; ok {
				d = max(d, depthOf(j)+1)
			}
		}
		depth[i], done[i] = d, true
		return d
	}
	order := make([]int, len(wf.Steps)) // a step's place among its depth's
	rows := map[int]int{}
	maxRows, maxDepth := 0, 0
	for i := range wf.Steps {
		d := depthOf(i)
		order[i] = rows[d]
		rows[d]++
		maxRows, maxDepth = max(maxRows, rows[d]), max(maxDepth, d)
	}
	v.Across = placeGraph(wf, index, func(i int) (int, int) {
		return margin + depth[i]*(nodeW+gapX), margin + order[i]*(nodeH+gapY)
	}, true)
	v.Across.Width = 2*margin + (maxDepth+1)*nodeW + maxDepth*gapX
	v.Across.Height = 2*margin + maxRows*nodeH + max(maxRows-1, 0)*gapY
	v.Across.Scroll = v.Across.Width > graphScrollOver
	v.Down = placeGraph(wf, index, func(i int) (int, int) {
		return margin + order[i]*(nodeW+gapY), margin + depth[i]*(nodeH+gapX)
	}, false)
	v.Down.Width = 2*margin + maxRows*nodeW + max(maxRows-1, 0)*gapY
	v.Down.Height = 2*margin + (maxDepth+1)*nodeH + maxDepth*gapX
	v.Down.Scroll = v.Down.Width > graphScrollOver/2 // a phone's window is narrower
	return v
}

// placeGraph puts each step's box where at says and draws its edges: from
// a box's right side to the next's left (across), or its bottom to the
// next's top.
func placeGraph(wf *cairnq.Workflow, index map[string]int, at func(i int) (x, y int), across bool) graphLayout {
	var g graphLayout
	pos := make([][2]int, len(wf.Steps))
	for i, s := range wf.Steps {
		x, y := at(i)
		pos[i] = [2]int{x, y}
		g.Nodes = append(g.Nodes, graphNode{Step: s.Step, Task: s.Task, TaskID: s.TaskID, State: s.State, Attempt: s.Attempt, X: x, Y: y})
	}
	for i, s := range wf.Steps {
		for _, a := range s.After {
			j, ok := index[a]
			if !ok {
				continue
			}
			e := graphEdge{From: a, To: s.Step,
				X1: pos[j][0] + nodeW, Y1: pos[j][1] + nodeH/2, X2: pos[i][0], Y2: pos[i][1] + nodeH/2}
			if !across {
				e.X1, e.Y1, e.X2, e.Y2 = pos[j][0]+nodeW/2, pos[j][1]+nodeH, pos[i][0]+nodeW/2, pos[i][1]
			}
			g.Edges = append(g.Edges, e)
		}
	}
	return g
}

func (k *console) workflowPage(w http.ResponseWriter, r *http.Request) {
	wf, err := k.c.GetWorkflow(r.Context(), r.PathValue("id"))
	if err != nil {
		k.pageFail(w, r, err)
		return
	}
	now, err := k.st.ConsoleNow(r.Context())
	if err != nil {
		k.pageFail(w, r, err)
		return
	}
	v := layoutWorkflow(wf)
	v.Flash = r.URL.Query().Get("done")
	// The failed steps' errors: a workflow fails on them, and its own
	// error names no more than the step. A read each, so the first
	// failedShown; the table lists every step's state.
	for _, s := range wf.Steps {
		if s.State != cairnq.StepState(cairnq.StatusFailed) || s.TaskID == "" {
			continue
		}
		if len(v.Failed) == failedShown {
			v.MoreFailed++
			continue
		}
		t, err := k.st.Get(r.Context(), s.TaskID)
		if err != nil && !errors.Is(err, cairnq.ErrNotFound) {
			k.pageFail(w, r, err)
			return
		}
		f := failedStep{Step: s.Step, TaskID: s.TaskID}
		if t != nil {
			f.Error = t.Error
		}
		v.Failed = append(v.Failed, f)
	}
	k.render(w, r, "workflow", now, v)
}

// workflowActionForm is the workflow page's cancel or retry button: the
// action, then back to the page.
func (k *console) workflowActionForm(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	var err error
	switch action {
	case "cancel":
		_, err = k.c.CancelWorkflow(r.Context(), id)
	case "retry":
		_, err = k.c.RetryWorkflow(r.Context(), id)
	default:
		err = badRequest("unknown action " + action + " (cancel or retry)")
	}
	if err != nil {
		k.pageFail(w, r, err)
		return
	}
	done := map[string]string{"cancel": "Workflow canceled.", "retry": "Workflow retried."}[action]
	http.Redirect(w, r, k.base(r)+"/workflows/"+url.PathEscape(id)+"?"+url.Values{"done": {done}}.Encode(), http.StatusSeeOther)
}

func (k *console) apiWorkflow(w http.ResponseWriter, r *http.Request) {
	wf, err := k.c.GetWorkflow(r.Context(), r.PathValue("id"))
	if err != nil {
		k.jsonFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": wf.ID, "status": wf.Status, "continue_on_failure": wf.ContinueOnFailure,
		"steps": wf.Steps, "record": k.taskJSON(wf.Record, nil),
	})
}

// workflowOf is the workflow t belongs to, for a link from its page: its
// own id for a record, its record's for a step, "" otherwise.
func workflowOf(t *cairnqtype.Task) string {
	if t.Name == engine.WorkflowName {
		return t.ID
	}
	if m, ok := engine.StepMarkOf(t); ok {
		return m.Record
	}
	return ""
}
