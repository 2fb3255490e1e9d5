package browsertest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/console"
)

// testRetryByFilterFromList: a list filtered by status and queue offers
// actions on every matching task, laid out within the window at a
// desktop's width and a phone's; its Retry all (after its confirmation)
// queues again every failed task of the queue, the pages beyond the one
// shown included, and nothing else; a task's Delete deletes it.
func testRetryByFilterFromList(t *testing.T, d db, br *browser) {
	c, other := d.open(t), d.open(t)
	var ids []string
	for range 5 {
		task := submit(t, other, "send-email", map[string]string{"to": "ada@example.com"}, &cairnq.SubmitOptions{Queue: "emails"})
		if _, err := other.Cancel(tctx(t), task.ID); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	untouched := submit(t, other, "send-email", nil, &cairnq.SubmitOptions{Queue: "other"})
	if _, err := other.Cancel(tctx(t), untouched.ID); err != nil {
		t.Fatal(err)
	}
	base := serve(t, c, &console.Options{AllowWrites: true})
	tb := br.newTab(t)
	for _, w := range []int64{phoneWidth, desktopWidth} {
		tb.viewport(w, 900)
		tb.navigate(base + "/tasks?status=canceled&queue=emails&limit=2")
		checkLayout(tb, "a list's actions by filter", "#bulk-filter", "#bulk-filter button")
	}
	tb.clickAndLoad("click Retry all", `#bulk-filter button[value=retry]`)
	if got := tb.dialogsSeen(); !slices.Equal(got, []string{"confirm: Apply to every task matching the filters, on every page?"}) {
		t.Errorf("dialogs %q, want the confirmation", got)
	}
	if f := eval[string](tb, `(document.querySelector("#live .flash") || {}).textContent || ""`); f != "retry: 5 changed, every matching task." {
		t.Errorf("flash %q", f)
	}
	for _, id := range ids {
		if st := status(t, c, id); st != cairnq.StatusQueued {
			t.Errorf("%s after Retry all: %s, want queued", id, st)
		}
	}
	if st := status(t, c, untouched.ID); st != cairnq.StatusCanceled {
		t.Errorf("the canceled task on another queue: %s, want canceled", st)
	}

	tb.navigate(base + "/tasks/" + untouched.ID)
	tb.clickAndLoad("click Delete", `#live form[action$="/delete"] button`)
	if got := tb.dialogsSeen(); len(got) != 2 || got[1] != "confirm: Delete this task and its key?" {
		t.Errorf("dialogs %q, want the confirmation", got)
	}
	if _, err := other.Get(tctx(t), untouched.ID); err == nil {
		t.Errorf("%s is still there after Delete", untouched.ID)
	}
}

// testAttemptsAndSchedules: a task's every attempt's error and the
// overview's periodic schedules, laid out within the window at a phone's
// width and a desktop's.
func testAttemptsAndSchedules(t *testing.T, d db, br *browser) {
	c, other := d.open(t), d.open(t)
	task := submit(t, other, "sync-crm-contacts", map[string]string{"account": "acme"}, nil)
	runWorker(t, other, cairnq.WorkerOptions{ID: "crm-worker", RetryBackoff: cairnq.NoRetryBackoff}, map[string]cairnq.Handler{
		"sync-crm-contacts": func(_ context.Context, tc *cairnq.TaskContext) (any, error) {
			if tc.Attempt() < 3 {
				return nil, fmt.Errorf("CRM API did not answer within 10s (try %d)", tc.Attempt())
			}
			return "synced", nil
		},
	})
	s := cairnq.NewScheduler(other, nil)
	if _, err := s.Add("0 3 * * *", "nightly-report", nil, &cairnq.ScheduleOptions{ID: "nightly-report"}); err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(sctx) }()
	t.Cleanup(func() { stop(); <-done })
	for deadline := time.Now().Add(30 * time.Second); status(t, c, task.ID) != cairnq.StatusSucceeded; {
		if time.Now().After(deadline) {
			t.Fatalf("the task did not succeed on its third attempt: %s", status(t, c, task.ID))
		}
		time.Sleep(20 * time.Millisecond) // between polls: the worker retries at once
	}
	base := serve(t, c, nil)
	tb := br.newTab(t)
	for _, w := range []int64{phoneWidth, desktopWidth} {
		tb.viewport(w, 900)
		tb.navigate(base + "/tasks/" + task.ID)
		if n := eval[int](tb, `document.querySelectorAll("#live section.attempts tbody tr").length`); n != 2 {
			t.Errorf("the task page lists %d attempts' errors, want 2", n)
		}
		checkLayout(tb, "a task's attempts", "#live section.attempts td.msg", "#live section.attempts td.num")
		tb.navigate(base + "/")
		waitFor[bool](tb, "the schedule on the overview", `document.querySelectorAll("#live table.schedules tbody tr").length === 1`,
			`document.getElementById("live").innerText`)
		checkLayout(tb, "the overview's schedules", "#live table.schedules td.id", "#live table.schedules code")
	}
}
