package console_test

import (
	"net/url"
	"strings"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/console"
)

// listCount is what a list says of how many tasks match.
type listCount struct {
	apiList
	Matches      int64 `json:"matches"`
	MatchesExact bool  `json:"matches_exact"`
}

// A list says how many tasks match its filters: exactly when an index
// finds a value fewer than ScanLimit times (or a key finds one task),
// and "at least" the matches among the ScanLimit rows it read otherwise.
// The page and the API agree.
func TestListMatchCount(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		const bound = 20
		for range 3 {
			submit(t, c, "rare", nil, &cairnq.SubmitOptions{Queue: "q2"})
		}
		var common *cairnq.Task
		for range 25 {
			common = submit(t, c, "common", nil, nil)
		}
		keyed := submit(t, c, "keyed", nil, &cairnq.SubmitOptions{Key: "k-1"})
		h := mount(t, c, &console.Options{ScanLimit: bound})

		for _, tc := range []struct {
			query string
			n     int64
			exact bool
			text  string
		}{
			{"name=rare", 3, true, "3 tasks match"},
			{"name=rare&limit=1", 3, true, "3 tasks match"},                                    // every page together
			{"name=rare&queue=q2&status=queued", 3, true, "3 tasks match"},                     // several filters
			{"name=rare&queue=default", 0, true, "0 tasks match"},                              // none: the rare name's entries read
			{"key=k-1", 1, true, "1 task matches"},                                             // a key: one task
			{"id_prefix=" + url.QueryEscape(keyed.ID), 1, true, "1 task matches"},              // a prefix: the primary key
			{"name=common", bound, false, "At least 20 tasks match"},                           // common: counting stops at the bound
			{"name=common&id_prefix=" + url.QueryEscape(common.ID), 1, true, "1 task matches"}, // common, in a prefix: the prefix's tasks
			{"status=queued&name=keyed", 1, true, "1 task matches"},
			{"parent_id=nobody", 0, false, "No task matches among those read"}, // no index: none among the newest                            // the rarest of two filters
			{"limit=10", bound, false, "At least 20 tasks"},                    // no filter: the newest bound tasks
			{"", 29, true, "29 tasks"},                                         // the first page holds them all
		} {
			var p listCount
			getJSON(t, h, "/cairnq/api/tasks?"+tc.query, &p)
			if p.Matches != tc.n || p.MatchesExact != tc.exact {
				t.Errorf("%s: matches %d exact %v, want %d exact %v", tc.query, p.Matches, p.MatchesExact, tc.n, tc.exact)
			}
			r := get(t, h, "/cairnq/tasks?"+tc.query)
			if !strings.Contains(r.Body, `<p class="matches" id="matches">`+tc.text) {
				t.Errorf("%s: the page does not say %q:\n%s", tc.query, tc.text, between(r.Body, `id="matches"`, "</p>"))
			}
		}

		// Without a bound every count is exact.
		h = mount(t, c, &console.Options{ScanLimit: -1})
		var p listCount
		getJSON(t, h, "/cairnq/api/tasks?name=common", &p)
		if p.Matches != 25 || !p.MatchesExact {
			t.Errorf("name=common, no bound: %d exact %v, want 25 exact", p.Matches, p.MatchesExact)
		}
	})
}

// A page of 1000 links to the next one when there is one, and that page
// holds the rest.
func TestListThousandPerPage(t *testing.T) {
	c, err := cairnq.Open(ctx(t), t.TempDir()+"/c.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for range 1001 {
		submit(t, c, "many", nil, nil)
	}
	h := mount(t, c, nil)
	var p listCount
	getJSON(t, h, "/cairnq/api/tasks?limit=1000", &p)
	if len(p.Tasks) != 1000 || p.Next == nil {
		t.Fatalf("the first page of 1000: %d tasks, next %v", len(p.Tasks), p.Next)
	}
	if *p.Next != p.Tasks[999].ID {
		t.Fatalf("next is %s, want the last task shown, %s", *p.Next, p.Tasks[999].ID)
	}
	r := get(t, h, "/cairnq/tasks?limit=1000")
	if !strings.Contains(r.Body, `rel="next"`) {
		t.Fatal("the page of 1000 has no Older link")
	}
	var rest listCount
	getJSON(t, h, "/cairnq/api/tasks?limit=1000&before="+url.QueryEscape(*p.Next), &rest)
	if len(rest.Tasks) != 1 || rest.Next != nil || rest.Prev == nil || *rest.Prev != rest.Tasks[0].ID {
		t.Fatalf("the second page: %d tasks, next %v, prev %v", len(rest.Tasks), rest.Next, rest.Prev)
	}
	var back listCount
	getJSON(t, h, "/cairnq/api/tasks?limit=1000&after="+url.QueryEscape(*rest.Prev), &back)
	if len(back.Tasks) != 1000 || back.Tasks[0].ID != p.Tasks[0].ID || back.Prev != nil {
		t.Fatalf("back to the newest: %d tasks from %s, prev %v", len(back.Tasks), back.Tasks[0].ID, back.Prev)
	}
}

// between is the part of s from the first from to the next to after it.
func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return "(no " + from + ")"
	}
	s = s[i:]
	if j := strings.Index(s, to); j >= 0 {
		return s[:j+len(to)]
	}
	return s
}
