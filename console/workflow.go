package console

import (
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

// workflowView is what page_workflow.html takes.
type workflowView struct {
	WF            *cairnq.Workflow
	Nodes         []graphNode
	Edges         []graphEdge
	Width, Height int
	Flash         string
}

// layoutWorkflow places wf's steps: a step's column is its depth, its row
// its order among the steps of that depth as defined.
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
	rows := map[int]int{}
	maxRows, maxDepth := 0, 0
	pos := make([][2]int, len(wf.Steps))
	for i, s := range wf.Steps {
		d := depthOf(i)
		r := rows[d]
		rows[d]++
		maxRows, maxDepth = max(maxRows, r+1), max(maxDepth, d)
		x, y := margin+d*(nodeW+gapX), margin+r*(nodeH+gapY)
		pos[i] = [2]int{x, y}
		v.Nodes = append(v.Nodes, graphNode{Step: s.Step, Task: s.Task, TaskID: s.TaskID, State: s.State, Attempt: s.Attempt, X: x, Y: y})
	}
	for i, s := range wf.Steps {
		for _, a := range s.After {
			j, ok := index[a]
			if !ok {
				continue
			}
			v.Edges = append(v.Edges, graphEdge{From: a, To: s.Step,
				X1: pos[j][0] + nodeW, Y1: pos[j][1] + nodeH/2, X2: pos[i][0], Y2: pos[i][1] + nodeH/2})
		}
	}
	v.Width = 2*margin + (maxDepth+1)*nodeW + maxDepth*gapX
	v.Height = 2*margin + maxRows*nodeH + max(maxRows-1, 0)*gapY
	return v
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
