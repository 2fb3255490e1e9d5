package browsertest

import (
	"slices"
	"strings"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/console"
)

// testFleetPauseFromOverview: with writes allowed, a queue's Pause on the
// overview (after its confirmation) pauses it for the fleet in the
// database; the overview marks it and lists the pause, laid out within
// the window at a desktop's width and a phone's, and its Resume lifts it.
// Read-only, the overview shows the pause and offers neither.
func testFleetPauseFromOverview(t *testing.T, d db, br *browser) {
	c, other := d.open(t), d.open(t)
	submit(t, other, "send-email", map[string]string{"to": "ada@example.com"}, &cairnq.SubmitOptions{Queue: "emails"})
	base := serve(t, c, &console.Options{AllowWrites: true})
	ro := serve(t, c, nil) // before the tab, so that the tab closes first
	tb := br.newTab(t)
	tb.viewport(desktopWidth, 900)

	tb.navigate(base + "/")
	tb.clickAndLoad("click the emails queue's Pause", `#live table.queues form[action$="/queues/pause"] button`)
	if got := tb.dialogsSeen(); !slices.Equal(got, []string{"confirm: Pause this queue for every Go worker?"}) {
		t.Errorf("dialogs %q, want the confirmation", got)
	}
	if f := eval[string](tb, `(document.querySelector("#live .flash") || {}).textContent || ""`); f != "Queue emails paused for every Go worker." {
		t.Errorf("flash %q", f)
	}
	paused, err := other.PausedQueues(tctx(t))
	if err != nil || len(paused) != 1 || paused[0].Queue != "emails" {
		t.Fatalf("PausedQueues after the click = %+v, %v; want emails", paused, err)
	}
	if n := eval[int](tb, `document.querySelectorAll("#live table.queues .s-paused").length`); n != 1 {
		t.Errorf("%d paused marks in the queue table, want 1", n)
	}
	if n := eval[int](tb, `document.querySelectorAll("#live table.queues form").length`); n != 0 {
		t.Errorf("a paused queue's row still offers %d forms", n)
	}
	checkLayout(tb, "overview with a paused queue", "#live table.queues .s-paused", "#live ul.pauses li", "#live ul.pauses button")
	tb.viewport(phoneWidth, 800)
	checkLayout(tb, "overview with a paused queue", "#live table.queues .s-paused", "#live ul.pauses li", "#live ul.pauses button")
	tb.screenshot("console-overview-paused-390")

	tb.clickAndLoad("click Resume", `#live ul.pauses form[action$="/queues/resume"] button`)
	if f := eval[string](tb, `(document.querySelector("#live .flash") || {}).textContent || ""`); f != "Queue emails resumed." {
		t.Errorf("flash %q", f)
	}
	if paused, err := other.PausedQueues(tctx(t)); err != nil || len(paused) != 0 {
		t.Fatalf("PausedQueues after Resume = %+v, %v; want none", paused, err)
	}
	if n := eval[int](tb, `document.querySelectorAll("#live .s-paused, #live ul.pauses").length`); n != 0 {
		t.Errorf("the overview still shows %d pause marks after the resume", n)
	}

	// Read-only: the pause shows, with nothing to click.
	if _, _, err := other.PauseQueue(tctx(t), "emails", &cairnq.PauseOptions{By: "ops", Reason: "provider down"}); err != nil {
		t.Fatal(err)
	}
	tb.navigate(ro + "/")
	if got := eval[string](tb, `document.querySelector("#live ul.pauses li").textContent`); !containsAll(got, "emails", "by ops", "provider down") {
		t.Errorf("read-only pause line %q", got)
	}
	if n := eval[int](tb, `document.querySelectorAll("#live button, #live form[method=post]").length`); n != 0 {
		t.Errorf("a read-only overview has %d buttons or post forms", n)
	}
}

// containsAll reports whether s contains every one of parts.
func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
