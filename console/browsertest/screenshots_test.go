package browsertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/console"
	"github.com/ncruces/go-sqlite3"
)

// testScreenshots: a console with some history, as the documentation shows
// it: four queues, tasks that succeeded (one on its second attempt), failed
// and were canceled, two reports running with their progress and children,
// one waiting. The overview and a running task's page are checked, then
// the overview, a filtered list, the task page and the workers at a
// phone's width and a desktop's (the layout: see checkLayout), and
// written as PNG to CAIRNQ_SCREENSHOTS_DIR when it is set (from the SQLite
// run only, whose settled tasks are spread over the last hour):
// console-overview.png and console-task.png at 1280px,
// console-{overview,tasks,task}-{390,1400}.png.
func testScreenshots(t *testing.T, d db, br *browser) {
	c, app := d.open(t), d.open(t)
	ctx := tctx(t)

	type email struct {
		To string `json:"to"`
	}
	type image struct {
		Src string `json:"src"`
	}
	type report struct {
		Account string `json:"account"`
	}
	progress := map[string]float64{"acct_8812": 0.42, "acct_1207": 0.71}
	started := make(chan []string, 4) // a report's children, once it has reported progress
	release := make(chan struct{})
	runWorker(t, app, cairnq.WorkerOptions{ID: "worker-7f3c-a", Queues: []string{"emails", "thumbnails", "default"}, Concurrency: 4}, map[string]cairnq.Handler{
		"send-welcome-email": func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			var p email
			tc.Decode(&p)
			if strings.HasPrefix(p.To, "bounce") {
				return nil, &cairnq.TaskError{Code: "smtp_rejected", Message: "550 5.1.1 <" + p.To + ">: mailbox unavailable",
					Details: map[string]any{"mx": "mx1.example.net", "smtp_status": 550}}
			}
			return map[string]string{"message_id": "<" + strings.ToLower(tc.ID()) + "@mail.acme.example>"}, nil
		},
		"resize-image": func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			var p image
			tc.Decode(&p)
			if strings.HasSuffix(p.Src, ".tiff") {
				return nil, &cairnq.TaskError{Code: "unsupported_format", Message: "cannot decode image/tiff: unsupported compression 7",
					Details: map[string]any{"src": p.Src}}
			}
			return map[string]any{"src": p.Src, "thumb": strings.TrimSuffix(p.Src, ".jpg") + "_320.webp", "width": 320, "height": 240}, nil
		},
		"sync-crm-contacts": func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			if tc.Attempt() == 1 && strings.Contains(string(tc.Payload()), "eu-west") {
				return nil, &cairnq.TaskError{Code: "upstream_timeout", Message: "CRM API did not answer within 10s", Retryable: true}
			}
			return map[string]int{"synced": 118, "skipped": 3}, nil
		},
		"render-chart": func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			return map[string]string{"png": "s3://acme-reports/charts/" + strings.ToLower(tc.ID()) + ".png"}, nil
		},
	})
	runWorker(t, app, cairnq.WorkerOptions{ID: "worker-reports-b2", Queues: []string{"reports"}, Concurrency: 2}, map[string]cairnq.Handler{
		"render-monthly-report": func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			var p report
			tc.Decode(&p)
			f := progress[p.Account]
			if err := tc.Report(ctx, f, fmt.Sprintf("rendering section %d of 7", int(f*7)+1)); err != nil {
				return nil, err
			}
			var children []string
			for _, chart := range []string{"revenue-by-region", "churn-cohorts"} {
				child, err := tc.Submit(ctx, "render-chart", map[string]string{"account": p.Account, "chart": chart}, nil)
				if err != nil {
					return nil, err
				}
				children = append(children, child.ID)
			}
			started <- children
			select {
			case <-release:
				return map[string]any{"pages": 48, "url": "s3://acme-reports/2026-04/" + p.Account + ".pdf"}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
	})
	t.Cleanup(func() { close(release) }) // before the workers stop: registered after them

	var settle []string // the tasks to wait for
	add := func(name string, payload any, o *cairnq.SubmitOptions) *cairnq.Task {
		task := submit(t, app, name, payload, o)
		settle = append(settle, task.ID)
		return task
	}
	for i := range 14 {
		add("send-welcome-email", email{fmt.Sprintf("user%02d@example.com", i+1)}, &cairnq.SubmitOptions{Queue: "emails"})
	}
	for i := range 2 {
		add("send-welcome-email", email{fmt.Sprintf("bounce%d@example.net", i+1)}, &cairnq.SubmitOptions{Queue: "emails", MaxAttempts: 1})
	}
	for i := range 20 {
		add("resize-image", image{fmt.Sprintf("uploads/2026/04/IMG_%04d.jpg", 4100+i*7)}, &cairnq.SubmitOptions{Queue: "thumbnails", Priority: 1})
	}
	for i := range 3 {
		add("resize-image", image{fmt.Sprintf("uploads/2026/04/scan_%02d.tiff", i+1)}, &cairnq.SubmitOptions{Queue: "thumbnails", MaxAttempts: 1})
	}
	for _, region := range []string{"us-east", "eu-west", "ap-south", "us-west", "sa-east"} {
		add("sync-crm-contacts", map[string]string{"region": region}, &cairnq.SubmitOptions{Key: "crm-sync:" + region})
	}
	// Waiting for later: three newsletters due in half an hour, two of
	// which are then called off.
	for i := range 3 {
		task := submit(t, app, "send-newsletter", map[string]string{"issue": "2026-05", "segment": []string{"trial", "pro", "team"}[i]},
			&cairnq.SubmitOptions{Queue: "emails", Delay: 30 * time.Minute})
		if i < 2 {
			if _, err := app.Cancel(ctx, task.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Two reports run (the worker's two slots) and a third waits,
	// submitted once the first two hold those slots.
	var reports []*cairnq.Task
	submitReport := func(acct string) {
		reports = append(reports, submit(t, app, "render-monthly-report", map[string]any{
			"account": acct, "month": "2026-04", "format": "pdf", "currency": "EUR",
			"sections": []string{"summary", "revenue", "costs", "cohorts", "churn", "forecast", "appendix"},
		}, &cairnq.SubmitOptions{
			Queue: "reports", Key: "report:" + acct + ":2026-04", CorrelationID: "month-end-2026-04",
			Metadata: map[string]string{"requested_by": "finance@acme.example", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"},
		}))
	}
	submitReport("acct_8812")
	submitReport("acct_1207")
	for range 2 {
		select {
		case children := <-started:
			settle = append(settle, children...)
		case <-time.After(liveDeadline):
			t.Fatal("the reports did not start")
		}
	}
	submitReport("acct_5530")
	for _, id := range settle {
		if _, err := app.Wait(ctx, id, nil); err != nil {
			t.Fatal(err)
		}
	}
	if d.sqlitePath != "" {
		spreadOverLastHour(t, d.sqlitePath)
	}

	base := serve(t, c, &console.Options{AllowWrites: true, PollInterval: d.pollInterval()})
	tb := br.newTab(t)
	tb.navigate(base + "/")
	waitFor[bool](tb, "two reports running with their progress",
		`document.querySelectorAll("#live progress").length === 2`, `document.getElementById("live").innerText`)
	got := eval[map[string]counts](tb, queueCountsJS)
	want := map[string]counts{
		"default":    {Succeeded: 9}, // five syncs, four charts
		"emails":     {Queued: 1, Succeeded: 14, Failed: 2, Canceled: 2},
		"reports":    {Queued: 1, Running: 2},
		"thumbnails": {Succeeded: 20, Failed: 3},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("overview counts:\n got %v\nwant %v", got, want)
	}
	if d.backend == "sqlite" {
		tb.screenshot("console-overview")
	}
	tb.navigate(base + "/workers")
	// The busy worker first, then the idle one, which holds no lease.
	if w := eval[string](tb, `document.querySelector("#live tbody").innerText`); !strings.HasPrefix(w, "worker-reports-b2\t") ||
		!strings.Contains(w, "\treports\t2 of 2\t") || !strings.Contains(w, "\nworker-7f3c-a\t") || !strings.HasSuffix(w, "\tno lease") {
		t.Errorf("workers page: %q", w)
	}

	tb.navigate(base + "/tasks/" + reports[0].ID)
	state := eval[map[string]any](tb, taskStateJS)
	if state["status"] != "running" || state["progress"] != 0.42 || state["message"] != "rendering section 3 of 7" {
		t.Fatalf("report page: %v", state)
	}
	if n := eval[int](tb, `document.querySelectorAll("#live section")[3].querySelectorAll("tbody tr").length`); n != 2 {
		t.Errorf("report page: %d children shown, want 2", n)
	}
	if d.backend == "sqlite" {
		tb.screenshot("console-task")
	}

	// The layout at a phone's width and a desktop's: the document no wider
	// than the window, and each page's key fields shown whole; the list as
	// cards on the phone, a table on the desktop. Written as
	// console-{overview,tasks,task}-{390,1400}.png.
	rows := []string{"#live table.tasks td.id a", "#live table.tasks td.name", "#live table.tasks .status",
		"#live table.tasks td.queue", "#live table.tasks td.attempt", "#live table.tasks td.created"}
	layouts := []struct {
		name, path string
		sel        []string
		phone      []string // checked at the phone's width only (the desktop's cuts long errors short)
	}{
		{"overview", "/", []string{"#live h1", "#live table.queues tbody td", "#live table.running td.id a",
			"#live table.running td.name", "#live table.running td.queue", "#counted",
			"#live .chartbox .yaxis span:first-child", "#live .chartbox .xaxis span"}, nil},
		{"tasks", "/tasks?queue=emails&limit=8", append([]string{"#matches", "#live form.filters"}, rows...),
			[]string{"#live table.tasks td.err:not(.empty)"}},
		{"task", "/tasks/" + reports[0].ID, append([]string{"#live h1 .id", "#live .headline .status", "#live .headline strong",
			"#live dl.fields dd", "#live progress.big"}, rows...), nil},
		{"workers", "/workers", []string{"#live td.id", "#live td.num"}, nil}, // checked, not shown in the docs
	}
	for _, width := range []int64{phoneWidth, desktopWidth} {
		tb.viewport(width, 900)
		for _, l := range layouts {
			tb.navigate(base + l.path)
			sel := l.sel
			if width < cardsBelow {
				sel = append(sel, l.phone...)
			}
			checkLayout(tb, l.name, sel...)
			// Cards (block, or grid for the queues' counts) on the phone,
			// table rows on the desktop.
			got := eval[string](tb, rowDisplayJS)
			if cards := !strings.Contains(got, "table-row"); got == "" || cards != (width < cardsBelow) {
				t.Errorf("%s at %dpx: the tables' rows are laid out as %q", l.name, width, got)
			}
			if l.name == "tasks" {
				if got := eval[string](tb, `document.getElementById("matches").innerText`); got != "19 tasks match" {
					t.Errorf("the list of emails says %q, want 19 tasks match", got)
				}
			}
			if d.backend == "sqlite" && l.name != "workers" {
				tb.screenshot(fmt.Sprintf("console-%s-%d", l.name, width))
			}
		}
	}
	checkChartAxes(t, tb, base)
	checkDarkMode(t, tb, base, d.backend == "sqlite", layouts[0].sel, layouts[1].sel)
}

// checkChartAxes checks the overview chart's axes: the peak, its half
// and 0 up the side, five times in UTC along the bottom, the last the
// newest minute.
func checkChartAxes(t *testing.T, tb *tab, base string) {
	t.Helper()
	tb.navigate(base + "/")
	y := eval[[]string](tb, `[...document.querySelectorAll("#live .chartbox .yaxis span")].map(s => s.textContent)`)
	x := eval[[]string](tb, `[...document.querySelectorAll("#live .chartbox .xaxis span")].map(s => s.textContent)`)
	if len(y) != 3 || y[0] == "" || y[0] == "0" || y[2] != "0" {
		t.Errorf("the chart's y axis: %q, want the peak, its half and 0", y)
	}
	if len(x) != 5 || !strings.HasSuffix(x[4], " UTC") {
		t.Errorf("the chart's x axis: %q, want five times, the last in UTC", x)
	}
}

// checkDarkMode shows the overview and the task list with the system
// asking for dark colours: dark surfaces and light text, laid out as in
// light mode at a phone's width and a desktop's, written as
// console-{overview,tasks}-{390,1400}-dark.png.
func checkDarkMode(t *testing.T, tb *tab, base string, shots bool, overview, tasks []string) {
	t.Helper()
	tb.colorScheme("dark")
	defer tb.colorScheme("")
	for _, width := range []int64{phoneWidth, desktopWidth} {
		tb.viewport(width, 900)
		for _, p := range []struct {
			name, path string
			sel        []string
		}{{"overview", "/", overview}, {"tasks", "/tasks?queue=emails&limit=8", tasks}} {
			tb.navigate(base + p.path)
			checkLayout(tb, p.name+" in dark mode", p.sel...)
			bg := eval[string](tb, `getComputedStyle(document.body).backgroundColor`)
			fg := eval[string](tb, `getComputedStyle(document.body).color`)
			// A table's surface: the cards' on the phone, the table's on the desktop.
			card := "#live table"
			if width < cardsBelow {
				card = "#live table.cards tbody tr"
			}
			surface := eval[string](tb, `getComputedStyle(document.querySelector("`+card+`")).backgroundColor`)
			if bg != "rgb(21, 24, 30)" || fg != "rgb(227, 230, 236)" || surface != "rgb(30, 35, 43)" {
				t.Errorf("%s in dark mode at %dpx: background %s, text %s, tables %s", p.name, width, bg, fg, surface)
			}
			if shots {
				tb.screenshot(fmt.Sprintf("console-%s-%d-dark", p.name, width))
			}
		}
	}
}

// spreadOverLastHour moves the settled tasks that have no parent back by
// one to fifty-five minutes each, as if the console had been watching a
// while, so the overview's chart of the last hour has some shape. It writes
// the protocol v1 table (shared by every SDK) directly: there is no API to
// make a task older.
func spreadOverLastHour(t *testing.T, path string) {
	t.Helper()
	conn, err := sqlite3.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.BusyTimeout(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	const shift = `((rowid * 37) % 55 + 1) * 60000 + (rowid * 7919) % 60000`
	err = conn.Exec(`UPDATE cairnq_tasks SET
		created_at_ms = created_at_ms - ` + shift + `,
		run_at_ms = run_at_ms - ` + shift + `,
		updated_at_ms = updated_at_ms - ` + shift + `,
		completed_at_ms = completed_at_ms - ` + shift + `
		WHERE status IN ('succeeded', 'failed') AND parent_id IS NULL`)
	if err != nil {
		t.Fatal(err)
	}
}
