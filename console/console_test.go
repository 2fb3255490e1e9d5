package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/console"
)

func TestPagesRender(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		parent := submit(t, c, "render", map[string]any{"page": 1}, &cairnq.SubmitOptions{Key: "doc:1", CorrelationID: "batch-7"})
		submit(t, c, "email", map[string]any{"to": "a@example.com"}, &cairnq.SubmitOptions{Queue: "q2", CorrelationID: "batch-7"})
		h := mount(t, c, nil)

		var r response
		waitFor(t, "the overview's count", func() bool {
			r = get(t, h, "/cairnq/")
			return r.Status != 200 || strings.Contains(r.Body, ">q2<")
		})
		if r.Status != 200 || !strings.Contains(r.Body, "Overview") || !strings.Contains(r.Body, ">q2<") {
			t.Fatalf("overview: %d\n%s", r.Status, r.Body)
		}
		if !staticRef.MatchString(r.Body) || !strings.Contains(r.Body, `<svg class="chart"`) {
			t.Fatalf("overview: links not under the mount point, or no chart:\n%s", r.Body)
		}
		r = get(t, h, "/cairnq/tasks")
		if r.Status != 200 || !strings.Contains(r.Body, parent.ID) {
			t.Fatalf("tasks: %d\n%s", r.Status, r.Body)
		}
		r = get(t, h, "/cairnq/tasks/"+parent.ID)
		for _, want := range []string{parent.ID, "doc:1", "batch-7", "0 of 3", "&#34;page&#34;", "Correlation group"} {
			if !strings.Contains(r.Body, want) {
				t.Fatalf("task page lacks %q: %d\n%s", want, r.Status, r.Body)
			}
		}
		if r := get(t, h, "/cairnq/tasks/task_NOSUCH"); r.Status != 404 {
			t.Fatalf("missing task: %d", r.Status)
		}
		if r := get(t, h, "/cairnq/workers"); r.Status != 200 {
			t.Fatalf("workers: %d", r.Status)
		}
		// A fragment is the page's main block only, for live refreshes.
		r = do(t, h, "GET", "/cairnq/tasks/"+parent.ID, nil, map[string]string{"X-Cairnq-Fragment": "1"})
		if r.Status != 200 || strings.Contains(r.Body, "<html") || !strings.Contains(r.Body, parent.ID) {
			t.Fatalf("fragment: %d\n%s", r.Status, r.Body)
		}
	})
}

func TestSecurityHeadersAndAssets(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		h := mount(t, open(t), nil)
		r := get(t, h, "/cairnq/")
		csp := r.Header.Get("Content-Security-Policy")
		if csp == "" || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "script-src 'self'") {
			t.Fatalf("CSP %q", csp)
		}
		if strings.Contains(r.Body, "<script>") || strings.Contains(r.Body, " style=") || strings.Contains(r.Body, "<style") || strings.Contains(r.Body, " onclick") {
			t.Fatalf("inline script or style in the page:\n%s", r.Body)
		}
		for path, ct := range map[string]string{"/cairnq/static/console.css": "text/css", "/cairnq/static/console.js": "text/javascript"} {
			r := get(t, h, path)
			if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), ct) {
				t.Fatalf("%s: %d %q", path, r.Status, r.Header.Get("Content-Type"))
			}
		}
	})
}

func TestFilters(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		a := submit(t, c, "alpha", nil, &cairnq.SubmitOptions{Key: "k-a", CorrelationID: "corr-1"})
		b := submit(t, c, "beta", nil, &cairnq.SubmitOptions{Queue: "q2", ParentID: a.ID, RootID: a.RootID})
		d := submit(t, c, "beta", nil, &cairnq.SubmitOptions{ParentID: a.ID}) // a chain of its own
		if _, err := c.Cancel(ctx(t), d.ID); err != nil {
			t.Fatal(err)
		}
		h := mount(t, c, nil)
		// Lists go newest first by id: ids made in the same millisecond
		// order by their random part, not by submit order.
		newest := func(ids ...string) []string {
			slices.SortFunc(ids, func(x, y string) int { return strings.Compare(y, x) })
			return ids
		}
		cases := []struct {
			query string
			want  []string
		}{
			{"", newest(d.ID, b.ID, a.ID)},
			{"status=canceled", []string{d.ID}},
			{"status=queued", newest(b.ID, a.ID)},
			{"queue=q2", []string{b.ID}},
			{"name=beta", newest(d.ID, b.ID)},
			{"name=beta&queue=default", []string{d.ID}},
			{"key=k-a", []string{a.ID}},
			{"key=nope", nil},
			{"correlation_id=corr-1", []string{a.ID}},
			{"parent_id=" + a.ID, newest(d.ID, b.ID)},
			{"root_id=" + a.ID, newest(b.ID, a.ID)},
			{"id_prefix=" + uniquePrefix(b.ID, a.ID, d.ID), []string{b.ID}},
			{"id_prefix=task_", newest(d.ID, b.ID, a.ID)},
		}
		for _, tc := range cases {
			var l apiList
			getJSON(t, h, "/cairnq/api/tasks?"+tc.query, &l)
			if !slices.Equal(l.ids(), tc.want) {
				t.Errorf("%s: got %v, want %v", tc.query, l.ids(), tc.want)
			}
		}
		if r := get(t, h, "/cairnq/api/tasks?status=bogus"); r.Status != 400 {
			t.Fatalf("bad status: %d %s", r.Status, r.Body)
		}
		// The task page lists b as a child (same chain); d is reached by the
		// unindexed parent filter.
		var detail struct {
			Task     map[string]any `json:"task"`
			Children []struct {
				ID string `json:"id"`
			} `json:"children"`
		}
		getJSON(t, h, "/cairnq/api/tasks/"+a.ID, &detail)
		if len(detail.Children) != 1 || detail.Children[0].ID != b.ID || detail.Task["key"] != "k-a" {
			t.Fatalf("detail: %+v", detail)
		}
		// The HTML filter form keeps what was asked.
		r := get(t, h, "/cairnq/tasks?name=beta&status=canceled")
		if !strings.Contains(r.Body, d.ID) || strings.Contains(r.Body, b.ID) || !strings.Contains(r.Body, `value="canceled" selected`) {
			t.Fatalf("filtered page:\n%s", r.Body)
		}
	})
}

func TestKeysetPaginationWhileTasksArrive(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		var want []string
		for i := range 23 {
			want = append(want, submit(t, c, "n", map[string]int{"i": i}, nil).ID)
		}
		slices.Sort(want) // id order: creation order to the millisecond
		slices.Reverse(want)
		h := mount(t, c, nil)
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("too many pages")
			}
			target := "/cairnq/api/tasks?limit=5"
			if cursor != "" {
				target += "&before=" + url.QueryEscape(cursor)
			}
			var l apiList
			getJSON(t, h, target, &l)
			got = append(got, l.ids()...)
			// New tasks arrive between pages: they sort before page one.
			submit(t, c, "n", map[string]string{"late": "yes"}, nil)
			if l.Next == nil {
				break
			}
			cursor = *l.Next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("paged %d ids, want %d (duplicates or gaps):\ngot  %v\nwant %v", len(got), len(want), got, want)
		}
		// And back: after= the first id of page two is page one's newer
		// neighbours, in the same order.
		var p1, p2, back apiList
		getJSON(t, h, "/cairnq/api/tasks?limit=5&before="+url.QueryEscape(want[0]), &p1)
		getJSON(t, h, "/cairnq/api/tasks?limit=5&before="+url.QueryEscape(p1.Tasks[4].ID), &p2)
		getJSON(t, h, "/cairnq/api/tasks?limit=5&after="+url.QueryEscape(*p2.Prev), &back)
		if !slices.Equal(back.ids(), p1.ids()) {
			t.Fatalf("back: %v, want %v", back.ids(), p1.ids())
		}
		// The HTML pager links carry the filters and the cursor.
		r := get(t, h, "/cairnq/tasks?name=n&limit=5")
		if !strings.Contains(r.Body, "before=") || !strings.Contains(r.Body, "name=n") {
			t.Fatalf("pager:\n%s", r.Body)
		}
	})
}

func TestAPIOverview(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		ok := submit(t, c, "ok", nil, nil)
		bad := submit(t, c, "boom", nil, &cairnq.SubmitOptions{MaxAttempts: 1})
		slow := submit(t, c, "slow", nil, &cairnq.SubmitOptions{Queue: "q2"})
		release := make(chan struct{})
		defer close(release)
		runWorker(t, c, map[string]cairnq.Handler{
			"ok":   func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return 1, nil },
			"boom": func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return nil, errors.New("kaput") },
			"slow": func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
				tc.Report(ctx, 0.25, "a quarter")
				select {
				case <-release:
				case <-ctx.Done():
				}
				return nil, nil
			},
		})
		for _, id := range []string{ok.ID, bad.ID} {
			c.Wait(ctx(t), id, nil)
		}
		h := mount(t, c, nil)
		var o struct {
			NowMs   int64                     `json:"now_ms"`
			Queues  map[string]map[string]any `json:"queues"`
			Settled []struct {
				Succeeded, Failed int
			} `json:"settled"`
			Running []struct {
				ID       string `json:"id"`
				WorkerID string `json:"worker_id"`
			} `json:"running"`
			Workers []struct {
				ID      string `json:"id"`
				Running int    `json:"running"`
			} `json:"workers"`
			Failing []struct {
				Name     string `json:"name"`
				Failures int    `json:"failures"`
			} `json:"failing"`
		}
		waitFor(t, "slow to run, and a count to see it", func() bool {
			getJSON(t, h, "/cairnq/api/overview", &o)
			n, _ := o.Queues["q2"]["running"].(float64)
			return len(o.Running) == 1 && n == 1
		})
		if o.Running[0].ID != slow.ID || o.Running[0].WorkerID != "worker-test-1" {
			t.Fatalf("running: %+v", o.Running)
		}
		if len(o.Workers) != 1 || o.Workers[0].ID != "worker-test-1" || o.Workers[0].Running != 1 {
			t.Fatalf("workers: %+v", o.Workers)
		}
		if len(o.Failing) != 1 || o.Failing[0].Name != "boom" || o.Failing[0].Failures != 1 {
			t.Fatalf("failing: %+v", o.Failing)
		}
		var s, f int
		for _, m := range o.Settled {
			s += m.Succeeded
			f += m.Failed
		}
		if s != 1 || f != 1 || len(o.Settled) < 60 {
			t.Fatalf("settled: %d succeeded, %d failed over %d minutes", s, f, len(o.Settled))
		}
		if o.Queues["default"]["succeeded"].(float64) != 1 || o.Queues["q2"]["running"].(float64) != 1 {
			t.Fatalf("queues: %+v", o.Queues)
		}
		// The progress the handler reported is on the task's page. The
		// handler reports after its task is running, so poll for it.
		var body string
		waitFor(t, "the reported progress on the task page", func() bool {
			body = get(t, h, "/cairnq/tasks/"+slow.ID).Body
			return strings.Contains(body, `value="0.25"`)
		})
		if !strings.Contains(body, "a quarter") || !strings.Contains(body, "worker-test-1") {
			t.Fatalf("task page of a running task:\n%s", body)
		}
		// A queued task waiting shows its age on the overview, once a
		// background count has seen it.
		submit(t, c, "nobody-handles-this", nil, &cairnq.SubmitOptions{Queue: "q3"})
		waitFor(t, "the oldest due task of q3 on the overview", func() bool {
			getJSON(t, h, "/cairnq/api/overview", &o)
			return o.Queues["q3"]["oldest_due_ms"] != nil
		})
		var ws struct {
			Workers []map[string]any `json:"workers"`
		}
		getJSON(t, h, "/cairnq/api/workers", &ws)
		if len(ws.Workers) != 1 {
			t.Fatalf("api workers: %+v", ws)
		}
		if r := get(t, h, "/cairnq/workers"); !strings.Contains(r.Body, "worker-test-1") {
			t.Fatalf("workers page:\n%s", r.Body)
		}
	})
}

func TestWritesDisabled(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		task := submit(t, c, "x", nil, nil)
		h := mount(t, c, nil)
		if r := get(t, h, "/cairnq/tasks/"+task.ID); strings.Contains(r.Body, "/cancel") || strings.Contains(r.Body, "<button type=\"submit\">Cancel") {
			t.Fatalf("read-only page offers cancel:\n%s", r.Body)
		}
		if r := get(t, h, "/cairnq/tasks"); strings.Contains(r.Body, `id="bulk"`) {
			t.Fatal("read-only list offers bulk actions")
		}
		for _, target := range []string{"/cairnq/tasks/" + task.ID + "/cancel", "/cairnq/api/tasks/" + task.ID + "/cancel", "/cairnq/tasks/bulk", "/cairnq/api/tasks/bulk"} {
			if r := postForm(t, h, target, url.Values{"action": {"cancel"}, "id": {task.ID}}, sameOrigin); r.Status != http.StatusForbidden {
				t.Fatalf("POST %s: %d", target, r.Status)
			}
		}
		// GET never changes anything.
		if r := get(t, h, "/cairnq/tasks/"+task.ID+"/cancel"); r.Status == 200 {
			t.Fatalf("GET cancel: %d", r.Status)
		}
		st, _ := c.GetStatus(ctx(t), task.ID)
		if st.Status != cairnq.StatusQueued {
			t.Fatalf("status %s", st.Status)
		}
	})
}

func TestWritesEnabled(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		a := submit(t, c, "x", map[string]int{"n": 1}, &cairnq.SubmitOptions{Priority: 3, Metadata: map[string]string{"m": "v"}, Key: "kk"})
		b := submit(t, c, "x", nil, nil)
		d := submit(t, c, "x", nil, nil)
		h := mount(t, c, &console.Options{AllowWrites: true})
		if r := get(t, h, "/cairnq/tasks/"+a.ID); !strings.Contains(r.Body, "/cancel") {
			t.Fatal("no cancel button with writes allowed")
		}
		// The page's form: cancel, then back to the task.
		r := postForm(t, h, "/cairnq/tasks/"+a.ID+"/cancel", nil, sameOrigin)
		if r.Status != http.StatusSeeOther || !strings.HasPrefix(r.Header.Get("Location"), "/cairnq/tasks/"+a.ID) {
			t.Fatalf("cancel: %d %v %s", r.Status, r.Header, r.Body)
		}
		if st, _ := c.GetStatus(ctx(t), a.ID); st.Status != cairnq.StatusCanceled {
			t.Fatalf("after cancel: %s", st.Status)
		}
		// Cancel again: nothing to cancel.
		if r := do(t, h, "POST", "/cairnq/api/tasks/"+a.ID+"/cancel", nil, nil); r.Status != http.StatusConflict {
			t.Fatalf("second cancel: %d %s", r.Status, r.Body)
		}
		// Retry through the API.
		var out struct {
			Task struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"task"`
		}
		r = do(t, h, "POST", "/cairnq/api/tasks/"+a.ID+"/retry", nil, nil)
		if r.Status != 200 || json.Unmarshal([]byte(r.Body), &out) != nil || out.Task.Status != "queued" {
			t.Fatalf("retry: %d %s", r.Status, r.Body)
		}
		// A copy: a new task with the same name, payload, metadata and priority.
		r = postForm(t, h, "/cairnq/tasks/"+a.ID+"/copy", nil, sameOrigin)
		if r.Status != http.StatusSeeOther {
			t.Fatalf("copy: %d %s", r.Status, r.Body)
		}
		newID := strings.TrimPrefix(strings.SplitN(r.Header.Get("Location"), "?", 2)[0], "/cairnq/tasks/")
		cp, err := c.Get(ctx(t), newID)
		if err != nil || cp.ID == a.ID || cp.Name != "x" || cp.Priority != 3 || !bytes.Equal(compact(cp.Payload), []byte(`{"n":1}`)) || !bytes.Equal(compact(cp.Metadata), []byte(`{"m":"v"}`)) {
			t.Fatalf("copy: %+v %v", cp, err)
		}
		// Bulk cancel from the list's form, then bulk retry through the API.
		r = postForm(t, h, "/cairnq/tasks/bulk", url.Values{"action": {"cancel"}, "id": {b.ID, d.ID}, "return": {"name=x"}}, sameOrigin)
		if r.Status != http.StatusSeeOther || !strings.HasPrefix(r.Header.Get("Location"), "/cairnq/tasks?") {
			t.Fatalf("bulk: %d %v", r.Status, r.Header)
		}
		for _, id := range []string{b.ID, d.ID} {
			if st, _ := c.GetStatus(ctx(t), id); st.Status != cairnq.StatusCanceled {
				t.Fatalf("%s after bulk cancel: %s", id, st.Status)
			}
		}
		body, _ := json.Marshal(map[string]any{"action": "retry", "ids": []string{b.ID, d.ID, "task_NOSUCH"}})
		r = do(t, h, "POST", "/cairnq/api/tasks/bulk", bytes.NewReader(body), map[string]string{"Content-Type": "application/json"})
		var res struct{ Changed, Unchanged []string }
		if r.Status != 200 || json.Unmarshal([]byte(r.Body), &res) != nil || len(res.Changed) != 2 || len(res.Unchanged) != 1 {
			t.Fatalf("bulk retry: %d %s", r.Status, r.Body)
		}
	})
}

func compact(b []byte) []byte {
	var out bytes.Buffer
	json.Compact(&out, b)
	return out.Bytes()
}

// A copy keeps the user's metadata but not the SDK's own members: a
// durable handler's recorded steps would be replayed, not run, and a
// workflow step's mark would sit on a task that is no step.
func TestCopyLeavesTheSDKsMembersBehind(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		a := submit(t, c, "x", nil, &cairnq.SubmitOptions{Metadata: json.RawMessage(
			`{"tenant":"acme","cairnq_durable":{"v":1,"steps":[{"name":"charge","output":1}]},"cairnq_workflow":{"v":1,"record":"task_x","step":"s"}}`)})
		h := mount(t, c, &console.Options{AllowWrites: true})
		r := postForm(t, h, "/cairnq/tasks/"+a.ID+"/copy", nil, sameOrigin)
		if r.Status != http.StatusSeeOther {
			t.Fatalf("copy: %d %s", r.Status, r.Body)
		}
		newID := strings.TrimPrefix(strings.SplitN(r.Header.Get("Location"), "?", 2)[0], "/cairnq/tasks/")
		cp, err := c.Get(ctx(t), newID)
		if err != nil || !bytes.Equal(compact(cp.Metadata), []byte(`{"tenant":"acme"}`)) {
			t.Fatalf("the copy's metadata: %s, %v", cp.Metadata, err)
		}
	})
}

func TestCrossOriginRefused(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		task := submit(t, c, "x", nil, nil)
		h := mount(t, c, &console.Options{AllowWrites: true})
		for _, hdr := range []map[string]string{
			{"Sec-Fetch-Site": "cross-site"},
			{"Origin": "https://evil.example"},
		} {
			for _, target := range []string{"/cairnq/tasks/" + task.ID + "/cancel", "/cairnq/api/tasks/" + task.ID + "/cancel"} {
				if r := postForm(t, h, target, nil, hdr); r.Status != http.StatusForbidden {
					t.Fatalf("cross-origin POST %s %v: %d", target, hdr, r.Status)
				}
			}
		}
		if st, _ := c.GetStatus(ctx(t), task.ID); st.Status != cairnq.StatusQueued {
			t.Fatalf("status %s after refused posts", st.Status)
		}
	})
}

// TestCrossOriginRefererRefused: a write whose only sign of its origin
// was a foreign Referer (no Origin, no Sec-Fetch-Site, as an old browser
// sends a form) passed http.CrossOriginProtection: 303, and the task was
// canceled. Such a Referer, or one that is no URL, is refused as a foreign
// Origin is; one naming the console's host or a trusted origin passes, as
// does a write with none of the three headers (curl, a script).
func TestCrossOriginRefererRefused(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		cop := http.NewCrossOriginProtection()
		if err := cop.AddTrustedOrigin("https://proxy.example"); err != nil {
			t.Fatal(err)
		}
		h := mount(t, c, &console.Options{AllowWrites: true, CrossOrigin: cop})
		// cancel posts a cancel of a new task to target (its id for ID)
		// with referer alone, and returns the answer and the task's status.
		cancel := func(target, referer string) (response, cairnq.Status) {
			t.Helper()
			task := submit(t, c, "x", nil, nil)
			hdr := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
			if referer != "" {
				hdr["Referer"] = referer
			}
			r := postForm(t, h, strings.Replace(target, "ID", task.ID, 1), nil, hdr)
			st, err := c.GetStatus(ctx(t), task.ID)
			if err != nil {
				t.Fatal(err)
			}
			return r, st.Status
		}
		for _, tc := range []struct {
			referer string
			ok      bool
		}{
			{"https://evil.example/attack.html", false},
			{"http://example.com.evil.example/", false},
			{"http://example.com:8080/cairnq/tasks", false}, // another port: another origin
			{"not a url", false},
			{"/cairnq/tasks", false}, // a Referer is absolute
			{"//example.com/cairnq/tasks", false},
			{"http://[::1/", false},
			{"null", false},
			{"http://example.com/cairnq/tasks/x", true}, // httptest's Host
			{"https://proxy.example/cairnq/", true},
			{"", true},
		} {
			for target, done := range map[string]int{"/cairnq/tasks/ID/cancel": http.StatusSeeOther, "/cairnq/api/tasks/ID/cancel": http.StatusOK} {
				r, st := cancel(target, tc.referer)
				want, wantSt := done, cairnq.StatusCanceled
				if !tc.ok {
					want, wantSt = http.StatusForbidden, cairnq.StatusQueued
				}
				if r.Status != want || st != wantSt || !tc.ok && !strings.Contains(r.Body, "cross-origin request refused") {
					t.Errorf("POST %s with Referer %q alone: %d, task %s; want %d, task %s\n%s", target, tc.referer, r.Status, st, want, wantSt, r.Body)
				}
			}
		}
	})
}

func TestAuthorize(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		h := mount(t, open(t), &console.Options{Authorize: func(r *http.Request) error {
			if r.Header.Get("X-Role") != "admin" {
				return errors.New("no")
			}
			return nil
		}})
		for _, p := range []string{"/cairnq/", "/cairnq/api/tasks", "/cairnq/static/console.js", "/cairnq/events"} {
			if r := get(t, h, p); r.Status != http.StatusForbidden {
				t.Fatalf("%s: %d", p, r.Status)
			}
		}
		if r := do(t, h, "GET", "/cairnq/api/tasks", nil, map[string]string{"X-Role": "admin"}); r.Status != 200 {
			t.Fatalf("authorized: %d", r.Status)
		}
	})
}

const (
	xssScript = `<script>alert(1)</script>`
	xssImg    = `"><img src=x onerror=alert(2)>`
)

func TestXSSRendersInert(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		evil := xssScript + xssImg
		task := submit(t, c, evil, map[string]string{"html": evil, evil: "key"}, &cairnq.SubmitOptions{
			Key: evil, MaxAttempts: 1, Metadata: map[string]string{"m": evil}, CorrelationID: evil, Queue: "q-" + "x",
		})
		// A worker for q-x, where the task is.
		w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Queues: []string{"q-x"}, PollInterval: 20e6})
		if err != nil {
			t.Fatal(err)
		}
		w.Handle(evil, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			tc.Report(ctx, 0.5, evil)
			return nil, &cairnq.TaskError{Code: evil, Message: evil, Details: map[string]any{evil: evil}}
		}, nil)
		wctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); w.Run(wctx) }()
		defer func() { cancel(); <-done }()
		c.Wait(ctx(t), task.ID, nil)
		if st, _ := c.GetStatus(ctx(t), task.ID); st.Status != cairnq.StatusFailed {
			t.Fatalf("status %s", st.Status)
		}
		h := mount(t, c, &console.Options{AllowWrites: true})
		// The overview shows the failing names once a background count
		// has ended, which a loaded machine may take past CountWait.
		waitFor(t, "a background count", func() bool {
			var o apiOverview
			getJSON(t, h, "/cairnq/api/overview", &o)
			return o.CountedAtMs != nil
		})
		for _, p := range []string{
			"/cairnq/", "/cairnq/tasks", "/cairnq/tasks/" + task.ID,
			"/cairnq/tasks?name=" + url.QueryEscape(evil) + "&key=" + url.QueryEscape(evil),
			"/cairnq/tasks?correlation_id=" + url.QueryEscape(evil),
		} {
			r := get(t, h, p)
			if r.Status != 200 {
				t.Fatalf("%s: %d", p, r.Status)
			}
			if strings.Contains(r.Body, "<script>") || strings.Contains(r.Body, "<img") {
				t.Fatalf("%s renders markup from the data:\n%s", p, r.Body)
			}
			if !strings.Contains(r.Body, "&lt;script&gt;") {
				t.Fatalf("%s does not show the name as text:\n%s", p, r.Body)
			}
		}
		for _, p := range []string{"/cairnq/api/tasks", "/cairnq/api/tasks/" + task.ID, "/cairnq/api/overview"} {
			var v any
			getJSON(t, h, p, &v) // checks application/json
			if r := get(t, h, p); strings.Contains(r.Body, "<script>") {
				t.Fatalf("%s: raw markup in JSON", p)
			}
		}
		// The page shows the key, the error and the payload as text.
		r := get(t, h, "/cairnq/tasks/"+task.ID)
		if strings.Count(r.Body, "&lt;img src=x onerror=alert(2)&gt;") < 5 {
			t.Fatalf("task page does not show the values as text:\n%s", r.Body)
		}
	})
}

func TestHidePayloads(t *testing.T) {
	backends(t, func(t *testing.T, open opener) {
		c := open(t)
		task := submit(t, c, "x", map[string]string{"card": "4111-SECRET"}, &cairnq.SubmitOptions{Metadata: map[string]string{"m": "META-SECRET"}})
		h := mount(t, c, &console.Options{HidePayloads: true})
		for _, p := range []string{"/cairnq/tasks/" + task.ID, "/cairnq/api/tasks/" + task.ID, "/cairnq/tasks", "/cairnq/api/tasks"} {
			r := get(t, h, p)
			if r.Status != 200 || strings.Contains(r.Body, "SECRET") {
				t.Fatalf("%s: %d\n%s", p, r.Status, r.Body)
			}
		}
		var d struct {
			Task map[string]any `json:"task"`
		}
		getJSON(t, h, "/cairnq/api/tasks/"+task.ID, &d)
		if d.Task["redacted"] != true || d.Task["payload"] != nil {
			t.Fatalf("api task: %+v", d.Task)
		}
		if r := get(t, mount(t, c, nil), "/cairnq/tasks/"+task.ID); !strings.Contains(r.Body, "4111-SECRET") {
			t.Fatal("payload not shown without HidePayloads")
		}
	})
}

// uniquePrefix returns the shortest prefix of id that none of others
// has. Ids made within one millisecond differ only in their last
// characters (they count up), so a fixed cut would not do.
func uniquePrefix(id string, others ...string) string {
	n := 1
	for _, o := range others {
		for n < len(id) && strings.HasPrefix(o, id[:n]) {
			n++
		}
	}
	return id[:n]
}

// With Hosts set, the console answers only for them: a request naming any
// other host (DNS rebinding: an attacker's name pointed at the console's
// address, with an Origin of the same host) gets 421 and nothing of the
// database, and a write through it changes nothing.
func TestHostsRefusesOtherHosts(t *testing.T) {
	t.Parallel()
	c, err := cairnq.Open(context.Background(), filepath.Join(t.TempDir(), "c.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	task := submit(t, c, "secret", map[string]string{"token": "s3cret"}, nil)
	h := mount(t, c, &console.Options{AllowWrites: true, Hosts: []string{"localhost", "::1", "ops.example."}})
	at := func(method, host, path string) response {
		t.Helper()
		return do(t, h, method, "http://"+host+path, nil, map[string]string{
			"Origin": "http://" + host, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/x-www-form-urlencoded",
		})
	}
	for _, host := range []string{"rebind.attacker.example:8080", "localhost.attacker.example", "127.0.0.2"} {
		for _, r := range []response{at(http.MethodGet, host, "/cairnq/api/tasks/"+task.ID), at(http.MethodPost, host, "/cairnq/tasks/"+task.ID+"/cancel")} {
			if r.Status != http.StatusMisdirectedRequest || strings.Contains(r.Body, "s3cret") {
				t.Errorf("as %s: %d, want 421 and nothing of the task\n%s", host, r.Status, r.Body)
			}
		}
	}
	if got, err := c.Get(ctx(t), task.ID); err != nil || got.Status != cairnq.StatusQueued {
		t.Fatalf("after the refused cancel: %+v, %v", got, err)
	}
	for _, host := range []string{"localhost:8080", "LocalHost", "[::1]:80", "ops.example"} {
		if r := at(http.MethodGet, host, "/cairnq/api/tasks/"+task.ID); r.Status != http.StatusOK || !strings.Contains(r.Body, "s3cret") {
			t.Errorf("as %s: %d\n%s", host, r.Status, r.Body)
		}
	}
}

// An error page says what the console is, as every other page does:
// writes enabled, payloads hidden.
func TestErrorPageShowsTheConsolesMode(t *testing.T) {
	t.Parallel()
	c, err := cairnq.Open(context.Background(), filepath.Join(t.TempDir(), "c.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h := mount(t, c, &console.Options{AllowWrites: true, HidePayloads: true})
	r := get(t, h, "/cairnq/tasks/task_00000000000000000000000000")
	if r.Status != http.StatusNotFound || !strings.Contains(r.Body, "writes enabled") || strings.Contains(r.Body, "read-only") ||
		!strings.Contains(r.Body, "payloads hidden") {
		t.Errorf("error page of a writable console hiding payloads: %d\n%s", r.Status, r.Body)
	}
}
