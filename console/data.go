package console

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// How much the overview and task pages read.
const (
	runningShown    = 50
	failingShown    = 10
	relatedShown    = 50
	settledWindow   = time.Hour
	failingWindow   = 24 * time.Hour
	defaultPageSize = 50
)

// queueRow is one queue of the overview.
type queueRow struct {
	Queue string `json:"-"`
	cairnqtype.StatusCounts
	// OldestDue is when the longest-waiting due queued task became due;
	// zero when none waits.
	OldestDue time.Time `json:"oldest_due"`
}

func (q queueRow) MarshalJSON() ([]byte, error) {
	type counts cairnqtype.StatusCounts
	var due *int64
	if !q.OldestDue.IsZero() {
		ms := q.OldestDue.UnixMilli()
		due = &ms
	}
	return json.Marshal(struct {
		counts
		OldestDueMs *int64 `json:"oldest_due_ms"`
	}{counts(q.StatusCounts), due})
}

// workflowCounts is the workflows counted by their records' statuses:
// Live is queued and running together (a live workflow's record is
// queued between its steps' advances).
type workflowCounts struct {
	Live int
	cairnqtype.StatusCounts
	row queueRow // as a queue, for the JSON API's queues
}

type overview struct {
	Now    time.Time
	Queues []queueRow
	// Workflows counts the workflows by their records' statuses (the
	// queue cairnq.workflow, left out of Queues); nil when there is none.
	Workflows *workflowCounts
	Settled   []engine.ConsoleMinute
	Running   []*cairnqtype.Task
	Workers   []workerRow
	Failing   []cairnqtype.FailureCount
	// Paused holds the queues paused for the fleet, by queue, and Pauses
	// the same by name; read on each request.
	Pauses []*cairnq.QueuePause
	Paused map[string]*cairnq.QueuePause
	// Schedules are the periodic schedules' rows (Client.Schedules), read
	// on each request.
	Schedules []cairnq.ScheduleInfo
	// Counted is the background count Queues, Settled and Failing come
	// from; nil while the first one runs. Counting: a newer one is under way.
	Counted  *counts
	Counting bool
}

// overview reads the running tasks and the workers (through the lease
// index: as many rows as tasks run) and takes the rest from the last
// background count.
func (k *console) overview(ctx context.Context) (*overview, error) {
	n, counting, err := k.counter.get(ctx)
	if err != nil {
		return nil, err
	}
	now, err := k.st.ConsoleNow(ctx)
	if err != nil {
		return nil, err
	}
	o := &overview{Now: now, Counted: n, Counting: counting}
	if n != nil {
		o.Settled, o.Failing = n.Settled, n.Failing
		// The workflows' records are a queue of the SDK's, no user's:
		// counted apart, as workflows.
		for _, q := range n.Queues {
			if q.Queue == cairnq.WorkflowName {
				o.Workflows = &workflowCounts{Live: q.Queued + q.Running, StatusCounts: q.StatusCounts, row: q}
				continue
			}
			o.Queues = append(o.Queues, q)
		}
	}
	if o.Running, err = k.st.ConsoleRunning(ctx, runningShown); err != nil {
		return nil, err
	}
	if o.Workers, err = k.workers(ctx); err != nil {
		return nil, err
	}
	if o.Pauses, o.Paused, err = k.pauses(ctx); err != nil {
		return nil, err
	}
	if o.Schedules, err = k.c.Schedules(ctx); err != nil {
		return nil, err
	}
	return o, nil
}

// filterFields are the list filters, in form order, with their query names.
var filterFields = []struct{ Param, Label string }{
	{"queue", "Queue"}, {"name", "Name"}, {"key", "Key"}, {"correlation_id", "Correlation id"},
	{"parent_id", "Parent id"}, {"root_id", "Root id"}, {"id_prefix", "Id prefix"},
	{"search", "Payload or error has"},
}

// listQuery reads the list filters and cursor from a query string. With
// payloads hidden, a search reads the errors alone.
func (k *console) listQuery(v url.Values) (engine.ConsoleQuery, error) {
	q := engine.ConsoleQuery{
		Status:          v.Get("status"),
		Queue:           v.Get("queue"),
		Name:            v.Get("name"),
		Key:             v.Get("key"),
		CorrelationID:   v.Get("correlation_id"),
		ParentID:        v.Get("parent_id"),
		RootID:          v.Get("root_id"),
		IDPrefix:        v.Get("id_prefix"),
		Search:          v.Get("search"),
		Before:          v.Get("before"),
		SearchErrorOnly: k.opts.HidePayloads,
		After:           v.Get("after"),
		Limit:           defaultPageSize,
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return q, badRequest("limit must be a number from 1 to 1000")
		}
		q.Limit = n
	}
	if q.Status != "" && !cairnqtype.Status(q.Status).Valid() {
		return q, badRequest("unknown status " + strconv.Quote(q.Status))
	}
	if q.Before != "" && q.After != "" {
		return q, badRequest("before and after are exclusive")
	}
	if q.Search != "" {
		if err := engine.CheckSearch("console tasks", q.Search); err != nil {
			return q, badRequest(err.Error())
		}
	}
	return q, nil
}

type taskPage struct {
	Tasks []*cairnqtype.Task
	// Next is the cursor of the older page, Prev of the newer one; empty
	// when there is none.
	Next, Prev string
	// ScannedTo is set when a filtered page stopped at the scan bound
	// (Options.ScanLimit) with too few matches: the last task id examined.
	// The page continues from it: Next (older) or Prev (newer) is it.
	ScannedTo string
	Scanned   int
	// Matches is how many tasks match the filters, every page together;
	// MatchesExact is false when Matches is a lower bound, the count
	// having stopped at the scan bound (Options.ScanLimit).
	Matches      int64
	MatchesExact bool
}

// listTasks reads one page, and one more row to know whether another page
// follows in the direction of travel.
func (k *console) listTasks(ctx context.Context, q engine.ConsoleQuery) (*taskPage, error) {
	limit := q.Limit
	q.Limit = limit + 1
	tasks, scannedTo, err := k.st.ConsoleTasks(ctx, q, k.opts.ScanLimit)
	if err != nil {
		return nil, err
	}
	p := &taskPage{ScannedTo: scannedTo}
	if p.Matches, p.MatchesExact, err = k.st.ConsoleCount(ctx, q, k.opts.ScanLimit); err != nil {
		return nil, err
	}
	if scannedTo != "" {
		// The scan bound, not the last match, ends the page: continue
		// from the last task examined, in the direction of travel.
		p.Scanned = k.opts.ScanLimit
		p.Tasks = tasks
		p.atLeastShown()
		if q.After != "" {
			p.Prev = scannedTo
			if len(tasks) > 0 {
				p.Next = tasks[len(tasks)-1].ID
			}
		} else {
			p.Next = scannedTo
			if len(tasks) > 0 && q.Before != "" {
				p.Prev = tasks[0].ID
			}
		}
		return p, nil
	}
	more := len(tasks) > limit
	if more {
		if q.After != "" {
			tasks = tasks[1:] // ascending read, reversed: the extra row is the newest
		} else {
			tasks = tasks[:limit]
		}
	}
	p.Tasks = tasks
	p.atLeastShown()
	if !more && q.Before == "" && q.After == "" {
		// The page holds every match.
		p.Matches, p.MatchesExact = int64(len(tasks)), true
	}
	if len(tasks) == 0 {
		return p, nil // off either end: the page links back to the newest
	}
	first, last := tasks[0].ID, tasks[len(tasks)-1].ID
	switch {
	case q.After != "":
		p.Next = last
		if more {
			p.Prev = first
		}
	case q.Before != "":
		p.Prev = first
		if more {
			p.Next = last
		}
	default:
		if more {
			p.Next = last
		}
	}
	return p, nil
}

// atLeastShown raises a lower bound of the matches to the tasks the page
// shows, which match too.
func (p *taskPage) atLeastShown() {
	if !p.MatchesExact {
		p.Matches = max(p.Matches, int64(len(p.Tasks)))
	}
}

type taskDetail struct {
	Task *cairnqtype.Task
	Key  string
	// KeySkipped: the key table holds ScanLimit keys or more and has no
	// index on task id, so the key was not looked up (?key=1 does).
	KeySkipped bool
	Children   []*cairnqtype.Task
	Correlated []*cairnqtype.Task
	// Workflow is the workflow the task is the record or a step of, ""
	// for none.
	Workflow string
	// Durable is what a durable handler recorded on the task; DurableErr
	// says why it could not be read.
	Durable    durableView
	DurableErr string
	Now        time.Time
}

// durableView is a durable handler's record as the task page shows it:
// the steps, the events (by arrival), and the step it is parked in.
type durableView struct {
	Steps  []engine.DurableStep
	Events []durableEvent
	Parked *engine.DurableStep
}

// durableEvent is an event delivered to a task, with its name.
type durableEvent struct {
	Name string
	engine.DurableEvent
}

// durableOf reads t's durable record for its page.
func durableOf(t *cairnqtype.Task) (durableView, error) {
	d, err := engine.ReadDurable(t)
	if err != nil {
		return durableView{}, err
	}
	v := durableView{Steps: d.Steps}
	for _, name := range d.EventNames() {
		v.Events = append(v.Events, durableEvent{name, d.Events[name]})
	}
	if p, ok := d.Parked(t.Status == cairnqtype.StatusQueued); ok {
		v.Parked = &v.Steps[p]
	}
	return v, nil
}

func (k *console) taskDetail(ctx context.Context, id string, findKey bool) (*taskDetail, error) {
	t, err := k.st.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	d := &taskDetail{Task: t, Workflow: workflowOf(t)}
	if d.Durable, err = durableOf(t); err != nil {
		d.DurableErr = err.Error()
	}
	if d.Now, err = k.st.ConsoleNow(ctx); err != nil {
		return nil, err
	}
	scan := k.opts.ScanLimit
	if findKey {
		scan = 0
	}
	var looked bool
	if d.Key, looked, err = k.st.ConsoleTaskKey(ctx, id, scan); err != nil {
		return nil, err
	}
	d.KeySkipped = !looked
	if d.Children, err = k.st.ConsoleChildren(ctx, t, relatedShown); err != nil {
		return nil, err
	}
	if t.CorrelationID != "" {
		if d.Correlated, err = k.st.ConsoleCorrelated(ctx, t.CorrelationID, relatedShown); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Writes.

func (k *console) act(ctx context.Context, id, action string) (*cairnq.Task, error) {
	switch action {
	case "cancel":
		t, err := k.c.Cancel(ctx, id)
		if err == nil && t == nil {
			return nil, k.conflictOrMissing(ctx, id, "only a queued or running task can be canceled")
		}
		return t, err
	case "retry":
		t, err := k.c.Retry(ctx, id, nil)
		if err == nil && t == nil {
			return nil, k.conflictOrMissing(ctx, id, "only a failed or canceled task can be retried")
		}
		return t, err
	case "delete":
		t, err := k.c.Delete(ctx, id)
		if err == nil && t == nil {
			return nil, k.conflictOrMissing(ctx, id, "only a task no worker holds and no live workflow needs can be deleted")
		}
		return t, err
	case "copy":
		t, err := k.c.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		var meta any
		if len(t.Metadata) > 0 {
			meta = engine.UserMetadata(t.Metadata) // not the original's workflow mark or durable steps
		}
		return k.c.Submit(ctx, t.Name, json.RawMessage(t.Payload), &cairnq.SubmitOptions{
			Queue: t.Queue, MaxAttempts: t.MaxAttempts, Priority: t.Priority,
			Metadata: meta, CorrelationID: t.CorrelationID,
		})
	}
	return nil, unknownAction(action)
}

func (k *console) conflictOrMissing(ctx context.Context, id, why string) error {
	if _, err := k.c.GetStatus(ctx, id); err != nil {
		return err
	}
	return &httpError{http.StatusConflict, why}
}

// bulkActions are the actions of a bulk request.
var bulkActions = map[string]bool{"cancel": true, "retry": true, "delete": true}

// bulk runs action (cancel, retry or delete) on each id; ids the action
// did not change (wrong status, gone) are reported, not failed.
func (k *console) bulk(ctx context.Context, action string, ids []string) (changed, unchanged []string, err error) {
	if !bulkActions[action] {
		return nil, nil, badRequest("bulk action must be cancel, retry or delete")
	}
	if len(ids) > 1000 {
		return nil, nil, badRequest("at most 1000 ids at once")
	}
	changed, unchanged = []string{}, []string{}
	for _, id := range ids {
		_, err := k.act(ctx, id, action)
		var he *httpError
		switch {
		case err == nil:
			changed = append(changed, id)
		case errors.As(err, &he), errors.Is(err, cairnq.ErrNotFound):
			unchanged = append(unchanged, id)
		default:
			return changed, unchanged, err
		}
	}
	return changed, unchanged, nil
}

// httpError is an error with the status to answer it with.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(msg string) error { return &httpError{http.StatusBadRequest, msg} }

// unknownAction is the 404 of a POST to an action the route has not.
func unknownAction(action string) error {
	return &httpError{http.StatusNotFound, "unknown action " + strconv.Quote(action)}
}

// statusOf maps an error to the HTTP status and the message to show.
func statusOf(err error) (int, string) {
	var he *httpError
	var ae *cairnq.ArgumentError
	switch {
	case errors.As(err, &he):
		return he.status, he.msg
	case errors.Is(err, cairnq.ErrNotFound):
		return http.StatusNotFound, "task not found"
	case errors.As(err, &ae), errors.Is(err, cairnq.ErrInvalidArgument):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, context.Canceled):
		return 499, "request canceled"
	}
	return http.StatusInternalServerError, "internal error"
}

// bulkByFilter runs action (cancel, retry or delete) on every task
// matching f, through the Client's by-filter actions, and returns how
// many it changed.
func (k *console) bulkByFilter(ctx context.Context, action string, f cairnq.TaskFilter) (int, error) {
	var n int
	var err error
	switch action {
	case "cancel":
		n, err = k.c.CancelByFilter(ctx, f)
	case "retry":
		n, err = k.c.RetryByFilter(ctx, f, nil)
	case "delete":
		n, err = k.c.DeleteByFilter(ctx, f)
	default:
		return 0, badRequest("bulk action must be cancel, retry or delete")
	}
	if ae, ok := errors.AsType[*cairnq.ArgumentError](err); ok {
		return n, badRequest(ae.Error())
	}
	return n, err
}

// bulkFilter is q's filter as a bulk action by filter takes it: status,
// queue and name, at least one; ok is false when q filters otherwise.
func bulkFilter(q engine.ConsoleQuery) (f cairnq.TaskFilter, ok bool) {
	f = cairnq.TaskFilter{Status: cairnq.Status(q.Status), Queue: q.Queue, Name: q.Name}
	q.Status, q.Queue, q.Name, q.Before, q.After, q.Limit, q.SearchErrorOnly = "", "", "", "", "", 0, false
	return f, q == (engine.ConsoleQuery{}) && f != (cairnq.TaskFilter{})
}

// workerRow is a worker of the overview and the workers page: one that
// holds leases now, one a Go worker's beat names (idle ones too), or
// both.
type workerRow struct {
	ID string
	// Running and LeaseUntil: the tasks it holds leases on, and the
	// soonest of those leases' expiry (zero: it holds none).
	Running    int
	LeaseUntil time.Time
	// From its beat (Client.Workers); zero for a worker that writes none
	// (another SDK's).
	Host        string
	PID         int
	Queues      []string
	Concurrency int
	BeatAt      time.Time
	// State is "running" (it beats), "silent" (it missed three beats) or
	// "no beat" (it holds leases and writes no beat: another SDK's).
	State string
}

// workers is every worker the database knows of now: the lease holders
// and the Go workers' beats, by id.
func (k *console) workers(ctx context.Context) ([]workerRow, error) {
	leases, err := k.st.ConsoleWorkers(ctx)
	if err != nil {
		return nil, err
	}
	beats, err := k.c.Workers(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]*workerRow{}
	for _, l := range leases {
		byID[l.ID] = &workerRow{ID: l.ID, Running: l.Running, LeaseUntil: l.LeaseUntil, State: "no beat"}
	}
	now := time.Now()
	for _, b := range beats {
		w := byID[b.ID]
		if w == nil {
			w = &workerRow{ID: b.ID}
			byID[b.ID] = w
		}
		w.Host, w.PID, w.Queues, w.Concurrency, w.BeatAt, w.State = b.Host, b.PID, b.Queues, b.Concurrency, b.BeatAt, "running"
		if b.Silent(now) {
			w.State = "silent"
		}
	}
	out := make([]workerRow, 0, len(byID))
	for _, w := range byID {
		out = append(out, *w)
	}
	slices.SortFunc(out, func(a, b workerRow) int {
		return cmp.Or(cmp.Compare(b.Running, a.Running), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}
