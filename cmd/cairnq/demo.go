package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

const demoHelp = `Submits --n sample tasks across two names and two queues to a fresh
SQLite file (some fail and retry, one always fails, one is canceled, one
name is delivered in batches), runs a worker on them in this process with
a progress line (redrawn in place on a terminal, a line a second
otherwise), and prints the stats table, the throughput and the commands
that open what it made. The throughput is the tasks the worker settled
over the time from its start to the last of them finishing, as the
tasks' completion times record it. The worker's warnings (the sample
failures) go to stderr, clearing the progress line first on a terminal.
The file is replaced if it exists; the demo runs on SQLite only and
ignores $CAIRNQ_DB and $DATABASE_URL.`

// cmdDemo is the main job on the embedded default: it submits sample tasks
// to a fresh SQLite file, runs a worker on them in this process with a live
// progress line, and prints the stats table, the throughput and what to
// run next.
func cmdDemo(ctx context.Context, e *env, args []string) error {
	out := e.out
	fs := e.flags()
	db := fs.String("db", "cairnq-demo.db", "SQLite `file` to create (replaced if it exists)")
	n := fs.Int("n", 300, "tasks to submit (at least 2)")
	conc := fs.Int("concurrency", 8, "handler calls run at once (at least 1)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if *n < 2 || *conc < 1 {
		return e.usageError("--n must be >= 2 and --concurrency >= 1")
	}
	if isPostgres(*db) {
		return e.usageError("the demo runs on a SQLite file only")
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(*db + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	live := &liveLine{out: out, logOut: e.errOut, tty: e.terminal(out)}
	onPurpose := &purposeful{}
	c, err := cairnq.Open(ctx, *db, &cairnq.SQLiteOptions{Options: cairnq.Options{Logger: live.logger(onPurpose)}})
	if err != nil {
		return err
	}
	defer c.Close()
	abs, _ := filepath.Abs(*db)
	fmt.Fprintf(out, "cairnq demo: %d tasks on %s, concurrency %d\n", *n, printable(abs), *conc)

	w, err := demoWorker(c, *conc)
	if err != nil {
		return err
	}
	ran, err := demoSubmit(ctx, c, *n)
	if err != nil {
		return err
	}

	start := time.Now()
	runCtx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(runCtx) }()

	err = watchProgress(ctx, c, live)
	stopWorker()
	if werr := <-runErr; err == nil {
		err = werr
	}
	if err != nil {
		return err
	}

	stats, err := c.Stats(ctx, "")
	if err != nil {
		return err
	}
	elapsed, err := settledIn(ctx, c, ran, start)
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "%s\n\n", onPurpose)
	printStats(out, stats)
	fmt.Fprintf(out, "\nthe worker settled %s in %v, from its start to the last settlement: %.0f tasks/s at concurrency %d\n",
		plural(len(ran), "task"), elapsed, float64(len(ran))/elapsed.Seconds(), *conc)
	printNext(out, e.self, *db)
	return nil
}

// settledIn is how long the worker, started at start, took to settle the
// tasks ran: from start to the latest of their completion times, as the
// database recorded them (to the millisecond). It is measured by the
// settlements themselves, not by how often the progress line looks.
func settledIn(ctx context.Context, c *cairnq.Client, ran []string, start time.Time) (time.Duration, error) {
	want := make(map[string]bool, len(ran))
	for _, id := range ran {
		want[id] = true
	}
	// The demo's file holds its tasks alone, and one more (canceled).
	tasks, err := c.List(ctx, &cairnq.ListOptions{Limit: len(ran) + 1})
	if err != nil {
		return 0, err
	}
	var last time.Time
	seen := 0
	for _, t := range tasks {
		if !want[t.ID] {
			continue
		}
		if !t.IsTerminal() {
			return 0, fmt.Errorf("demo: task %s is %s after the worker stopped", t.ID, t.Status)
		}
		seen++
		if t.CompletedAt.After(last) {
			last = t.CompletedAt
		}
	}
	if seen != len(ran) {
		return 0, fmt.Errorf("demo: %d of the %d tasks run are in the database", seen, len(ran))
	}
	// Completion times are whole milliseconds; the elapsed time is at
	// least one.
	return max(last.Sub(start).Round(time.Millisecond), time.Millisecond), nil
}

// printNext ends the demo with the commands that open what it made, on
// the file it made: without --db they would look in ./tasks.db.
func printNext(out io.Writer, self, db string) {
	if self == "" {
		self = "cairnq"
	}
	arg := printable(shellQuote(db))
	fmt.Fprintln(out, "\nnext, on the tasks the demo left:")
	w := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintf(w, "  %s ui --db %s\tthe web console (http://127.0.0.1:8080)\n", self, arg)
	fmt.Fprintf(w, "  %s stats --db %s\tthese counts again\n", self, arg)
	fmt.Fprintf(w, "  %s list --db %s --status failed\tthe task that failed\n", self, arg)
	w.Flush()
}

// shellSafe matches a word a shell takes as it is.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:=@%+,-]+$`)

// shellQuote returns s as one word for a POSIX shell.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// plural is n and the noun, "1 task" or "2 tasks".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// demoWorker registers the demo's handlers: "render" fails on the first
// attempt of every tenth task and succeeds on the retry, "flaky" always
// fails, "embed" is delivered in batches of 16.
func demoWorker(c *cairnq.Client, conc int) (*cairnq.Worker, error) {
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{
		Queues:       []string{"default", "gpu"},
		Concurrency:  conc,
		RetryBackoff: 20 * time.Millisecond,
		PollInterval: 50 * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	type page struct{ N int }
	errs := []error{
		w.Handle("render", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			var p page
			if err := tc.Decode(&p); err != nil {
				return nil, err
			}
			if p.N%10 == 0 && tc.Attempt() == 1 {
				return nil, fmt.Errorf("page %d: renderer busy, try again", p.N)
			}
			return map[string]int{"page": p.N, "words": 100 + p.N%50}, nil
		}, nil),
		w.Handle("flaky", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			return nil, &cairnq.TaskError{Code: "bad_input", Message: "this task can never succeed"}
		}, nil),
		w.HandleBatch("embed", 16, func(ctx context.Context, tcs []*cairnq.TaskContext) (map[string]any, error) {
			out := make(map[string]any, len(tcs))
			for _, tc := range tcs {
				out[tc.ID()] = map[string]int{"dims": 8, "batch": len(tcs)}
			}
			return out, nil
		}, nil),
	}
	return w, errors.Join(errs...)
}

// demoSubmit submits n tasks across two names and two queues, plus one
// that always fails and one canceled before it could run, and returns the
// ids of the n-1 tasks the worker is to run: all but the canceled one.
func demoSubmit(ctx context.Context, c *cairnq.Client, n int) ([]string, error) {
	var ids []string
	for i := range n - 2 {
		name, queue := "render", "default"
		if i%3 == 0 {
			name, queue = "embed", "gpu"
		}
		t, err := c.Submit(ctx, name, map[string]int{"N": i}, &cairnq.SubmitOptions{Queue: queue})
		if err != nil {
			return nil, err
		}
		ids = append(ids, t.ID)
	}
	flaky, err := c.Submit(ctx, "flaky", nil, nil)
	if err != nil {
		return nil, err
	}
	late, err := c.Submit(ctx, "render", map[string]int{"N": -1}, &cairnq.SubmitOptions{Delay: time.Hour})
	if err != nil {
		return nil, err
	}
	if _, err := c.Cancel(ctx, late.ID); err != nil {
		return nil, err
	}
	return append(ids, flaky.ID), nil
}

// watchProgress reports until no task is queued or running, on live.
func watchProgress(ctx context.Context, c *cairnq.Client, live *liveLine) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		stats, err := c.Stats(ctx, "")
		if err != nil {
			live.end()
			return err
		}
		var sum cairnq.StatusCounts
		for _, s := range stats {
			sum.Queued += s.Queued
			sum.Running += s.Running
			sum.Succeeded += s.Succeeded
			sum.Failed += s.Failed
			sum.Canceled += s.Canceled
		}
		done := sum.Queued == 0 && sum.Running == 0
		live.set(fmt.Sprintf("queued %d  running %d  succeeded %d  failed %d  canceled %d",
			sum.Queued, sum.Running, sum.Succeeded, sum.Failed, sum.Canceled), done)
		if done {
			live.end()
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			live.end()
			return ctx.Err()
		}
	}
}

// liveLine is a progress line and the lines written around it: the
// demo's log lines, which its logger writes through it, and the ids
// submit --from prints. On a terminal the progress line is redrawn in
// place, and a line written through it first clears it, then is written,
// and the progress line is drawn again below it, so that neither breaks
// the other. Elsewhere the progress line is printed a line at a time,
// once a second and at the end (never the same line twice in a row), and
// the other lines are left alone.
type liveLine struct {
	out    io.Writer // the progress line
	logOut io.Writer // the lines written through it
	tty    bool      // whether out is a terminal

	mu        sync.Mutex
	line      string    // the progress line drawn on out, on a terminal
	lastPlain time.Time // when a plain progress line was printed last
	plain     string    // the plain progress line printed last
}

// logger is the demo's logger: WARN and above, as text, through l, but
// for the failures the demo makes on purpose, which it counts instead
// (onPurpose) and sums up in one line once the run is over: 21 WARN lines
// of 300 characters buried the run's outcome.
func (l *liveLine) logger(onPurpose *purposeful) *slog.Logger {
	return slog.New(&purposeFilter{count: onPurpose, next: slog.NewTextHandler(l, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{} // a demo's lines read better without
			}
			return a
		},
	})})
}

// purposeful counts the demo's deliberate failures: render's first
// attempts, retried, and flaky's, for good.
type purposeful struct{ retried, failed atomic.Int64 }

// String is the line that sums them up.
func (p *purposeful) String() string {
	return fmt.Sprintf("%s failed on purpose and were retried; %s failed for good on purpose (the list below shows it)",
		plural(int(p.retried.Load()), "attempt"), plural(int(p.failed.Load()), "task"))
}

// purposeFilter is a slog handler that counts the demo's deliberate
// failures into count and hands every other record to next.
type purposeFilter struct {
	count *purposeful
	next  slog.Handler
}

func (h *purposeFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}
func (h *purposeFilter) WithAttrs(as []slog.Attr) slog.Handler {
	return &purposeFilter{h.count, h.next.WithAttrs(as)}
}
func (h *purposeFilter) WithGroup(g string) slog.Handler {
	return &purposeFilter{h.count, h.next.WithGroup(g)}
}

func (h *purposeFilter) Handle(ctx context.Context, r slog.Record) error {
	var name string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "task_name" {
			name = a.Value.String()
		}
		return name == ""
	})
	switch {
	case name == "render" && r.Message == "cairnq: task attempt failed; will retry":
		h.count.retried.Add(1)
	case name == "flaky" && r.Message == "cairnq: task failed":
		h.count.failed.Add(1)
	default:
		return h.next.Handle(ctx, r)
	}
	return nil
}

// set shows s as the progress line: in place on a terminal; elsewhere as
// a line of its own when final or when a second has passed since the
// last one, unless it is the last one again.
func (l *liveLine) set(s string, final bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.tty:
		l.line = s
		fmt.Fprintf(l.out, "\r\033[K%s", s)
	case s == l.plain:
	case final || time.Since(l.lastPlain) >= time.Second:
		fmt.Fprintln(l.out, s)
		l.lastPlain, l.plain = time.Now(), s
	}
}

// end leaves the progress line on a terminal as it is, ending its line,
// so that what follows starts on a line of its own.
func (l *liveLine) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tty && l.line != "" {
		fmt.Fprintln(l.out)
	}
	l.line = ""
}

// Write writes p, whole lines (a slog handler writes each record in one
// call), clearing the progress line on a terminal first and drawing it
// again after.
func (l *liveLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	drawn := l.tty && l.line != ""
	if drawn {
		io.WriteString(l.out, "\r\033[K")
	}
	n, err := l.logOut.Write(p)
	if drawn {
		io.WriteString(l.out, l.line)
	}
	return n, err
}

// isTerminal reports whether out is a character device (a terminal).
func isTerminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
