package browsertest

import (
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/console"
	"github.com/chromedp/chromedp"
)

// matchesJS is what the list says of how many tasks match.
const matchesJS = `(document.getElementById("matches") || {innerText: "(no count)"}).innerText`

// testListMatchCount: a filtered list says how many tasks match, every
// page together, follows tasks arriving, and says "at least" where the
// count stopped at the scan bound.
func testListMatchCount(t *testing.T, d db, br *browser) {
	c, other := d.open(t), d.open(t)
	for range 3 {
		submit(t, c, "charge-invoice", nil, &cairnq.SubmitOptions{Queue: "billing"})
	}
	for range 2 {
		submit(t, c, "refund-invoice", nil, &cairnq.SubmitOptions{Queue: "billing"})
	}
	for range 12 {
		submit(t, c, "send-email", nil, &cairnq.SubmitOptions{Queue: "emails"})
	}
	base := serve(t, c, &console.Options{ScanLimit: 10, PollInterval: d.pollInterval()})
	tb := br.newTab(t)

	tb.navigate(base + "/tasks?name=charge-invoice&limit=2")
	if got := eval[string](tb, matchesJS); got != "3 tasks match" {
		t.Errorf("name=charge-invoice says %q, want 3 tasks match", got)
	}
	if n := eval[int](tb, `document.querySelectorAll("#live table.tasks tbody tr").length`); n != 2 {
		t.Errorf("the page shows %d tasks, want 2 (of 3)", n)
	}
	submit(t, other, "charge-invoice", nil, &cairnq.SubmitOptions{Queue: "billing"})
	waitFor[bool](tb, "4 tasks match, one more submitted", matchesJS+` === "4 tasks match"`, matchesJS)

	// Through the filter form.
	tb.do("fill the name filter", chromedp.SetValue(chromedp.CSS(`form.filters input[name=name]`), "refund-invoice"))
	tb.clickAndLoad("filter", `form.filters button[type=submit]`)
	if got := eval[string](tb, matchesJS); got != "2 tasks match" {
		t.Errorf("name=refund-invoice says %q, want 2 tasks match", got)
	}

	// A common value: the count stops at the bound, and says so.
	tb.navigate(base + "/tasks?queue=emails&limit=5")
	if got := eval[string](tb, matchesJS); got != "At least 10 tasks match (counting stops at 10 tasks read)" {
		t.Errorf("queue=emails with a bound of 10 says %q", got)
	}
}
