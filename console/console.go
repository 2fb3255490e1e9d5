// Package console is cairnq's web console: an http.Handler an application
// mounts in its own mux to see its queues and tasks, and, when allowed, to
// cancel, retry and resubmit them.
//
//	mux.Handle("/cairnq/", http.StripPrefix("/cairnq", console.Handler(c, nil)))
//
// It renders pages on the server with html/template; its stylesheet and its
// one small script are embedded in the binary, so it works offline, with no
// CDN and no build step. They are served under names carrying a hash of
// their bytes (/static/console.<hash>.js), cached for a year as immutable:
// a new version of the console names new files, so no browser keeps an old
// script past an upgrade. The plain names (/static/console.js) still
// answer, revalidated on each use. Pages update without a reload through server-sent
// events fed by Client.Watch (LISTEN on Postgres, in-process wakeups and
// polling on SQLite); when that stream is lost a banner says so ("Live
// updates lost — retrying…") until it is back. Under 860 CSS pixels (a
// phone) the tables become one card per row, each value labelled, and no
// page is wider than the window. The colours follow the system's light or
// dark mode (prefers-color-scheme). It imports only the standard library and
// this module.
//
// # Pages
//
//   - / (Overview): per queue, the tasks in each status and how long the
//     oldest due queued task has waited; tasks settled per minute over the
//     last hour, succeeded against failed; the running tasks with their lease
//     owner and time left; the workers holding leases; the names with the
//     most tasks failed for good in the last day. The counts, ages, chart
//     and failing names read every task they count (no index of protocol v1
//     holds a count), so they come from a background count, shown with its
//     age ("counted 3s ago") and never waited on beyond Options.CountWait;
//     the running tasks, the workers and the queues paused for every Go
//     worker (Client.PauseQueue: marked in the queue table and listed
//     below it, with who paused each, when and why) are read on each
//     request, as are the periodic schedules (Client.Schedules: each
//     entry's spec, task, next run and last slot, and "no scheduler" when
//     none runs it). With writes allowed each queue has a Pause and each
//     pause a Resume.
//   - /tasks (Tasks): filters by status, queue, name, key, correlation id,
//     parent id, root id, id prefix and text the payload or error holds
//     (search: no index serves it, so it is looked for among ScanLimit
//     tasks as a common value is; with HidePayloads it reads the errors
//     alone); pages newest first by keyset on the
//     task id (a time-ordered ULID) through the primary key index, never by
//     OFFSET, so tasks arriving while one pages neither repeat nor vanish.
//     No index orders a filtered list by id: a filter value its index finds
//     fewer than Options.ScanLimit times is read through it; a commoner one
//     is looked for among ScanLimit tasks from the cursor, and a page that
//     finds too few there says where it stopped and continues from there.
//     The list says how many tasks match ("12 tasks match"), reading at
//     most ScanLimit rows to count them: exactly where an index finds a
//     filter's value fewer times, or a key finds one task; otherwise
//     "At least N", the matches among the rows it read.
//     With writes allowed, the rows checked can be canceled, retried or
//     deleted, and a list filtered by status, queue and name only offers
//     the same for every task matching, on every page.
//   - /tasks/{id} (Task): payload, result and metadata as indented JSON with
//     large values folded, the error envelope, progress, attempts, every
//     timestamp absolute and relative, the lease, the key, the task's children
//     and its correlation group.
//   - /workers: the Go workers running on the database, idle ones too,
//     with their host, queues and last beat (Client.Workers), and the
//     workers holding leases now with how many tasks each runs (one that
//     writes no beat, another SDK's, marked "no beat"). The overview
//     lists the same.
//   - /workflows/{id} (Workflow): each failed step's error, and the
//     workflow's steps as a graph (across a wide window, down a narrow
//     one), each step a box after the steps it waits for, coloured by its state (waiting,
//     queued, running, succeeded, failed, canceled, skipped, lost), live
//     like every page, and as a table; cancel and retry when writes are
//     allowed. A workflow's record task and its steps link to it; the
//     navigation's Workflows is the task list of the records
//     (/tasks?name=cairnq.workflow), each record's name a link here.
//   - /metrics: Prometheus' text format, gauges from the overview's
//     background count: cairnq_tasks{queue,name,status},
//     cairnq_queue_oldest_due_seconds{queue},
//     cairnq_settled_per_second{queue,name,status} (over the last 5
//     minutes), cairnq_queue_paused{queue}, cairnq_workers_leasing,
//     cairnq_go_workers{state},
//     cairnq_count_age_seconds and cairnq_count_duration_seconds.
//     MetricsHandler serves them without the console; docs/operators.md
//     has alert rules and autoscaling on them.
//
// # JSON API
//
// The pages' data is also served as JSON (Content-Type application/json),
// for scripts. Errors are {"error": "..."} with a 4xx or 5xx status.
//
//	GET  /api/overview                  {"now_ms", "counted_at_ms", "count_ms", "counting", "queues": {queue: {"queued", "running", "succeeded", "failed", "canceled", "oldest_due_ms"}}, "settled": [{"minute_ms", "succeeded", "failed"}], "running": [task], "workers": [worker], "failing": [{"name", "failures", "last_ms"}], "paused": [pause], "schedules": [{"id", "spec", "name", "queue", "next_at_ms", "last_slot_ms", "beat_at_ms", "silent"}]}
//	                                    counted_at_ms: when the background count that queues,
//	                                    settled and failing come from began (null: none yet);
//	                                    count_ms: how long it took; counting: one is under way
//	GET  /api/tasks?status=&queue=&name=&key=&correlation_id=&parent_id=&root_id=&id_prefix=&search=&before=&after=&limit=
//	                                    {"tasks": [task], "next": cursor or null, "prev": cursor or null,
//	                                    "scanned_to": id or null, "scanned": n, "matches": n,
//	                                    "matches_exact": bool}; scanned_to: the page stopped at the scan
//	                                    bound after n tasks, at that id (next, or prev for after=,
//	                                    continues from it); matches: the tasks matching the filters,
//	                                    every page together, a lower bound unless matches_exact
//	GET  /api/tasks/{id}[?key=1]        {"task": task, "children": [task], "correlated": [task], "key_skipped", "now_ms"}
//	                                    key_skipped: the key table was too large to scan (key=1 does)
//	GET  /api/workers                   {"workers": [worker], "now_ms"}; a worker: {"id", "running",
//	                                    "lease_until_ms" (null: none), "host", "pid", "queues",
//	                                    "concurrency", "beat_at_ms" (null: no beat), "state":
//	                                    "running"|"silent"|"no beat"}; the overview's "workers" too
//	GET  /api/workflows/{id}            {"id", "status", "continue_on_failure", "steps": [{"step", "task",
//	                                    "after", "state", "task_id", "attempt"}], "record": task}; 400 if
//	                                    the task is not a workflow's record
//	POST /api/tasks/{id}/cancel         {"task": task}; 409 if it is neither queued nor running
//	POST /api/tasks/{id}/retry          {"task": task}; 409 if it is neither failed nor canceled
//	POST /api/tasks/{id}/copy           {"task": the new task}: a copy (name, queue, payload,
//	                                    metadata, priority, attempts, correlation id; no key)
//	POST /api/tasks/{id}/delete         {"task": the task as it was}; 409 if it is running or
//	                                    a workflow that has not ended holds it
//	POST /api/tasks/bulk                body {"action": "cancel"|"retry"|"delete", "ids": [...]}
//	                                    {"changed": [id], "unchanged": [id]}; or body {"action",
//	                                    "filter": {"status", "queue", "name"}}: every task matching
//	                                    (at least one set), through Client.CancelByFilter and its
//	                                    kin, {"changed_count": n}
//	POST /api/queues/pause              body {"queue", "by", "reason"}: {"pause": pause}, the pause in force
//	POST /api/queues/resume             body {"queue"}: {"resumed": pause or null}
//	                                    (a pause: {"queue", "paused_at_ms", "by", "reason"})
//	GET  /favicon.ico                   the console's icon (SVG)
//	GET  /events[?counts=1]             text/event-stream: an event "change" (data {"reason",
//	                                    "queue", "task_id"}) whenever tasks may have changed,
//	                                    and one (reason "connected") as the stream opens; with
//	                                    counts=1 also (reason "counted") when a count found new numbers
//
// A task is the protocol's wire shape (snake_case, epoch milliseconds) plus
// "key" on a single task's read; list rows carry no payload, result or
// metadata. With Options.HidePayloads those three are null and
// "redacted" is true. Cursors are task ids: pass "next" as before= for the
// older page, "prev" as after= for the newer one.
//
// # Security
//
// With Options.Hosts (cairnq ui sets it) the console answers only for the
// host names it lists, refusing others with 421, which DNS rebinding
// cannot get past. The console is read-only unless Options.AllowWrites: every write route
// then answers 403 and the pages show no buttons. Every state change is a
// POST (GET never changes anything) behind http.CrossOriginProtection, so a
// browser on another origin cannot forge one. A POST whose only sign of
// its origin is a Referer meets the same check with the Referer's origin
// (one that is no URL is refused); one with none of Sec-Fetch-Site, Origin
// and Referer (curl, a script) passes. Options.Authorize, when set,
// runs before every request, pages, assets and API alike; mount the console
// behind the application's own authentication either way. HidePayloads keeps
// payloads, results and metadata out of every page and response. Responses
// carry a Content-Security-Policy without 'unsafe-inline' (the script and
// stylesheet are files of the console; no inline script, style or handler
// exists), frame-ancestors 'none' and nosniff; every value from the
// database is escaped by html/template or encoding/json.
package console

import (
	"embed"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/quietlog"
)

// Options configures Handler. The zero value (or nil) is a read-only console
// with payloads shown and no authorization hook.
type Options struct {
	// AllowWrites enables cancel, retry and delete (of a task, of the
	// tasks selected, and of every task a list's status, queue and name
	// match), submitting a copy of a task, and pausing and resuming a
	// queue for every Go worker. Off, every write answers 403.
	AllowWrites bool
	// Authorize, when set, is called before every request; an error answers
	// 403 with no body beyond "forbidden".
	Authorize func(*http.Request) error
	// HidePayloads redacts payloads, results and metadata everywhere.
	HidePayloads bool
	// Title is shown in the header and the page titles. Default "cairnq".
	Title string
	// BasePath is the path the console is mounted at, e.g. "/cairnq", used
	// to build links. Default: derived per request from what
	// http.StripPrefix removed.
	BasePath string
	// PollInterval is how often an open page re-reads when no notification
	// arrives (Client.Watch). Default 2s.
	PollInterval time.Duration
	// CrossOrigin checks state-changing requests, one known only by its
	// Referer as if that were its Origin. Default
	// http.NewCrossOriginProtection(); pass one with trusted origins for a
	// console served behind another origin.
	CrossOrigin *http.CrossOriginProtection
	// Logger receives errors the console answered 500 to. Default: the
	// module's quiet default, WARN and above through slog.Default()'s
	// handler (see "Logging" in package cairnq); pass slog.Default() for
	// everything.
	Logger *slog.Logger
	// ScanLimit bounds the rows a filtered task list reads where no index
	// of protocol v1 serves the filter in id order (status, queue, name,
	// parent, root, correlation id): a value its index finds fewer than
	// ScanLimit times is read through that index, exactly; a commoner one
	// is looked for among ScanLimit tasks in id order from the cursor, and
	// a page that finds too few there says so and continues from where it
	// stopped. It also bounds the key lookup of the task page. Default
	// 5000; negative: no bound (every match is read and sorted).
	ScanLimit int
	// Hosts, when set, are the host names and addresses (no port) the
	// console answers for; a request whose Host header names another gets
	// 421 Misdirected Request and nothing else. A page that reached the
	// console's address through DNS rebinding (an attacker's name pointed
	// at it) names the attacker's host, so it can neither read the
	// console nor pass the cross-origin check with an Origin of that same
	// host. Default nil: any host, for a console mounted behind the
	// application's own routing; cairnq ui sets its loopback names and
	// listening address.
	Hosts []string
	// CountWait is how long an overview request waits for a fresh count
	// of tasks per queue and status: a count that reads every row runs in
	// the background and the page shows the last one with its age. A
	// request waits only for the first count, or when counts are quick
	// (five of the last one fit in CountWait); otherwise it shows the last
	// count at once, or "counting" before the first. Default 100ms;
	// negative: never wait.
	CountWait time.Duration
}

//go:embed assets
var assets embed.FS

// mustStatic is the embedded static files, under hashed names.
func mustStatic() *staticFiles {
	dir, err := fs.Sub(assets, "assets/static")
	if err == nil {
		var s *staticFiles
		if s, err = newStatic(dir); err == nil {
			return s
		}
	}
	panic("console: the embedded static files: " + err.Error()) // a constant of the binary
}

// contentSecurityPolicy allows only the console's own files: no inline
// script or style, no other origin, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

type console struct {
	c       *cairnq.Client
	st      *engine.Store // the console's own reads, beside the Client's
	opts    Options
	pages   *pages
	counter *counter
}

// Handler returns the console over c. Mount it under a prefix with
// http.StripPrefix; see the package documentation for its routes and
// security model. It panics if c is nil.
//
// The overview's counts come from a goroutine of the handler (see
// Options.CountWait): it starts with the first overview request and stops a
// minute after the last one, when c is closed, or when the handler's Close
// is called: the handler returned is also an io.Closer.
func Handler(c *cairnq.Client, opts *Options) http.Handler {
	k, static := newConsole(c, opts)
	o := k.opts

	mux := http.NewServeMux()
	mux.Handle("GET /static/{name}", static)
	mux.Handle("GET /favicon.ico", cacheFor(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/favicon.svg"
		w.Header().Set("Content-Type", "image/svg+xml")
		static.files.ServeHTTP(w, r2)
	}), 24*time.Hour))
	mux.HandleFunc("GET /{$}", k.overviewPage)
	mux.HandleFunc("GET /tasks", k.tasksPage)
	mux.HandleFunc("GET /tasks/{id}", k.taskPage)
	mux.HandleFunc("GET /workers", k.workersPage)
	mux.HandleFunc("GET /workflows/{id}", k.workflowPage)
	mux.HandleFunc("POST /workflows/{id}/{action}", k.writes(k.workflowActionForm))
	mux.HandleFunc("POST /tasks/{id}/{action}", k.writes(k.taskActionForm))
	mux.HandleFunc("POST /tasks/bulk", k.writes(k.bulkForm))
	mux.HandleFunc("POST /queues/{action}", k.writes(k.queueActionForm))
	mux.HandleFunc("GET /events", k.events)
	mux.HandleFunc("GET /metrics", k.metrics)

	mux.HandleFunc("GET /api/overview", k.apiOverview)
	mux.HandleFunc("GET /api/tasks", k.apiTasks)
	mux.HandleFunc("GET /api/tasks/{id}", k.apiTask)
	mux.HandleFunc("GET /api/workers", k.apiWorkers)
	mux.HandleFunc("GET /api/workflows/{id}", k.apiWorkflow)
	mux.HandleFunc("POST /api/tasks/{id}/{action}", k.writes(k.apiTaskAction))
	mux.HandleFunc("POST /api/tasks/bulk", k.writes(k.apiBulk))
	mux.HandleFunc("POST /api/queues/{action}", k.writes(k.apiQueueAction))
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeJSONError(w, http.StatusNotFound, "no such endpoint")
	})

	o.CrossOrigin.SetDenyHandler(refuseCrossOrigin)
	return &handler{Handler: k.secure(checkReferer(o.CrossOrigin, o.CrossOrigin.Handler(mux))), k: k}
}

// newConsole is the console over c with opts' defaults filled in, and
// its static files. It panics if c is nil.
func newConsole(c *cairnq.Client, opts *Options) (*console, *staticFiles) {
	if c == nil {
		panic("console: nil *cairnq.Client")
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Title == "" {
		o.Title = "cairnq"
	}
	if o.PollInterval <= 0 {
		o.PollInterval = cairnq.DefaultWatchPoll
	}
	if o.CrossOrigin == nil {
		o.CrossOrigin = http.NewCrossOriginProtection()
	}
	o.Logger = quietlog.Or(o.Logger)
	switch {
	case o.ScanLimit == 0:
		o.ScanLimit = defaultScanLimit
	case o.ScanLimit < 0:
		o.ScanLimit = 0
	}
	if o.CountWait == 0 {
		o.CountWait = defaultCountWait
	}
	o.BasePath = strings.TrimSuffix(o.BasePath, "/")
	static := mustStatic()
	k := &console{c: c, st: engine.Of(c.Store()), opts: o, pages: newPages(static)}
	k.counter = newCounter(k)
	return k, static
}

// Defaults of Options.
const (
	defaultScanLimit = 5000
	defaultCountWait = 100 * time.Millisecond
)

// handler is what Handler returns: the console, and Close.
type handler struct {
	http.Handler
	k *console
}

// Close stops the goroutine counting tasks for the overview and waits for
// it; requests served after Close still work and count nothing new. The
// goroutine also stops a minute after the last overview request and when
// the Client is closed, so Close is only needed to stop it at once (in
// tests, or when unmounting the console).
func (h *handler) Close() error {
	h.k.counter.close()
	return nil
}

// secure refuses a host it does not serve, sets the security headers and
// runs Authorize.
func (k *console) secure(next http.Handler) http.Handler {
	hosts := map[string]bool{}
	for _, h := range k.opts.Hosts {
		hosts[normalHost(h)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(hosts) > 0 && !hosts[requestHost(r)] {
			http.Error(w, "misdirected request: this console does not serve the host "+strconv.Quote(r.Host), http.StatusMisdirectedRequest)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		if k.opts.Authorize != nil {
			if err := k.opts.Authorize(r); err != nil {
				http.Error(w, "forbidden", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// writes refuses every request unless writes are allowed.
func (k *console) writes(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !k.opts.AllowWrites {
			if isAPI(r) {
				writeJSONError(w, http.StatusForbidden, "writes are disabled")
				return
			}
			http.Error(w, "writes are disabled", http.StatusForbidden)
			return
		}
		h(w, r)
	}
}

// requestHost is the host r names, without its port, in normalHost's form.
func requestHost(r *http.Request) string {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return normalHost(host)
}

// normalHost is a host name or address in one form: lower case, without
// the brackets of an IPv6 literal or a trailing dot.
func normalHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}

func cacheFor(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age="+strconv.Itoa(int(d.Seconds())))
		h.ServeHTTP(w, r)
	})
}

func isAPI(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/api/") }

// base returns the path the console is mounted at: Options.BasePath, or
// what http.StripPrefix removed from the path the client asked for.
func (k *console) base(r *http.Request) string {
	if k.opts.BasePath != "" {
		return k.opts.BasePath
	}
	u, err := url.ParseRequestURI(r.RequestURI)
	if err != nil {
		return ""
	}
	if b, ok := strings.CutSuffix(u.Path, r.URL.Path); ok && (b == "" || b[0] == '/') && !strings.HasPrefix(b, "//") {
		return b
	}
	return ""
}
