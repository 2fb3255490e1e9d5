package console

import (
	"encoding/json"
	"io"
	"net/http"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
)

// taskJSON is a task as the API serves it: the protocol's wire shape, with
// payload, result and metadata nulled and "redacted" set under
// HidePayloads, and the key on a single task's read.
// t is the engine's task or the Client's, which marshal alike; hidden
// payloads are dropped before marshalling, so a value that is not JSON
// cannot spoil the rest.
func (k *console) taskJSON(t json.Marshaler, key *string) json.RawMessage {
	if k.opts.HidePayloads {
		switch v := t.(type) {
		case *cairnqtype.Task:
			c := *v
			c.Payload, c.Result, c.Metadata = nil, nil, nil
			t = &c
		case *cairnq.Task:
			c := *v
			c.Payload, c.Result, c.Metadata = nil, nil, nil
			t = &c
		}
	}
	b, err := t.MarshalJSON()
	if err != nil {
		return json.RawMessage("null")
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return json.RawMessage("null")
	}
	if k.opts.HidePayloads {
		m["payload"], m["result"], m["metadata"] = json.RawMessage("null"), json.RawMessage("null"), json.RawMessage("null")
		m["redacted"] = json.RawMessage("true")
	}
	if key != nil {
		kb, _ := json.Marshal(optional(*key))
		m["key"] = kb
	}
	out, _ := json.Marshal(m)
	return out
}

// rowJSON is a list row: no payload, result or metadata were read.
func (k *console) rowJSON(t *cairnqtype.Task) json.RawMessage {
	b, err := t.MarshalJSON()
	if err != nil {
		return json.RawMessage("null")
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return json.RawMessage("null")
	}
	delete(m, "payload")
	delete(m, "result")
	delete(m, "metadata")
	out, _ := json.Marshal(m)
	return out
}

func (k *console) apiList(ts []*cairnqtype.Task) []json.RawMessage {
	out := make([]json.RawMessage, len(ts))
	for i, t := range ts {
		out[i] = k.rowJSON(t)
	}
	return out
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func (k *console) apiOverview(w http.ResponseWriter, r *http.Request) {
	o, err := k.overview(r.Context())
	if err != nil {
		k.jsonFail(w, r, err)
		return
	}
	queues := make(map[string]queueRow, len(o.Queues))
	for _, q := range o.Queues {
		queues[q.Queue] = q
	}
	if o.Workflows != nil { // the API's queues are every queue, the SDK's too
		queues[o.Workflows.row.Queue] = o.Workflows.row
	}
	type minute struct {
		MinuteMs  int64 `json:"minute_ms"`
		Succeeded int   `json:"succeeded"`
		Failed    int   `json:"failed"`
	}
	settled := make([]minute, len(o.Settled))
	for i, m := range o.Settled {
		settled[i] = minute{ms(m.Minute), m.Succeeded, m.Failed}
	}
	type failing struct {
		Name     string `json:"name"`
		Failures int    `json:"failures"`
		LastMs   int64  `json:"last_ms"`
	}
	fails := make([]failing, len(o.Failing))
	for i, f := range o.Failing {
		fails[i] = failing{f.Name, f.Count, ms(f.LastFailedAt)}
	}
	var countedAt, countMs *int64
	if n := o.Counted; n != nil {
		at, took := ms(n.At), n.Took.Milliseconds()
		countedAt, countMs = &at, &took
	}
	paused := make([]pauseJSON, len(o.Pauses))
	for i, p := range o.Pauses {
		paused[i] = pauseJSONOf(*p)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"paused":        paused,
		"schedules":     apiSchedules(o.Schedules, o.Now),
		"counted_at_ms": countedAt,
		"count_ms":      countMs,
		"counting":      o.Counting || o.Counted == nil,
		"now_ms":        ms(o.Now),
		"queues":        queues,
		"settled":       settled,
		"running":       k.apiList(o.Running),
		"workers":       apiWorkers(o.Workers),
		"failing":       fails,
	})
}

type apiWorker struct {
	ID           string   `json:"id"`
	Running      int      `json:"running"`
	LeaseUntilMs *int64   `json:"lease_until_ms"`
	Host         string   `json:"host,omitempty"`
	PID          int      `json:"pid,omitempty"`
	Queues       []string `json:"queues,omitempty"`
	Concurrency  int      `json:"concurrency,omitempty"`
	BeatAtMs     *int64   `json:"beat_at_ms"`
	State        string   `json:"state"`
}

func apiWorkers(ws []workerRow) []apiWorker {
	out := make([]apiWorker, len(ws))
	for i, w := range ws {
		out[i] = apiWorker{ID: w.ID, Running: w.Running, LeaseUntilMs: optionalMs(w.LeaseUntil), Host: w.Host,
			PID: w.PID, Queues: w.Queues, Concurrency: w.Concurrency, BeatAtMs: optionalMs(w.BeatAt), State: w.State}
	}
	return out
}

type apiSchedule struct {
	ID         string `json:"id"`
	Spec       string `json:"spec"`
	Name       string `json:"name"`
	Queue      string `json:"queue"`
	NextMs     *int64 `json:"next_at_ms"`
	LastSlotMs *int64 `json:"last_slot_ms"`
	BeatAtMs   *int64 `json:"beat_at_ms"`
	Silent     bool   `json:"silent"`
}

func apiSchedules(es []cairnq.ScheduleInfo, now time.Time) []apiSchedule {
	out := make([]apiSchedule, len(es))
	for i, e := range es {
		out[i] = apiSchedule{ID: e.ID, Spec: e.Spec, Name: e.Name, Queue: e.Queue, NextMs: optionalMs(e.Next),
			LastSlotMs: optionalMs(e.LastSlot), BeatAtMs: optionalMs(e.BeatAt), Silent: e.Silent(now)}
	}
	return out
}

// optionalMs is t in epoch milliseconds, nil for the zero time.
func optionalMs(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	v := ms(t)
	return &v
}

func (k *console) apiTasks(w http.ResponseWriter, r *http.Request) {
	q, err := k.listQuery(r.URL.Query())
	if err != nil {
		k.jsonFail(w, r, err)
		return
	}
	p, err := k.listTasks(r.Context(), q)
	if err != nil {
		k.jsonFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"tasks": k.apiList(p.Tasks),
		"next":  optional(p.Next),
		"prev":  optional(p.Prev),
		// Set when the page stopped at the scan bound: the last id
		// examined, and how many tasks were.
		"scanned_to": optional(p.ScannedTo),
		"scanned":    p.Scanned,
		// How many tasks match, every page together; a lower bound
		// when matches_exact is false (the count stopped at the bound).
		"matches":       p.Matches,
		"matches_exact": p.MatchesExact,
	})
}

func (k *console) apiTask(w http.ResponseWriter, r *http.Request) {
	d, err := k.taskDetail(r.Context(), r.PathValue("id"), r.URL.Query().Get("key") == "1")
	if err != nil {
		k.jsonFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"task":        k.taskJSON(d.Task, &d.Key),
		"children":    k.apiList(d.Children),
		"correlated":  k.apiList(d.Correlated),
		"key_skipped": d.KeySkipped,
		"now_ms":      ms(d.Now),
	})
}

func (k *console) apiWorkers(w http.ResponseWriter, r *http.Request) {
	now, err := k.st.ConsoleNow(r.Context())
	if err != nil {
		k.jsonFail(w, r, err)
		return
	}
	ws, err := k.workers(r.Context())
	if err != nil {
		k.jsonFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"workers": apiWorkers(ws), "now_ms": ms(now)})
}

func (k *console) apiTaskAction(w http.ResponseWriter, r *http.Request) {
	t, err := k.act(r.Context(), r.PathValue("id"), r.PathValue("action"))
	if err != nil {
		k.jsonFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"task": k.taskJSON(t, nil)})
}

func (k *console) apiBulk(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Action string   `json:"action"`
		IDs    []string `json:"ids"`
		Filter *struct {
			Status string `json:"status"`
			Queue  string `json:"queue"`
			Name   string `json:"name"`
		} `json:"filter"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields() // a misspelt filter must not widen the action
	if err := dec.Decode(&body); err != nil || (body.Filter != nil) == (body.IDs != nil) {
		k.jsonFail(w, r, badRequest("body must be JSON {\"action\", \"ids\"} or {\"action\", \"filter\"}"))
		return
	}
	if f := body.Filter; f != nil {
		n, err := k.bulkByFilter(r.Context(), body.Action, cairnq.TaskFilter{Status: cairnq.Status(f.Status), Queue: f.Queue, Name: f.Name})
		if err != nil {
			k.jsonFail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"changed_count": n})
		return
	}
	changed, unchanged, err := k.bulk(r.Context(), body.Action, body.IDs)
	if err != nil {
		k.jsonFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"changed": changed, "unchanged": unchanged})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the response"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func (k *console) jsonFail(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := statusOf(err)
	if status >= 500 {
		k.opts.Logger.ErrorContext(r.Context(), "cairnq console", "path", r.URL.Path, "err", err)
	}
	writeJSONError(w, status, msg)
}
