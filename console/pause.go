package console

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// A queue paused for every Go worker (Client.PauseQueue): the overview
// marks it and lists the pauses, and with writes allowed pauses a queue
// of its table or resumes a paused one, through
//
//	POST /queues/{action}       form: queue, reason       (pause, resume)
//	POST /api/queues/{action}   JSON: {"queue", "by", "reason"} (the same)
//
// A pause's By is the API's "by", else the console process's host and
// pid: the console knows no user of its own (Options.Authorize decides
// who may write, not who they are).

// pauseJSON is a pause in the JSON API.
type pauseJSON struct {
	Queue    string `json:"queue"`
	PausedAt *int64 `json:"paused_at_ms"`
	By       string `json:"by"`
	Reason   string `json:"reason"`
}

func pauseJSONOf(p cairnq.QueuePause) pauseJSON {
	j := pauseJSON{Queue: p.Queue, By: p.By, Reason: p.Reason}
	if !p.At.IsZero() {
		at := ms(p.At)
		j.PausedAt = &at
	}
	return j
}

// pauseAction pauses or resumes queue, and returns the pause it wrote,
// met or lifted (nil for a resume of a queue not paused) and the line the
// overview shows about it.
func (k *console) pauseAction(ctx context.Context, action, queue, by, reason string) (paused *cairnq.QueuePause, done string, err error) {
	switch action {
	case "pause":
		p, already, err := k.c.PauseQueue(ctx, queue, &cairnq.PauseOptions{By: by, Reason: reason})
		if err != nil {
			return nil, "", err
		}
		if already {
			return p, "Queue " + queue + " was paused already.", nil
		}
		return p, "Queue " + queue + " paused for every Go worker.", nil
	case "resume":
		p, err := k.c.ResumeQueue(ctx, queue)
		if err != nil {
			return nil, "", err
		}
		if p == nil {
			return nil, "Queue " + queue + " was not paused.", nil
		}
		return p, "Queue " + queue + " resumed.", nil
	}
	return nil, "", unknownAction(action)
}

// queueActionForm is the overview's Pause or Resume, then back to the
// overview, which says what happened.
func (k *console) queueActionForm(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		k.pageFail(w, r, badRequest("malformed form"))
		return
	}
	_, done, err := k.pauseAction(r.Context(), r.PathValue("action"), r.PostForm.Get("queue"), "", r.PostForm.Get("reason"))
	if err != nil {
		k.pageFail(w, r, err)
		return
	}
	http.Redirect(w, r, k.base(r)+"/?"+url.Values{"done": {done}}.Encode(), http.StatusSeeOther)
}

// apiQueueAction is queueActionForm in JSON: {"pause": PAUSE} for a pause
// (the pause in force), {"resumed": PAUSE or null} for a resume.
func (k *console) apiQueueAction(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	if action != "pause" && action != "resume" {
		k.jsonFail(w, r, unknownAction(action)) // before the body, which an unknown action has no use for
		return
	}
	var body struct {
		Queue  string `json:"queue"`
		By     string `json:"by"`
		Reason string `json:"reason"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil {
		k.jsonFail(w, r, badRequest("body must be JSON {\"queue\", \"reason\"}"))
		return
	}
	p, _, err := k.pauseAction(r.Context(), action, body.Queue, body.By, body.Reason)
	if err != nil {
		k.jsonFail(w, r, err)
		return
	}
	var out *pauseJSON
	if p != nil {
		j := pauseJSONOf(*p)
		out = &j
	}
	key := map[string]string{"pause": "pause", "resume": "resumed"}[action]
	writeJSON(w, http.StatusOK, map[string]any{key: out})
}

// pauses reads the queues paused for the fleet, by name and by queue.
func (k *console) pauses(ctx context.Context) ([]*cairnq.QueuePause, map[string]*cairnq.QueuePause, error) {
	ps, err := k.c.PausedQueues(ctx)
	if err != nil {
		return nil, nil, err
	}
	list := make([]*cairnq.QueuePause, len(ps))
	byQueue := make(map[string]*cairnq.QueuePause, len(ps))
	for i := range ps {
		list[i], byQueue[ps[i].Queue] = &ps[i], &ps[i]
	}
	return list, byQueue, nil
}

// pauseText says since when, by whom and why a queue is paused.
func pauseText(p *cairnq.QueuePause) string {
	var parts []string
	if !p.At.IsZero() {
		parts = append(parts, "since "+p.At.UTC().Format(time.DateTime+" UTC"))
	}
	if p.By != "" {
		parts = append(parts, "by "+p.By)
	}
	s := strings.Join(parts, " ")
	if p.Reason != "" {
		s += ": " + p.Reason
	}
	return s
}
