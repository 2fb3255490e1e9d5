package browsertest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/conformance/pgserver"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/console"
	"github.com/cairnq/cairnq-go/internal/testkit/syncbuf"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestMain stops the throwaway PostgreSQL server pgserver.DSN
// may have started.
func TestMain(m *testing.M) { pgserver.Main(m) }

const (
	// liveDeadline bounds every wait for the page to change by itself: a
	// poll of the console's watch (PollInterval), the script's one-second
	// throttle, a fragment fetch, with room for -race on a shared machine.
	liveDeadline = 25 * time.Second
	// actionTimeout bounds one browser action (a navigation, a click).
	actionTimeout = 30 * time.Second
)

// db is a new, empty database for one test: open returns a new Client on
// it, closed when the test ends.
type db struct {
	backend    string // "sqlite" or "postgres"
	open       func(t *testing.T) *cairnq.Client
	sqlitePath string // the file, on SQLite
}

// newDB makes a database on backend: a SQLite file in a temporary
// directory, or a database of its own on the real Postgres server.
func newDB(t *testing.T, backend string) db {
	t.Helper()
	if backend == "sqlite" {
		path := filepath.Join(t.TempDir(), "console.db")
		return db{backend: backend, sqlitePath: path, open: func(t *testing.T) *cairnq.Client {
			t.Helper()
			c, err := cairnq.Open(context.Background(), path, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}}
	}
	dsn := pgserver.DSN(t)
	return db{backend: backend, open: func(t *testing.T) *cairnq.Client {
		t.Helper()
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close) // after the client's Close, registered below
		c, err := cairnq.OpenPostgres(context.Background(), cairnqpgx.New(pool, nil), &cairnq.PostgresOptions{CloseExecutor: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}}
}

// pollInterval is the console's PollInterval for a test on d. The console
// hears of a change made by another Client through Client.Watch: on
// Postgres by LISTEN (the poll is only the safety net, left at its
// default), on SQLite by polling alone, across clients as across
// processes, so the test polls faster than the 2s default there.
func (d db) pollInterval() time.Duration {
	if d.backend == "sqlite" {
		return 250 * time.Millisecond
	}
	return 0
}

// serve mounts the console over c under /cairnq/, as an application does,
// on a real HTTP server closed when the test ends, and returns the
// console's URL (ending in /cairnq).
func serve(t *testing.T, c *cairnq.Client, o *console.Options) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/cairnq/", http.StripPrefix("/cairnq", console.Handler(c, o)))
	srv := httptest.NewServer(mux)
	// Closed after the browser (a tab's cleanup is registered later, so it
	// runs first): Close waits for the open event streams to end.
	t.Cleanup(srv.Close)
	return srv.URL + "/cairnq"
}

func tctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func submit(t *testing.T, c *cairnq.Client, name string, payload any, o *cairnq.SubmitOptions) *cairnq.Task {
	t.Helper()
	task, err := c.Submit(tctx(t), name, payload, o)
	if err != nil {
		t.Fatalf("submit %s: %v", name, err)
	}
	return task
}

// status reads a task's status from the database, through c.Get.
func status(t *testing.T, c *cairnq.Client, id string) cairnq.Status {
	t.Helper()
	task, err := c.Get(tctx(t), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return task.Status
}

// runWorker runs a worker on c until the test ends; its Run has returned
// when the test's cleanups are done.
func runWorker(t *testing.T, c *cairnq.Client, o cairnq.WorkerOptions, handlers map[string]cairnq.Handler) {
	t.Helper()
	if o.PollInterval == 0 {
		o.PollInterval = 20 * time.Millisecond
	}
	if o.ShutdownTimeout == 0 {
		// A handler the test left blocked is canceled at once.
		o.ShutdownTimeout = 100 * time.Millisecond
	}
	if o.RetryBackoff == 0 {
		o.RetryBackoff = cairnq.NoRetryBackoff
	}
	w, err := cairnq.NewWorker(c, &o)
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range handlers {
		if err := w.Handle(name, h, nil); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// The browser.

var (
	browserOnce sync.Once
	browserPath string
	browserWhy  string
)

// chromium returns the path of a Chromium binary, or skips the test (fails
// it under CAIRNQ_REQUIRE_BROWSER=1) when there is none.
func chromium(t *testing.T) string {
	t.Helper()
	browserOnce.Do(func() {
		if p := os.Getenv("CAIRNQ_BROWSER"); p != "" {
			if _, err := exec.LookPath(p); err != nil {
				browserWhy = fmt.Sprintf("CAIRNQ_BROWSER=%s: %v", p, err)
				return
			}
			browserPath = p
			return
		}
		names := []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless_shell", "headless-shell", "chrome"}
		for _, n := range names {
			if p, err := exec.LookPath(n); err == nil {
				browserPath = p
				return
			}
		}
		browserWhy = "no Chromium binary found (looked for " + strings.Join(names, ", ") + " on PATH, or CAIRNQ_BROWSER)"
	})
	if browserPath == "" {
		if os.Getenv("CAIRNQ_REQUIRE_BROWSER") == "1" {
			t.Fatalf("%s, and CAIRNQ_REQUIRE_BROWSER=1", browserWhy)
		}
		t.Skipf("%s; install chromium (apt-get install chromium) to run the browser tests, CAIRNQ_REQUIRE_BROWSER=1 makes this a failure", browserWhy)
	}
	return browserPath
}

// browser is one headless Chromium, shared by the tests of a backend,
// each in a tab of its own.
type browser struct {
	ctx context.Context // the first tab's chromedp context, which owns the browser
}

// newBrowser starts Chromium (or skips t when there is none); t's cleanup
// closes it.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.WindowSize(1280, 900),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root in its sandbox
	}
	var output syncbuf.Buffer
	opts = append(opts, chromedp.CombinedOutput(&output))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	// The first Run starts the browser and binds it to ctx: no deadline here.
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		acancel()
		t.Fatalf("starting %s: %v\n%s", path, err, output.String())
	}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		if err := chromedp.Cancel(cctx); err != nil { // closes the browser gracefully
			t.Logf("closing the browser: %v", err)
		}
		cancel()
		acancel() // waits for the browser process to end
	})
	return &browser{ctx: ctx}
}

// tab is one tab, in a browser context of its own (no cookie or cache
// shared with another test), for one test. It records what the page writes
// to its console and answers its dialogs.
type tab struct {
	t   *testing.T
	ctx context.Context // the tab's chromedp context; no deadline

	mu       sync.Mutex
	messages []chromedp.ConsoleMessage
	more     chan struct{} // closed, and made anew, when a message arrives
	allowed  []string      // substrings of console errors the test provokes
	dialogs  []string      // what each dialog said; every one is accepted
}

// newTab opens a tab for t. Its cleanup closes the tab, waits for the
// goroutines reading its console and dialogs, and fails t for any
// exception, error or Content-Security-Policy report on the page's console
// that the test did not provoke on purpose (allow).
func (br *browser) newTab(t *testing.T) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(br.ctx, chromedp.WithNewBrowserContext())
	if err := chromedp.Do(ctx); err != nil { // opens the tab
		cancel()
		t.Fatalf("opening a tab: %v", err)
	}
	// The browser asks every origin for /favicon.ico, which is outside
	// the console's mount point (and the console names no icon).
	tb := &tab{t: t, ctx: ctx, allowed: []string{"/favicon.ico"}, more: make(chan struct{})}

	// Subscribed before anything loads, so no message or dialog is missed.
	messages := chromedp.Console(ctx)
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	var wg sync.WaitGroup
	wg.Go(func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.messages = append(tb.messages, m)
			close(tb.more)
			tb.more = make(chan struct{})
			tb.mu.Unlock()
		}
	})
	wg.Go(func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.dialogs = append(tb.dialogs, string(ev.Type)+": "+ev.Message)
			tb.mu.Unlock()
			// The page, and the click that opened the dialog, wait for this.
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	})
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		if err := chromedp.Cancel(cctx); err != nil { // closes the tab and its browser context
			t.Logf("closing the tab: %v", err)
		}
		cancel()
		wg.Wait()
		tb.checkConsole()
	})
	return tb
}

// allow marks console errors containing s as provoked by the test.
func (tb *tab) allow(s string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.allowed = append(tb.allowed, s)
}

// waitConsole waits for a message on the page's console that match
// accepts, from the start, and fails the test past liveDeadline.
func (tb *tab) waitConsole(what string, match func(chromedp.ConsoleMessage) bool) {
	tb.t.Helper()
	deadline := time.NewTimer(liveDeadline)
	defer deadline.Stop()
	for {
		tb.mu.Lock()
		for _, m := range tb.messages {
			if match(m) {
				tb.mu.Unlock()
				return
			}
		}
		more := tb.more
		tb.mu.Unlock()
		select {
		case <-more:
		case <-deadline.C:
			tb.t.Fatalf("waited %v for %s on the browser's console%s", liveDeadline, what, tb.consoleDump())
		}
	}
}

func (tb *tab) dialogsSeen() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]string(nil), tb.dialogs...)
}

// unexpected returns the console messages that are a problem: an exception,
// an error, or any report of the Content-Security-Policy, unless allowed.
func (tb *tab) unexpected() []chromedp.ConsoleMessage {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var out []chromedp.ConsoleMessage
next:
	for _, m := range tb.messages {
		csp := strings.Contains(m.Text, "Content Security Policy")
		if !csp && m.Type != chromedp.ConsoleError && m.Type != chromedp.ConsoleException {
			continue
		}
		for _, a := range tb.allowed {
			if strings.Contains(m.Text, a) || strings.Contains(m.URL, a) {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

func (tb *tab) checkConsole() {
	for _, m := range tb.unexpected() {
		tb.t.Errorf("browser console: %s (%s:%d)", m, m.URL, m.Line+1)
	}
}

// consoleDump is every console message so far, for a failure's report.
func (tb *tab) consoleDump() string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(tb.messages) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nbrowser console:")
	for _, m := range tb.messages {
		fmt.Fprintf(&b, "\n  %s (%s:%d)", m, m.URL, m.Line+1)
	}
	return b.String()
}

// do runs browser actions, failing the test on an error.
func (tb *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, actionTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.t.Fatalf("%s: %v%s", what, err, tb.consoleDump())
	}
}

// navigate loads url and marks the document, so that marked can tell later
// whether the page is still the same document (updated in place) or was
// loaded again.
// It waits until the page is live (its event stream open and the re-read
// that opens it applied), so that a test never acts on markup that re-read
// is about to replace.
func (tb *tab) navigate(url string) {
	tb.t.Helper()
	tb.navigateEarly(url)
	waitLive(tb)
}

// navigateEarly is navigate without waiting for the page to be live.
func (tb *tab) navigateEarly(url string) {
	tb.t.Helper()
	tb.do("navigate to "+url, chromedp.Navigate(url),
		chromedp.Evaluate[chromedp.Void](`window.__cairnqTestMark = "same document"`))
}

// clickAndLoad clicks the element sel selects and waits for the page the
// click leads to to load.
func (tb *tab) clickAndLoad(what, sel string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, actionTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS(sel)))); err != nil {
		tb.t.Fatalf("%s (%s): %v%s", what, sel, err, tb.consoleDump())
	}
	waitLive(tb)
}

// marked reports whether the document navigate loaded is still there.
func (tb *tab) marked() bool {
	tb.t.Helper()
	return eval[string](tb, `String(window.__cairnqTestMark)`) == "same document"
}

// eval evaluates a JavaScript expression in the page and decodes its value.
func eval[T any](tb *tab, expr string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, actionTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.t.Fatalf("evaluating %s: %v%s", expr, err, tb.consoleDump())
	}
	return v
}

// waitFor polls the page (every 50ms, in the page) until the expression's
// value is truthy, and returns it; past liveDeadline it fails the test,
// reporting what the expression state shows then.
func waitFor[T any](tb *tab, what, expr, state string) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, liveDeadline+5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Poll[T](expr,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(liveDeadline)))
	if err != nil {
		now := "?"
		if state != "" {
			sctx, scancel := context.WithTimeout(tb.ctx, 5*time.Second)
			defer scancel()
			if s, serr := chromedp.Run(sctx, chromedp.Evaluate[string](state)); serr == nil {
				now = s
			} else {
				now = serr.Error()
			}
		}
		if errors.Is(err, chromedp.ErrPollingTimeout) {
			tb.t.Fatalf("waited %v for %s; the page shows %s%s", liveDeadline, what, now, tb.consoleDump())
		}
		tb.t.Fatalf("waiting for %s: %v; the page shows %s%s", what, err, now, tb.consoleDump())
	}
	return v
}

// colorScheme makes the page see the system ask for scheme ("dark",
// "light"), or stops pretending ("").
func (tb *tab) colorScheme(scheme string) {
	tb.t.Helper()
	var features []*emulation.MediaFeature
	if scheme != "" {
		features = []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}
	}
	if _, err := chromedp.Call(tb.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: features}); err != nil {
		tb.t.Fatalf("emulate prefers-color-scheme %q: %v", scheme, err)
	}
}

// screenshot writes the whole page as name.png to CAIRNQ_SCREENSHOTS_DIR,
// when it is set.
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	dir := os.Getenv("CAIRNQ_SCREENSHOTS_DIR")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(tb.ctx, actionTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.t.Fatal(err)
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Logf("wrote %s (%d bytes)", p, len(png))
}
