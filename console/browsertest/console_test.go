package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/console"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// counts is one row of the overview's Queues table.
type counts struct {
	Queued    int `json:"queued"`
	Running   int `json:"running"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Canceled  int `json:"canceled"`
}

// queueCountsJS reads the overview's Queues table as the browser renders
// it: {queue: counts}.
const queueCountsJS = `(() => {
  const out = {};
  for (const h of document.querySelectorAll("#live h2")) {
    if (h.textContent.trim() !== "Queues") continue;
    for (const tr of h.parentElement.querySelectorAll("tbody tr")) {
      const td = tr.querySelectorAll("td");
      if (td.length !== 7) continue;
      const n = i => Number(td[i].textContent.trim());
      out[td[0].querySelector("a").textContent.trim()] = {queued: n(1), running: n(2), succeeded: n(3), failed: n(4), canceled: n(5)};
    }
  }
  return out;
})()`

// waitLive waits for a console page to be live: its EventSource open and
// the re-read its first event asks for applied (the header's dot turns
// on). A page that is not the console's is live at once.
func waitLive(tb *tab) {
	tb.t.Helper()
	waitFor[bool](tb, "the live indicator (the event stream open, its first re-read applied)",
		`(() => { const s = document.getElementById("live-state"); return !s || document.body.getAttribute("data-page") === "error" || s.classList.contains("on"); })()`,
		`(document.getElementById("live-state") || {}).className`)
}

// taskStateJS is what a task page shows of the task's state.
const taskStateJS = `(() => {
  const p = document.querySelector("#live progress.big");
  const m = document.querySelector("#live .message");
  const s = document.querySelector("#live .headline .status");
  return {status: s ? s.textContent : "", progress: p ? p.value : -1, message: m ? m.textContent : ""};
})()`

// sectionTextJS is the rendered text of what follows the #live h2 titled %q.
const sectionTextJS = `(() => {
  const h = [...document.querySelectorAll("#live h2")].find(h => h.textContent.trim() === %q);
  return h && h.nextElementSibling ? h.nextElementSibling.innerText : "(no " + %[1]q + " section)";
})()`

// fieldTextJS is the text of the task page's field (dl.fields) %q.
const fieldTextJS = `(() => {
  const dt = [...document.querySelectorAll("#live dl.fields dt")].find(dt => dt.textContent.trim() === %q);
  return dt ? dt.nextElementSibling.textContent : "(no field " + %[1]q + ")";
})()`

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestConsole drives the console in a headless Chromium, on SQLite and on
// Postgres: one browser per backend, and per scenario a tab of its own, a
// new database and a console on a real HTTP server.
func TestConsole(t *testing.T) {
	scenarios := []struct {
		name string
		run  func(t *testing.T, d db, br *browser)
	}{
		{"OverviewCountsLive", testOverviewCountsLive},
		{"ProgressLive", testProgressLive},
		{"TaskPage", testTaskPage},
		{"CancelFromPage", testCancelFromPage},
		{"BulkCancelFromList", testBulkCancelFromList},
		{"RetryByFilterFromList", testRetryByFilterFromList},
		{"AttemptsAndSchedules", testAttemptsAndSchedules},
		{"ReadOnly", testReadOnly},
		{"CrossSiteRefused", testCrossSiteRefused},
		{"ValuesRenderInert", testValuesRenderInert},
		{"Screenshots", testScreenshots},
		{"MissedWhileConnecting", testMissedWhileConnecting},
		{"LiveLost", testLiveLost},
		{"ListMatchCount", testListMatchCount},
		{"WorkflowGraphLive", testWorkflowGraphLive},
		{"FleetPauseFromOverview", testFleetPauseFromOverview},
	}
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			br := newBrowser(t)
			for _, s := range scenarios {
				t.Run(s.name, func(t *testing.T) { s.run(t, newDB(t, backend), br) })
			}
		})
	}
}

// testOverviewCountsLive: the overview shows each queue's counts, and they
// follow what another client does, with no reload.
func testOverviewCountsLive(t *testing.T, d db, br *browser) {
	c, other := d.open(t), d.open(t)
	submit(t, c, "send-email", map[string]string{"to": "ada@example.com"}, &cairnq.SubmitOptions{Queue: "emails"})
	base := serve(t, c, &console.Options{PollInterval: d.pollInterval()})
	tb := br.newTab(t)

	tb.navigate(base + "/")
	got := eval[map[string]counts](tb, queueCountsJS)
	if len(got) != 1 || got["emails"] != (counts{Queued: 1}) {
		t.Fatalf("overview counts %+v, want emails: 1 queued", got)
	}
	waitLive(tb)

	// Another client on the same database submits.
	var ids []string
	for i := range 3 {
		ids = append(ids, submit(t, other, "send-email", map[string]string{"to": fmt.Sprintf("user%d@example.com", i)}, &cairnq.SubmitOptions{Queue: "emails"}).ID)
	}
	submit(t, other, "resize-image", map[string]string{"src": "cat.png"}, &cairnq.SubmitOptions{Queue: "thumbnails"})
	waitFor[bool](tb, "emails: 4 queued, thumbnails: 1 queued",
		`(() => { const q = `+queueCountsJS+`; return q.emails && q.emails.queued === 4 && q.thumbnails && q.thumbnails.queued === 1; })()`,
		`JSON.stringify(`+queueCountsJS+`)`)
	if !tb.marked() {
		t.Fatal("the overview was loaded again; it should update in place")
	}

	// And cancels: a count moves from queued to canceled.
	if _, err := other.Cancel(tctx(t), ids[0]); err != nil {
		t.Fatal(err)
	}
	waitFor[bool](tb, "emails: 3 queued, 1 canceled",
		`(() => { const q = `+queueCountsJS+`; return q.emails && q.emails.queued === 3 && q.emails.canceled === 1; })()`,
		`JSON.stringify(`+queueCountsJS+`)`)
	if !tb.marked() {
		t.Fatal("the overview was loaded again; it should update in place")
	}
}

// testProgressLive: a task's page follows the progress its handler reports,
// with no reload, until it succeeds.
func testProgressLive(t *testing.T, d db, br *browser) {
	c, other := d.open(t), d.open(t)
	task := submit(t, other, "render-report", map[string]string{"account": "acct_8812", "month": "2026-04"}, &cairnq.SubmitOptions{Queue: "reports"})
	base := serve(t, c, &console.Options{PollInterval: d.pollInterval()})
	tb := br.newTab(t)
	tb.navigate(base + "/tasks/" + task.ID)
	if s := eval[map[string]any](tb, taskStateJS); s["status"] != "queued" || s["progress"] != -1.0 {
		t.Fatalf("task page before any worker: %v", s)
	}
	waitLive(tb)

	type step struct {
		frac float64
		msg  string // "": Progress, which keeps the message; else Report
	}
	steps := make(chan step)
	runWorker(t, other, cairnq.WorkerOptions{ID: "report-worker-1", Queues: []string{"reports"}}, map[string]cairnq.Handler{
		"render-report": func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			for {
				select {
				case s, ok := <-steps:
					if !ok {
						return map[string]int{"pages": 50}, nil
					}
					err := tc.Progress(ctx, s.frac)
					if s.msg != "" {
						err = tc.Report(ctx, s.frac, s.msg)
					}
					if err != nil {
						return nil, err
					}
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
		},
	})
	send := func(s step) {
		t.Helper()
		select {
		case steps <- s:
		case <-time.After(liveDeadline):
			t.Fatalf("the handler did not take step %v", s)
		}
	}
	state := `JSON.stringify(` + taskStateJS + `)`
	waitFor[bool](tb, "status running", `(`+taskStateJS+`).status === "running"`, state)
	for _, s := range []struct {
		step
		shown string // the message the page shows then
	}{
		{step{0.25, "page 13 of 50"}, "page 13 of 50"},
		{step{0.5, ""}, "page 13 of 50"},
		{step{0.8, "page 40 of 50"}, "page 40 of 50"},
	} {
		send(s.step)
		waitFor[bool](tb, fmt.Sprintf("progress %v %q", s.frac, s.shown),
			fmt.Sprintf(`(() => { const s = %s; return s.progress === %v && s.message === %s; })()`, taskStateJS, s.frac, jsString(s.shown)), state)
	}
	close(steps)
	waitFor[bool](tb, "status succeeded", `(`+taskStateJS+`).status === "succeeded"`, state)
	if !tb.marked() {
		t.Fatal("the task page was loaded again; it should update in place")
	}
}

// testTaskPage: a task opened from the list shows its payload and key.
func testTaskPage(t *testing.T, d db, br *browser) {
	c, other := d.open(t), d.open(t)
	payload := map[string]any{
		"invoice":     "INV-2041",
		"customer":    map[string]any{"id": "cus_77", "email": "billing@acme.example"},
		"lines":       []any{map[string]any{"sku": "PAPER-A4", "qty": 12}},
		"total_cents": 12950,
	}
	task := submit(t, other, "charge-invoice", payload, &cairnq.SubmitOptions{Queue: "billing", Key: "invoice:INV-2041"})
	submit(t, other, "charge-invoice", map[string]any{"invoice": "INV-2042"}, &cairnq.SubmitOptions{Queue: "billing"})
	base := serve(t, c, nil)
	tb := br.newTab(t)

	tb.navigate(base + "/tasks")
	tb.clickAndLoad("open the task from the list", `#live td.id a[href="/cairnq/tasks/`+task.ID+`"]`)
	if p := eval[string](tb, `location.pathname`); p != "/cairnq/tasks/"+task.ID {
		t.Fatalf("the link led to %s", p)
	}
	text := eval[string](tb, fmt.Sprintf(sectionTextJS, "Payload"))
	for _, want := range []string{`"invoice": "INV-2041"`, `"email": "billing@acme.example"`, `"sku": "PAPER-A4"`, `"qty": 12`, `"total_cents": 12950`} {
		if !strings.Contains(text, want) {
			t.Errorf("the payload as shown lacks %s:\n%s", want, text)
		}
	}
	if key := eval[string](tb, fmt.Sprintf(fieldTextJS, "Key")); key != "invoice:INV-2041" {
		t.Errorf("key shown as %q", key)
	}
	if h := eval[string](tb, `document.querySelector("#live .headline").innerText`); h != "queued charge-invoice on billing" {
		t.Errorf("headline %q", h)
	}
}

// testCancelFromPage: with writes allowed, the task page's Cancel button
// (after its confirmation) cancels the task in the database.
func testCancelFromPage(t *testing.T, d db, br *browser) {
	c, other := d.open(t), d.open(t)
	task := submit(t, other, "send-email", map[string]string{"to": "ada@example.com"}, &cairnq.SubmitOptions{Queue: "emails"})
	base := serve(t, c, &console.Options{AllowWrites: true})
	tb := br.newTab(t)

	tb.navigate(base + "/tasks/" + task.ID)
	if m := eval[string](tb, `document.querySelector("header .mode").textContent`); m != "writes enabled" {
		t.Fatalf("header mode %q", m)
	}
	tb.clickAndLoad("click Cancel", `#live .actions form[action$="/cancel"] button`)
	if got := tb.dialogsSeen(); !slices.Equal(got, []string{"confirm: Cancel this task?"}) {
		t.Errorf("dialogs %q, want the confirmation", got)
	}
	if st := status(t, c, task.ID); st != cairnq.StatusCanceled {
		t.Fatalf("after the click: status %s, want canceled", st)
	}
	// Back on the task's page, which says so.
	if p := eval[string](tb, `location.pathname`); p != "/cairnq/tasks/"+task.ID {
		t.Fatalf("after cancel the browser is on %s", p)
	}
	if f := eval[string](tb, `(document.querySelector("#live .flash") || {}).textContent || ""`); f != "Cancel requested." {
		t.Errorf("flash %q", f)
	}
	if s := eval[map[string]any](tb, taskStateJS); s["status"] != "canceled" {
		t.Errorf("page shows status %v", s["status"])
	}
	buttons := eval[[]string](tb, `[...document.querySelectorAll("#live .actions button")].map(b => b.textContent)`)
	if !slices.Equal(buttons, []string{"Retry", "Submit a copy", "Delete"}) {
		t.Errorf("buttons of a canceled task: %q", buttons)
	}
}

// testBulkCancelFromList: with writes allowed, the list's select-all box
// checks every row, and its bulk Cancel (after its confirmation) cancels
// them all in the database.
func testBulkCancelFromList(t *testing.T, d db, br *browser) {
	c, other := d.open(t), d.open(t)
	var ids []string
	for i := range 3 {
		ids = append(ids, submit(t, other, "send-email", map[string]string{"to": fmt.Sprintf("user%d@example.com", i)}, &cairnq.SubmitOptions{Queue: "emails"}).ID)
	}
	base := serve(t, c, &console.Options{AllowWrites: true})
	tb := br.newTab(t)

	tb.navigate(base + "/tasks?queue=emails")
	tb.do("check select-all", chromedp.Click(chromedp.CSS(`#live input.select-all`)))
	if n := eval[int](tb, `document.querySelectorAll("#live input[name=id]:checked").length`); n != 3 {
		t.Fatalf("select-all checked %d rows, want 3", n)
	}
	tb.clickAndLoad("click the bulk Cancel", `#bulk button[value=cancel]`)
	if got := tb.dialogsSeen(); !slices.Equal(got, []string{"confirm: Apply to the selected tasks?"}) {
		t.Errorf("dialogs %q, want the confirmation", got)
	}
	if f := eval[string](tb, `(document.querySelector("#live .flash") || {}).textContent || ""`); f != "cancel: 3 changed, 0 unchanged." {
		t.Errorf("flash %q", f)
	}
	if q := eval[string](tb, `location.pathname + location.search`); !strings.HasPrefix(q, "/cairnq/tasks?") || !strings.Contains(q, "queue=emails") {
		t.Errorf("after the bulk cancel the browser is on %s, want the same list", q)
	}
	for _, id := range ids {
		if st := status(t, c, id); st != cairnq.StatusCanceled {
			t.Errorf("%s after the bulk cancel: %s, want canceled", id, st)
		}
	}
}

// testReadOnly: without AllowWrites the pages offer no write, and a
// forged POST, from the page itself or from another site, is refused.
func testReadOnly(t *testing.T, d db, br *browser) {
	c, other := d.open(t), d.open(t)
	task := submit(t, other, "send-email", map[string]string{"to": "ada@example.com"}, &cairnq.SubmitOptions{Queue: "emails"})
	base := serve(t, c, nil)
	tb := br.newTab(t)

	tb.navigate(base + "/tasks/" + task.ID)
	if m := eval[string](tb, `document.querySelector("header .mode").textContent`); m != "read-only" {
		t.Fatalf("header mode %q", m)
	}
	if n := eval[int](tb, `document.querySelectorAll("#live button, #live form[method=post], #live .actions").length`); n != 0 {
		t.Fatalf("a read-only task page has %d buttons or post forms", n)
	}
	tb.navigate(base + "/tasks")
	if n := eval[int](tb, `document.querySelectorAll("#bulk, #live input[name=id], #live form[method=post]").length`); n != 0 {
		t.Fatalf("a read-only list has %d bulk controls", n)
	}

	// Forged from the page's own JavaScript context: same origin, so
	// past the cross-origin check, and refused as a write.
	tb.allow("status of 403")
	type reply struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}
	for _, f := range []struct{ path, ctype, body string }{
		{"/tasks/" + task.ID + "/cancel", "application/x-www-form-urlencoded", ""},
		{"/api/tasks/" + task.ID + "/cancel", "application/json", ""},
		{"/tasks/bulk", "application/x-www-form-urlencoded", "action=cancel&id=" + task.ID},
		{"/api/tasks/bulk", "application/json", `{"action":"cancel","ids":["` + task.ID + `"]}`},
	} {
		r := eval[reply](tb, fmt.Sprintf(`fetch(%s, {method: "POST", headers: {"Content-Type": %s}, body: %s})
			.then(async r => ({status: r.status, body: await r.text()}))`, jsString(base+f.path), jsString(f.ctype), jsString(f.body)))
		if r.Status != http.StatusForbidden || !strings.Contains(r.Body, "writes are disabled") {
			t.Errorf("fetch POST %s from the page: %d %q, want 403 writes are disabled", f.path, r.Status, r.Body)
		}
	}

	// Forged from another site: refused before the write check.
	req, _ := http.NewRequest("POST", base+"/tasks/"+task.ID+"/cancel", strings.NewReader(""))
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "cross-origin request refused") {
		t.Errorf("POST with Origin https://evil.example: %d %q", resp.StatusCode, body)
	}

	if st := status(t, c, task.ID); st != cairnq.StatusQueued {
		t.Fatalf("after the forged posts: %s, want queued", st)
	}
}

// testCrossSiteRefused: with writes allowed, a page of another site that
// posts to the console (a form the user is lured into submitting, a
// no-cors fetch) changes nothing: the browser says where the request comes
// from and http.CrossOriginProtection refuses it.
func testCrossSiteRefused(t *testing.T, d db, br *browser) {
	c := d.open(t)
	task := submit(t, c, "send-email", map[string]string{"to": "ada@example.com"}, &cairnq.SubmitOptions{Queue: "emails"})
	base := serve(t, c, &console.Options{AllowWrites: true}) // on 127.0.0.1
	evil := evilSite(t, `<!doctype html><title>prizes</title>
<form method="post" action="`+base+`/tasks/`+task.ID+`/cancel"><button id="win">Claim your prize</button></form>`)
	tb := br.newTab(t)
	tb.allow("status of 403")

	tb.navigate(evil)
	// A no-cors POST is sent, and its answer is opaque to the page; the
	// promise settles once the console has answered.
	eval[string](tb, fmt.Sprintf(`fetch(%s, {method: "POST", mode: "no-cors", body: "x"}).then(r => r.type)`, jsString(base+"/api/tasks/"+task.ID+"/cancel")))
	if st := status(t, c, task.ID); st != cairnq.StatusQueued {
		t.Fatalf("after a cross-site fetch: %s, want queued", st)
	}
	tb.clickAndLoad("submit the other site's form", "#win")
	if got := eval[string](tb, `location.href + " " + document.body.innerText`); !strings.HasPrefix(got, base) || !strings.Contains(got, "cross-origin request refused") {
		t.Fatalf("after the cross-site form: %q", got)
	}
	if st := status(t, c, task.ID); st != cairnq.StatusQueued {
		t.Fatalf("after a cross-site form: %s, want queued", st)
	}
}

// evilSite serves html at the root of another site than the console's:
// on 127.0.0.2, another host than the console's 127.0.0.1; where that
// address cannot be bound, on 127.0.0.1 with another port, another origin,
// which http.CrossOriginProtection refuses as well.
func evilSite(t *testing.T, html string) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(html))
	}))
	if l, err := net.Listen("tcp", "127.0.0.2:0"); err == nil {
		srv.Listener.Close()
		srv.Listener = l
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

const (
	xssScript = `<script>window.__xss=1</script>`
	xssImg    = `"><img src=x onerror="window.__xss=2">`
	evil      = xssScript + xssImg
)

// inertJS reports what would show that markup from the data came alive:
// window.__xss set, any script but the console's, any image, any inline
// handler; and the rendered text of the page.
const inertJS = `(() => ({
  xss: typeof window.__xss === "undefined" ? "undefined" : String(window.__xss),
  scripts: [...document.scripts].map(s => s.getAttribute("src") || "inline: " + s.textContent),
  images: document.images.length,
  handlers: document.querySelectorAll("[onerror], [onload], [onclick], [onmouseover]").length,
  text: document.body.innerText,
}))()`

// injectJS puts the markup into the page unescaped, as a template that
// trusted the data would: the image through innerHTML, the script as a
// script element (innerHTML never runs one). Once the image has failed to
// load it resolves with whether the script and the image's handler ran.
var injectJS = `new Promise(resolve => {
  window.__xss = undefined;
  const s = document.createElement("script");
  s.textContent = ` + jsString("window.__xss = 1; window.__scriptRan = true") + `;
  document.body.append(s);
  const d = document.createElement("div");
  d.innerHTML = ` + jsString(xssImg) + `;
  d.querySelector("img").addEventListener("error", () => setTimeout(() => resolve(
    (window.__scriptRan ? "script ran" : "script blocked") + ", " +
    (window.__xss === 2 ? "image handler ran" : "image handler blocked")), 0));
  document.body.append(d);
})`

// consoleScript is the path of the console's script, named by its hash.
var consoleScript = regexp.MustCompile(`^/cairnq/static/console\.[0-9a-f]{16}\.js$`)

type inertness struct {
	XSS      string   `json:"xss"`
	Scripts  []string `json:"scripts"`
	Images   int      `json:"images"`
	Handlers int      `json:"handlers"`
	Text     string   `json:"text"`
}

// testValuesRenderInert: a task whose name, payload, key, correlation id,
// progress message and error hold markup renders it as text, on its page,
// the list (also refreshed live), filtered lists and the overview.
//
// The pages are read twice: once with the Content-Security-Policy bypassed,
// so that only the escaping stands between the data and the page (a script
// that got in would run: a control shows it), then with the policy enforced,
// where nothing may be reported on the console.
func testValuesRenderInert(t *testing.T, d db, br *browser) {
	c, other := d.open(t), d.open(t)
	task := submit(t, other, evil, map[string]string{"html": evil, evil: "as a key"}, &cairnq.SubmitOptions{
		Queue: "q-xss", Key: evil, MaxAttempts: 1, CorrelationID: evil, Metadata: map[string]string{"note": evil},
	})
	runWorker(t, other, cairnq.WorkerOptions{Queues: []string{"q-xss"}}, map[string]cairnq.Handler{
		evil: func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			if err := tc.Report(ctx, 0.5, evil); err != nil {
				return nil, err
			}
			return nil, &cairnq.TaskError{Code: "bad_input", Message: evil, Details: map[string]any{evil: evil}}
		},
	})
	done, err := c.Wait(tctx(t), task.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != cairnq.StatusFailed {
		t.Fatalf("the task: %s, want failed", done.Status)
	}
	base := serve(t, c, &console.Options{AllowWrites: true, PollInterval: d.pollInterval()})
	tb := br.newTab(t)
	q := func(s string) string { return strconv.Quote(s) } // as the JSON view shows a string

	pages := []struct {
		path   string
		text   []string          // shown as text
		values map[string]string // selector: the value of that input
	}{
		{"/tasks/" + task.ID, []string{
			evil + " on q-xss", // the headline's name
			"Key\n" + evil, "Correlation id\n" + evil,
			"— " + evil,                                    // the progress message
			"Message\n" + evil,                             // the error's
			`"html": ` + q(evil), q(evil) + `: "as a key"`, // payload
			`"note": ` + q(evil), // metadata
		}, nil},
		{"/tasks", []string{evil + "\tq-xss", "bad_input: " + evil}, nil},
		{"/tasks?name=" + url.QueryEscape(evil) + "&key=" + url.QueryEscape(evil) + "&correlation_id=" + url.QueryEscape(evil), []string{evil + "\tq-xss"}, map[string]string{
			// The filter form gives the values back in attributes.
			"form.filters input[name=name]": evil, "form.filters input[name=key]": evil, "form.filters input[name=correlation_id]": evil,
		}},
		{"/", []string{evil + "\t1"}, nil}, // failing names
	}
	check := func(pass, path string, want []string, values map[string]string) {
		t.Helper()
		for sel, v := range values {
			if got := eval[string](tb, `document.querySelector(`+jsString("#live "+sel)+`).value`); got != v {
				t.Errorf("%s %s: %s holds %q, want %q", pass, path, sel, got, v)
			}
		}
		got := eval[inertness](tb, inertJS)
		if got.XSS != "undefined" {
			t.Errorf("%s %s: window.__xss = %s: markup from the database ran", pass, path, got.XSS)
		}
		if len(got.Scripts) != 1 || !consoleScript.MatchString(got.Scripts[0]) || got.Images != 0 || got.Handlers != 0 {
			t.Errorf("%s %s: scripts %q, %d images, %d inline handlers: markup from the database got into the page", pass, path, got.Scripts, got.Images, got.Handlers)
		}
		for _, w := range want {
			if !strings.Contains(got.Text, w) {
				t.Errorf("%s %s: the page does not show %q as text:\n%s", pass, path, w, got.Text)
			}
		}
	}

	// Pass 1: the policy bypassed.
	if _, err := chromedp.Call(tb.ctx, page.SetBypassCSP, page.SetBypassCSPParams{Enabled: true}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		tb.navigate(base + p.path)
		check("without CSP", p.path, p.text, p.values)
		if p.path == "/tasks" {
			// Live: a row arriving is rendered by the script (innerHTML).
			waitLive(tb)
			submit(t, other, evil, map[string]string{"again": evil}, &cairnq.SubmitOptions{Queue: "q-xss-idle"})
			waitFor[bool](tb, "the new row", `document.querySelectorAll("#live table.tasks tbody tr").length === 2`,
				`document.querySelector("#live table.tasks tbody").innerText`)
			if !tb.marked() {
				t.Fatal("the list was loaded again; it should update in place")
			}
			check("without CSP, refreshed live", p.path, []string{evil + "\tq-xss-idle"}, nil)
		}
	}
	// The control: with the policy bypassed, the same markup let into the
	// page unescaped (as a template that trusted the data would) runs, so
	// the checks above would have seen it.
	tb.allow(base + "/x") // the image's 404
	if got := eval[string](tb, injectJS); got != "script ran, image handler ran" {
		t.Fatalf("control, policy bypassed: the markup let in unescaped: %s, want both to run", got)
	}

	// Pass 2: the policy enforced; the same pages, and the control refused.
	if _, err := chromedp.Call(tb.ctx, page.SetBypassCSP, page.SetBypassCSPParams{Enabled: false}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		tb.navigate(base + p.path)
		check("with CSP", p.path, p.text, p.values)
	}
	if n := len(tb.unexpected()); n != 0 {
		t.Fatalf("%d console errors or policy reports on the pages", n) // listed by the cleanup
	}
	// The control, policy enforced: the markup let in unescaped is still
	// inert (the second line of defence), and the browser reports it.
	tb.allow("Executing inline") // script and event handler, refused
	tb.allow(base + "/x")        // the image's 404
	if got := eval[string](tb, injectJS); got != "script blocked, image handler blocked" {
		t.Fatalf("control, policy enforced: the markup let in unescaped: %s, want both blocked", got)
	}
}

// testMissedWhileConnecting: a change made after the page was rendered but
// before its event stream listens shows without a reload, with no poll to
// fall back on (an hour): the stream subscribes before it opens and opens
// with a change. The window is widened here by holding /events back.
func testMissedWhileConnecting(t *testing.T, d db, br *browser) {
	c := d.open(t)
	h := http.StripPrefix("/cairnq", console.Handler(c, &console.Options{PollInterval: time.Hour}))
	connect := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/cairnq/events" {
			select {
			case <-connect:
			case <-r.Context().Done():
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	tb := br.newTab(t)

	tb.navigateEarly(srv.URL + "/cairnq/")
	submit(t, c, "late", nil, &cairnq.SubmitOptions{Queue: "late"}) // the same client: heard in-process, or by LISTEN
	close(connect)
	waitLive(tb)
	waitFor[bool](tb, "late: 1 queued, submitted while the page connected",
		`(() => { const q = `+queueCountsJS+`; return q.late && q.late.queued === 1; })()`,
		`JSON.stringify(`+queueCountsJS+`)`)
}
