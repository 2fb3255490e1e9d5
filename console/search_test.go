package console_test

import (
	"strings"
	"testing"

	"github.com/cairnq/cairnq-go/console"
)

// The list's search finds tasks by payload or error text, counted as the
// other filters are; with payloads hidden it reads the errors alone, so
// that it tells nothing of a payload.
func TestSearchList(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		ada, err := c.Submit(ctx(t), "email", map[string]string{"to": "ada@example.com"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Submit(ctx(t), "email", map[string]string{"to": "bob@example.com"}, nil); err != nil {
			t.Fatal(err)
		}
		var l apiList
		getJSON(t, mount(t, c, nil), "/cairnq/api/tasks?search=ADA%40", &l)
		if got := l.ids(); len(got) != 1 || got[0] != ada.ID {
			t.Errorf("search ADA@ = %v, want %s", got, ada.ID)
		}
		r := get(t, mount(t, c, nil), "/cairnq/tasks?search=ada%40")
		if !strings.Contains(r.Body, ada.ID) || !strings.Contains(r.Body, "1 task matches") || !strings.Contains(r.Body, `name="search" value="ada@"`) {
			t.Errorf("the list page searched for ada@ shows no match, count or the search:\n%s", r.Body)
		}
		getJSON(t, mount(t, c, &console.Options{HidePayloads: true}), "/cairnq/api/tasks?search=ada%40", &l)
		if got := l.ids(); len(got) != 0 {
			t.Errorf("with payloads hidden, search ada@ = %v, want none: it reads no payload", got)
		}
		for _, bad := range []string{strings.Repeat("x", 1001), "%00", "%FF"} {
			if r := get(t, mount(t, c, nil), "/cairnq/api/tasks?search="+bad); r.Status != 400 {
				t.Errorf("search %.20q: %d, want 400", bad, r.Status)
			}
		}
		if r := get(t, mount(t, c, &console.Options{HidePayloads: true}), "/cairnq/tasks"); !strings.Contains(r.Body, "Error has") {
			t.Error("with payloads hidden, the search is not labelled as the errors'")
		}
	})
}
