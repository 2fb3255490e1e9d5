package console_test

import (
	"io"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/console"
)

// counters returns how many console counting goroutines exist.
func counters() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "console.(*counter).loop")
		}
		buf = make([]byte, 2*len(buf))
	}
}

type apiOverview struct {
	CountedAtMs *int64                      `json:"counted_at_ms"`
	CountMs     *int64                      `json:"count_ms"`
	Counting    bool                        `json:"counting"`
	NowMs       int64                       `json:"now_ms"`
	Queues      map[string]map[string]int64 `json:"queues"`
}

// The overview never waits on a count: with CountWait negative the first
// page says it is counting, and the counts arrive from the background
// with their age, on the page and in the API.
func TestOverviewBackgroundCount(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		submit(t, c, "a", nil, nil)
		submit(t, c, "b", nil, nil)
		ch := console.Handler(c, &console.Options{CountWait: -1})
		mux := http.NewServeMux()
		mux.Handle("/cairnq/", http.StripPrefix("/cairnq", ch))
		h := http.Handler(mux)

		if r := get(t, h, "/cairnq/"); r.Status != 200 || !strings.Contains(r.Body, "Counting…") || strings.Contains(r.Body, "Counted ") {
			t.Fatalf("first overview, before any count: %d\n%s", r.Status, r.Body)
		}
		var o apiOverview
		waitFor(t, "a background count", func() bool {
			getJSON(t, h, "/cairnq/api/overview", &o)
			return o.CountedAtMs != nil
		})
		if o.Queues["default"]["queued"] != 2 || o.CountMs == nil || *o.CountMs < 0 || *o.CountedAtMs > o.NowMs {
			t.Fatalf("overview after a count: %+v", o)
		}
		r := get(t, h, "/cairnq/")
		if !strings.Contains(r.Body, "Counted <time") || !strings.Contains(r.Body, " ago</time> in the background") || strings.Contains(r.Body, "Counting…") {
			t.Fatalf("overview does not say how fresh its counts are:\n%s", r.Body)
		}
		// A new task shows once a later count, which requests ask for, sees it.
		submit(t, c, "c", nil, nil)
		waitFor(t, "a count of the third task", func() bool {
			getJSON(t, h, "/cairnq/api/overview", &o)
			return o.Queues["default"]["queued"] == 3
		})
		if counters() == 0 {
			t.Fatal("no counting goroutine while the overview is in use")
		}
		ch.(io.Closer).Close()
		// Close waits for the goroutine's Done, which it signals from its
		// last deferred call: the goroutine may still be on the stack for a
		// moment, and is polled away; one that lives on fails the wait.
		waitFor(t, "the counting goroutine to end after Close", func() bool { return counters() == 0 })
		// A closed handler still answers, from its last count.
		getJSON(t, h, "/cairnq/api/overview", &o)
		if o.Queues["default"]["queued"] != 3 || counters() != 0 {
			t.Fatalf("after Close: %+v, %d counting goroutines", o, counters())
		}
	})
}

// Closing the Client ends the counting goroutine without Close.
func TestOverviewCountStopsWithClient(t *testing.T) {
	c, err := cairnq.Open(ctx(t), t.TempDir()+"/c.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	h := mount(t, c, nil)
	if r := get(t, h, "/cairnq/api/overview"); r.Status != 200 {
		t.Fatalf("overview: %d %s", r.Status, r.Body)
	}
	c.Close()
	get(t, h, "/cairnq/api/overview") // asks for a count, which finds the Client closed
	waitFor(t, "the counting goroutine to end", func() bool { return counters() == 0 })
}

// A filter whose value is common is looked for among ScanLimit tasks from
// the cursor; a page that finds too few there says where it stopped, and
// continuing from there finds every match once. A rare value is read
// through its index, exactly.
func TestListScanBound(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		const bound = 20
		names := map[string]string{}
		add := func(name string, n int) {
			for range n {
				names[submit(t, c, name, nil, nil).ID] = name
			}
		}
		add("rare", 3)
		add("common", 25)
		add("filler", 30)
		all := make([]string, 0, len(names))
		for id := range names {
			all = append(all, id)
		}
		slices.Sort(all)
		slices.Reverse(all) // newest first
		h := mount(t, c, &console.Options{ScanLimit: bound})

		type page struct {
			apiList
			ScannedTo *string `json:"scanned_to"`
			Scanned   int     `json:"scanned"`
		}
		// model is what a page of name from before cursor holds: the
		// matches among the bound tasks after the cursor, and where it
		// stopped when tasks remain beyond them.
		model := func(name, cursor string) (want []string, stop string) {
			rest := all
			if cursor != "" {
				rest = all[slices.Index(all, cursor)+1:]
			}
			window := rest[:min(bound, len(rest))]
			for _, id := range window {
				if names[id] == name {
					want = append(want, id)
				}
			}
			if len(rest) > bound {
				stop = window[len(window)-1]
			}
			return want, stop
		}

		var found []string
		cursor := ""
		for range 10 {
			var p page
			target := "/cairnq/api/tasks?name=common"
			if cursor != "" {
				target += "&before=" + url.QueryEscape(cursor)
			}
			getJSON(t, h, target, &p)
			want, stop := model("common", cursor)
			if !slices.Equal(p.ids(), want) || deref(p.ScannedTo) != stop {
				t.Fatalf("%s: got %v scanned to %q, want %v scanned to %q", target, p.ids(), deref(p.ScannedTo), want, stop)
			}
			if stop != "" && (p.Scanned != bound || deref(p.Next) != stop) {
				t.Fatalf("%s: a page stopped by the bound continues from it: %+v", target, p)
			}
			found = append(found, want...)
			if stop == "" {
				break
			}
			if cursor == "" { // the first page: the page says so, and links on
				r := get(t, h, "/cairnq/tasks?name=common")
				if !strings.Contains(r.Body, "Looked through 20 tasks") || !strings.Contains(r.Body, "before="+url.QueryEscape(stop)) {
					t.Fatalf("a bounded page does not say where it stopped:\n%s", r.Body)
				}
			}
			cursor = stop
		}
		var every []string
		for _, id := range all {
			if names[id] == "common" {
				every = append(every, id)
			}
		}
		if !slices.Equal(found, every) {
			t.Fatalf("continuing found %v, want every match once, newest first: %v", found, every)
		}

		// A rare value, older than the bound: its index finds it exactly.
		var p page
		getJSON(t, h, "/cairnq/api/tasks?name=rare", &p)
		if len(p.Tasks) != 3 || p.ScannedTo != nil || p.Next != nil {
			t.Fatalf("rare name: %+v", p)
		}
		// So does a rare status among common ones.
		canceled, err := c.Cancel(ctx(t), all[len(all)-1])
		if err != nil || canceled == nil {
			t.Fatalf("cancel: %v", err)
		}
		getJSON(t, h, "/cairnq/api/tasks?status=canceled", &p)
		if len(p.Tasks) != 1 || p.Tasks[0].ID != canceled.ID || p.ScannedTo != nil {
			t.Fatalf("rare status: %+v", p)
		}
		// Newer, from the oldest common task: the bound tasks newer than it.
		oldest := every[len(every)-1]
		getJSON(t, h, "/cairnq/api/tasks?name=common&after="+url.QueryEscape(oldest), &p)
		i := slices.Index(all, oldest)
		window := all[max(0, i-bound):i]
		var want []string
		for _, id := range window {
			if names[id] == "common" {
				want = append(want, id)
			}
		}
		if !slices.Equal(p.ids(), want) || deref(p.ScannedTo) != window[0] || deref(p.Prev) != window[0] {
			t.Fatalf("after the oldest: got %v scanned to %q prev %q, want %v scanned to %q", p.ids(), deref(p.ScannedTo), deref(p.Prev), want, window[0])
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// The favicon is served, not a 404.
func TestFavicon(t *testing.T) {
	c, err := cairnq.Open(ctx(t), t.TempDir()+"/c.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := get(t, mount(t, c, nil), "/cairnq/favicon.ico")
	if r.Status != 200 || r.Header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(r.Body, "<svg") {
		t.Fatalf("favicon: %d %q", r.Status, r.Header.Get("Content-Type"))
	}
}
