package console_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/cairnq/cairnq-go/console"
)

// The overview's pause and resume through the JSON API: the pause in
// force and the pause lifted come back, the overview lists the pauses,
// a bad queue or an unknown action changes nothing, and without writes
// both are refused.
func TestFleetPauseAPI(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		h := mount(t, c, &console.Options{AllowWrites: true})
		post := func(target, body string) response {
			return do(t, h, http.MethodPost, target, strings.NewReader(body), map[string]string{"Content-Type": "application/json"})
		}
		var res struct {
			Pause   *struct{ Queue, By, Reason string }
			Resumed *struct{ Queue, Reason string }
		}
		r := post("/cairnq/api/queues/pause", `{"queue": "emails", "reason": "provider down"}`)
		if r.Status != 200 || decodeInto(r.Body, &res) != nil || res.Pause == nil || res.Pause.Queue != "emails" || res.Pause.Reason != "provider down" || res.Pause.By == "" {
			t.Fatalf("pause: %d %s", r.Status, r.Body)
		}
		var ov struct {
			Paused []struct {
				Queue      string
				PausedAtMs *int64 `json:"paused_at_ms"`
			}
		}
		getJSON(t, h, "/cairnq/api/overview", &ov)
		if len(ov.Paused) != 1 || ov.Paused[0].Queue != "emails" || ov.Paused[0].PausedAtMs == nil {
			t.Errorf("overview paused = %+v", ov.Paused)
		}
		if r := get(t, h, "/cairnq/"); !strings.Contains(r.Body, "Paused for every Go worker") || !strings.Contains(r.Body, "provider down") {
			t.Errorf("the overview page shows no pause:\n%s", r.Body)
		}
		for _, bad := range []struct {
			target, body string
			status       int
		}{
			{"/cairnq/api/queues/pause", `{"queue": ""}`, http.StatusBadRequest},
			{"/cairnq/api/queues/pause", `not json`, http.StatusBadRequest},
			{"/cairnq/api/queues/stop", `{"queue": "other"}`, http.StatusNotFound},
		} {
			if r := post(bad.target, bad.body); r.Status != bad.status {
				t.Errorf("POST %s %s: %d %s, want %d", bad.target, bad.body, r.Status, r.Body, bad.status)
			}
		}
		r = post("/cairnq/api/queues/resume", `{"queue": "emails"}`)
		res.Resumed = nil
		if r.Status != 200 || decodeInto(r.Body, &res) != nil || res.Resumed == nil || res.Resumed.Reason != "provider down" {
			t.Fatalf("resume: %d %s", r.Status, r.Body)
		}
		if r := post("/cairnq/api/queues/resume", `{"queue": "emails"}`); r.Status != 200 || !strings.Contains(r.Body, `"resumed":null`) {
			t.Errorf("resume of a queue not paused: %d %s", r.Status, r.Body)
		}
		if ps, err := c.PausedQueues(ctx(t)); err != nil || len(ps) != 0 {
			t.Errorf("PausedQueues = %+v, %v after the bad requests and the resume", ps, err)
		}

		ro := mount(t, c, nil)
		for _, target := range []string{"/cairnq/queues/pause", "/cairnq/api/queues/pause"} {
			if r := postForm(t, ro, target, url.Values{"queue": {"emails"}}, sameOrigin); r.Status != http.StatusForbidden {
				t.Errorf("read-only POST %s: %d", target, r.Status)
			}
		}
		if ps, err := c.PausedQueues(ctx(t)); err != nil || len(ps) != 0 {
			t.Errorf("PausedQueues = %+v, %v after read-only posts", ps, err)
		}
	})
}

// decodeInto decodes a JSON body into v.
func decodeInto(body string, v any) error { return json.Unmarshal([]byte(body), v) }
