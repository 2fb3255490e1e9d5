package browsertest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/console"
	"github.com/chromedp/chromedp"
)

// liveLostJS is whether the banner saying live updates are lost shows.
const liveLostJS = `(() => {
  const b = document.getElementById("live-lost");
  return !!b && !b.hidden && getComputedStyle(b).display !== "none" && b.getBoundingClientRect().height > 0;
})()`

// liveLostStateJS is what a failure reports: the banner and the dot.
const liveLostStateJS = `(() => {
  const b = document.getElementById("live-lost"), s = document.getElementById("live-state");
  return "banner " + (b ? (b.hidden ? "hidden" : "shown: " + b.textContent) : "missing") + ", dot " + (s ? s.className : "missing");
})()`

// breaker stands before a console as a proxy would: broken, it ends the
// open event streams and answers new ones 503 (the browser's EventSource
// gives up on such an answer: the page must open a new one itself).
type breaker struct {
	h http.Handler

	mu      sync.Mutex
	down    bool
	streams map[*http.Request]context.CancelFunc
	refused chan struct{} // gets a value when a stream is refused
}

func (b *breaker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/events") {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		b.mu.Lock()
		if b.down {
			b.mu.Unlock()
			http.Error(w, "the console is unreachable", http.StatusServiceUnavailable)
			select {
			case b.refused <- struct{}{}:
			default:
			}
			return
		}
		b.streams[r] = cancel
		b.mu.Unlock()
		defer func() {
			b.mu.Lock()
			delete(b.streams, r)
			b.mu.Unlock()
		}()
		r = r.WithContext(ctx)
	}
	b.h.ServeHTTP(w, r)
}

// set breaks the event streams, or mends them.
func (b *breaker) set(down bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.down = down
	if down {
		for _, cancel := range b.streams {
			cancel() // the console's stream ends with its request
		}
	}
}

// testLiveLost: when the page's live connection is lost, a banner says so,
// and it goes when the connection is back, the page live again: once
// through a proxy that ends the stream and refuses new ones (503), once by
// the server going away and coming back on the same port.
func testLiveLost(t *testing.T, d db, br *browser) {
	c, other := d.open(t), d.open(t)
	submit(t, c, "send-email", nil, &cairnq.SubmitOptions{Queue: "emails"})
	b := &breaker{h: http.StripPrefix("/cairnq", console.Handler(c, &console.Options{PollInterval: d.pollInterval()})),
		streams: map[*http.Request]context.CancelFunc{}, refused: make(chan struct{}, 1)}
	mux := http.NewServeMux()
	mux.Handle("/cairnq/", b)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(func() { srv.Close() }) // srv as it is then: the second server
	base := srv.URL + "/cairnq"

	tb := br.newTab(t)
	// The reconnections refused, and the page's re-reads while the server
	// is gone.
	tb.allow("/cairnq/events")
	tb.allow("status of 503")
	tb.allow("EventSource")
	tb.allow("ERR_CONNECTION_REFUSED")
	tb.navigate(base + "/")
	if eval[bool](tb, liveLostJS) {
		t.Fatal("the banner shows on a live page")
	}

	// A proxy ends the stream and refuses the next ones.
	b.set(true)
	waitFor[bool](tb, "the banner saying live updates are lost", liveLostJS, liveLostStateJS)
	if got := eval[string](tb, `document.getElementById("live-lost").textContent`); got != "Live updates lost — retrying…" {
		t.Errorf("banner says %q", got)
	}
	if eval[bool](tb, `document.getElementById("live-state").classList.contains("on")`) {
		t.Error("the live dot is still on while the banner shows")
	}
	// Once a reconnection was refused the browser has given up on that
	// stream: only the page's own retry brings it back.
	select {
	case <-b.refused:
	case <-time.After(liveDeadline):
		t.Fatal("the page did not try to reconnect")
	}
	b.set(false)
	waitFor[bool](tb, "the banner gone, the page live again", `!`+liveLostJS+` && document.getElementById("live-state").classList.contains("on")`, liveLostStateJS)
	submit(t, other, "send-email", nil, &cairnq.SubmitOptions{Queue: "emails"})
	waitFor[bool](tb, "emails: 2 queued, heard over the new stream",
		`(() => { const q = `+queueCountsJS+`; return q.emails && q.emails.queued === 2; })()`, `JSON.stringify(`+queueCountsJS+`)`)

	// The server goes away, its connections with it; the browser's
	// reconnections are refused until it listens again on the same port.
	srv.CloseClientConnections()
	srv.Close()
	waitFor[bool](tb, "the banner, the server gone", liveLostJS, liveLostStateJS)
	tb.waitConsole("the event stream's reconnection refused", func(m chromedp.ConsoleMessage) bool {
		return strings.Contains(m.Text, "ERR_CONNECTION_REFUSED") && strings.Contains(m.URL, "/cairnq/events")
	})
	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", addr, err)
	}
	srv = httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	waitFor[bool](tb, "the banner gone, the server back", `!`+liveLostJS+` && document.getElementById("live-state").classList.contains("on")`, liveLostStateJS)
	submit(t, other, "send-email", nil, &cairnq.SubmitOptions{Queue: "emails"})
	waitFor[bool](tb, "emails: 3 queued, heard over the new server's stream",
		`(() => { const q = `+queueCountsJS+`; return q.emails && q.emails.queued === 3; })()`, `JSON.stringify(`+queueCountsJS+`)`)
	if !tb.marked() {
		t.Fatal("the overview was loaded again; it should have reconnected in place")
	}
}
