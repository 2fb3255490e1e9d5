package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/console"
)

// The list's bulk actions by filter, through the form and the API, act
// on every task matching the list's status, queue and name, on every
// page; the form is offered only for such a filter; delete of one task
// from its page; a bad body or action changes nothing.
func TestBulkByFilterAPI(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		h := mount(t, c, &console.Options{AllowWrites: true})
		var mail []string
		for range 7 {
			task, err := c.Submit(ctx(t), "email", nil, &cairnq.SubmitOptions{Queue: "mail"})
			if err != nil {
				t.Fatal(err)
			}
			mail = append(mail, task.ID)
		}
		kept, err := c.Submit(ctx(t), "email", nil, &cairnq.SubmitOptions{Queue: "other"})
		if err != nil {
			t.Fatal(err)
		}
		if r := get(t, h, "/cairnq/tasks?queue=mail&limit=2"); !strings.Contains(r.Body, `id="bulk-filter"`) {
			t.Error("a list filtered by queue offers no action on every matching task")
		}
		hidden := mount(t, c, &console.Options{AllowWrites: true, HidePayloads: true})
		if r := get(t, hidden, "/cairnq/tasks?queue=mail"); !strings.Contains(r.Body, `id="bulk-filter"`) {
			t.Error("with payloads hidden, a list filtered by queue offers no action on every matching task")
		}
		if r := get(t, h, "/cairnq/tasks?id_prefix=task_"); strings.Contains(r.Body, `id="bulk-filter"`) {
			t.Error("a list filtered by id prefix offers an action by filter, which takes status, queue and name only")
		}

		r := postForm(t, h, "/cairnq/tasks/bulk", url.Values{"scope": {"filter"}, "action": {"cancel"}, "queue": {"mail"},
			"return": {"queue=mail&limit=2"}}, sameOrigin)
		if r.Status != http.StatusSeeOther || !strings.Contains(r.Header.Get("Location"), "cancel%3A+7+changed") {
			t.Fatalf("bulk cancel by filter: %d %v", r.Status, r.Header)
		}
		var res struct {
			Changed int `json:"changed_count"`
			Error   string
		}
		post := func(body string) response {
			return do(t, h, http.MethodPost, "/cairnq/api/tasks/bulk", strings.NewReader(body), map[string]string{"Content-Type": "application/json"})
		}
		if r := post(`{"action": "retry", "filter": {"status": "canceled", "queue": "mail"}}`); r.Status != 200 || decodeInto(r.Body, &res) != nil || res.Changed != 7 {
			t.Fatalf("bulk retry by filter: %d %s", r.Status, r.Body)
		}
		for _, bad := range []struct {
			body   string
			status int
		}{
			{`{"action": "delete", "filter": {}}`, http.StatusBadRequest},
			{`{"action": "delete", "filter": {"status": "faild"}}`, http.StatusBadRequest},
			{`{"action": "explode", "filter": {"queue": "mail"}}`, http.StatusBadRequest},
			{`{"action": "delete", "filter": {"queue": "mail"}, "ids": ["x"]}`, http.StatusBadRequest},
			{`{"action": "cancel", "filter": {"queue": "mail", "staus": "failed"}}`, http.StatusBadRequest},
			{`{"action": "delete", "filter": {"queue": "mail", "search": "x"}}`, http.StatusBadRequest},
		} {
			if r := post(bad.body); r.Status != bad.status {
				t.Errorf("POST %s: %d %s, want %d", bad.body, r.Status, r.Body, bad.status)
			}
		}
		for _, id := range append(mail, kept.ID) {
			if got, err := c.Get(ctx(t), id); err != nil || got.Status != cairnq.StatusQueued {
				t.Errorf("%s after the refusals: %v, %v", id, got, err)
			}
		}

		r = postForm(t, h, "/cairnq/tasks/"+mail[0]+"/delete", nil, sameOrigin)
		if r.Status != http.StatusSeeOther || !strings.Contains(r.Header.Get("Location"), "/tasks?done=Deleted") {
			t.Fatalf("delete from the task page: %d %v", r.Status, r.Header)
		}
		if r := post(`{"action": "delete", "filter": {"queue": "mail"}}`); r.Status != 200 || decodeInto(r.Body, &res) != nil || res.Changed != 6 {
			t.Fatalf("bulk delete by filter: %d %s", r.Status, r.Body)
		}
		if got, err := c.Get(ctx(t), kept.ID); err != nil || got.Status != cairnq.StatusQueued {
			t.Errorf("the task on another queue: %v, %v", got, err)
		}
		if n, err := c.Stats(ctx(t), "mail"); err != nil || n["mail"] != (cairnq.StatusCounts{}) {
			t.Errorf("mail after the delete: %+v, %v", n, err)
		}
	})
}
