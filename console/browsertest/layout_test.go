package browsertest

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/chromedp/chromedp"
)

// Window widths the layout is checked at: a phone's (390 CSS pixels, an
// iPhone 12 to 15) and a desktop's.
const (
	phoneWidth   = 390
	desktopWidth = 1400
)

// cardsBelow is the width under which the console's tables turn into
// cards (its stylesheet's media query).
const cardsBelow = 860

// viewport resizes the tab's window to width by height CSS pixels, as a
// desktop window (no mobile zoom: a page wider than the window scrolls
// sideways, which is what the layout checks look for).
func (tb *tab) viewport(width, height int64) {
	tb.t.Helper()
	tb.do(fmt.Sprintf("resize the window to %dx%d", width, height), chromedp.EmulateViewport(width, height))
}

// layoutJS lists what is wrong with the page's layout: the document wider
// than the window (it scrolls sideways), and each element of the
// selectors given (%s, a JSON array) that is missing, not shown, outside
// the window, cut short (its content wider than its box) or clipped by an
// ancestor that hides its overflow.
const layoutJS = `((sels) => {
  const W = window.innerWidth, out = [];
  const sw = document.documentElement.scrollWidth;
  if (sw > W) out.push("the document is " + sw + "px wide in a window of " + W + "px: it scrolls sideways");
  for (const sel of sels) {
    const els = document.querySelectorAll(sel);
    if (els.length === 0) { out.push(sel + ": none on the page"); continue; }
    els.forEach((el, i) => {
      const what = sel + " #" + i + " " + JSON.stringify(el.textContent.trim().slice(0, 40));
      const st = getComputedStyle(el);
      const r = el.getBoundingClientRect();
      if (st.visibility !== "visible" || r.width === 0 || r.height === 0) { out.push(what + ": not shown"); return; }
      if (r.left < -0.5 || r.right > W + 0.5) out.push(what + ": spans " + Math.round(r.left) + " to " + Math.round(r.right) + "px, the window " + W);
      if (st.display !== "inline" && el.scrollWidth > el.clientWidth + 1) out.push(what + ": cut, its content " + el.scrollWidth + "px wide in " + el.clientWidth);
      for (let a = el.parentElement; a && a !== document.documentElement; a = a.parentElement) {
        const as = getComputedStyle(a);
        if (as.overflowX === "visible" && as.overflowY === "visible") continue;
        const ar = a.getBoundingClientRect();
        if (r.left < ar.left - 0.5 || r.right > ar.right + 0.5) out.push(what + ": clipped by " + a.tagName.toLowerCase() + "." + a.className);
      }
    });
  }
  return out;
})(%s)`

// checkLayout fails the test for each problem layoutJS finds with the
// elements sel selects on the page shown, named page.
func checkLayout(tb *tab, page string, sel ...string) {
	tb.t.Helper()
	b, _ := json.Marshal(sel)
	w := eval[int](tb, `window.innerWidth`)
	if problems := eval[[]string](tb, fmt.Sprintf(layoutJS, b)); len(problems) > 0 {
		tb.t.Errorf("%s at %dpx:\n  %s", page, w, strings.Join(problems, "\n  "))
	}
}

// rowDisplayJS is how the browser lays out the rows of the page's tables
// (table-row, or block as cards), each way once.
const rowDisplayJS = `[...new Set([...document.querySelectorAll("#live table.cards tbody tr")].map(tr => getComputedStyle(tr).display))].join(",")`
