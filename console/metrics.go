package console

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
)

// rateWindow is the span the metrics' settled rates average over.
const rateWindow = 5 * time.Minute

// metricsContentType is Prometheus' text exposition format, version 0.0.4.
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// MetricsHandler returns an http.Handler serving the metrics of the
// database c opens in Prometheus' text format, at any path: what the
// console serves at /metrics, for an application that mounts the metrics
// without the console:
//
//	mux.Handle("GET /metrics", console.MetricsHandler(c, nil))
//
// Of opts only Authorize, Hosts, Logger and CountWait apply. The counts
// come from the background count the overview uses (see
// Options.CountWait): a scrape waits for the first count, bounded by its
// request's context, and is then answered from the last one at once.
// The handler returned is an io.Closer, as Handler's is; it panics if c
// is nil.
func MetricsHandler(c *cairnq.Client, opts *Options) http.Handler {
	k, _ := newConsole(c, opts)
	return &handler{Handler: k.secure(http.HandlerFunc(k.metrics)), k: k}
}

// metrics answers a scrape.
func (k *console) metrics(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	n, err := k.counter.first(ctx)
	var pauses []*cairnq.QueuePause
	var now time.Time
	var workers []workerRow
	if err == nil {
		pauses, _, err = k.pauses(ctx)
	}
	if err == nil {
		workers, err = k.workers(ctx)
	}
	var schedules []cairnq.ScheduleInfo
	if err == nil {
		schedules, err = k.c.Schedules(ctx)
	}
	if err == nil {
		now, err = k.st.ConsoleNow(ctx)
	}
	if err != nil {
		if ctx.Err() == nil {
			k.opts.Logger.Error("cairnq console: metrics", "err", err)
		}
		// The error is logged, not answered: a driver's error may name
		// the database's user and host.
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", metricsContentType)
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(metricsText(n, pauses, workers, schedules, now))
}

// first is get waiting for a count to exist, however long the first one
// takes: a scrape has its own timeout (ctx), and an answer without
// counts would read as every queue emptied.
func (c *counter) first(ctx context.Context) (*counts, error) {
	for {
		c.mu.Lock()
		ended := c.ended // taken first, so a count ending after get is not missed
		c.mu.Unlock()
		n, _, err := c.get(ctx)
		if n != nil || err != nil {
			return n, err
		}
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return nil, cairnq.ErrClosed
		}
		select {
		case <-ended:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		c.mu.Lock()
		n, err = c.cur, c.err
		c.mu.Unlock()
		if n == nil && err != nil {
			return nil, err
		}
	}
}

// statusOrder is the statuses in the order the metrics list them.
var statusOrder = []cairnqtype.Status{cairnqtype.StatusQueued, cairnqtype.StatusRunning,
	cairnqtype.StatusSucceeded, cairnqtype.StatusFailed, cairnqtype.StatusCanceled}

// countOf is c's count of status s.
func countOf(c cairnqtype.StatusCounts, s cairnqtype.Status) int {
	switch s {
	case cairnqtype.StatusQueued:
		return c.Queued
	case cairnqtype.StatusRunning:
		return c.Running
	case cairnqtype.StatusSucceeded:
		return c.Succeeded
	case cairnqtype.StatusFailed:
		return c.Failed
	}
	return c.Canceled
}

// metricsText writes the metrics of count n, the pauses and the workers,
// now being the database's clock at the scrape.
func metricsText(n *counts, pauses []*cairnq.QueuePause, workers []workerRow, schedules []cairnq.ScheduleInfo, now time.Time) []byte {
	var m metricsWriter
	m.family("cairnq_tasks", "Tasks in the database by queue, name and status, as of the last count.")
	for _, c := range n.Names {
		for _, s := range statusOrder {
			m.sample(float64(countOf(c.StatusCounts, s)), "queue", c.Queue, "name", c.Name, "status", string(s))
		}
	}
	m.family("cairnq_queue_oldest_due_seconds",
		"How long the queue's longest-waiting due queued task had waited since it became due, as of the last count; 0 when none waits.")
	for _, q := range n.Queues {
		age := 0.0
		if !q.OldestDue.IsZero() {
			age = max(n.At.Sub(q.OldestDue).Seconds(), 0)
		}
		m.sample(age, "queue", q.Queue)
	}
	m.family("cairnq_settled_per_second",
		"Tasks that succeeded or failed for good per second, by queue and name, averaged over the 5 minutes before the last count.")
	for _, c := range n.Rates {
		for _, s := range []cairnqtype.Status{cairnqtype.StatusSucceeded, cairnqtype.StatusFailed} {
			m.sample(float64(countOf(c.StatusCounts, s))/rateWindow.Seconds(), "queue", c.Queue, "name", c.Name, "status", string(s))
		}
	}
	m.family("cairnq_queue_paused", "1 for each queue paused for every Go worker (Client.PauseQueue).")
	for _, p := range pauses {
		m.sample(1, "queue", p.Queue)
	}
	leasing, states := 0, map[string]int{"running": 0, "silent": 0}
	for _, w := range workers {
		if !w.LeaseUntil.IsZero() {
			leasing++
		}
		if w.State != "no beat" {
			states[w.State]++
		}
	}
	m.family("cairnq_workers_leasing", "Workers holding at least one lease, of any SDK.")
	m.sample(float64(leasing))
	m.family("cairnq_go_workers", "Go workers by the state of their beat: running, or silent (three beats missed).")
	for _, st := range []string{"running", "silent"} {
		m.sample(float64(states[st]), "state", st)
	}
	silent := 0
	for _, e := range schedules {
		if e.Silent(time.Now()) {
			silent++
		}
	}
	m.family("cairnq_schedules", "Periodic schedules by state: running (a scheduler writes the entry), or silent (none has for three beats).")
	m.sample(float64(len(schedules)-silent), "state", "running")
	m.sample(float64(silent), "state", "silent")
	m.family("cairnq_schedule_next_run_timestamp_seconds", "Each periodic schedule's next slot, in Unix seconds.")
	for _, e := range schedules {
		if !e.Next.IsZero() {
			m.sample(float64(e.Next.UnixMilli())/1000, "entry", e.ID)
		}
	}
	m.family("cairnq_count_age_seconds", "How old the last count is.")
	m.sample(max(now.Sub(n.At).Seconds(), 0))
	m.family("cairnq_count_duration_seconds", "How long the last count took.")
	m.sample(n.Took.Seconds())
	return m.buf.Bytes()
}

// metricsWriter writes gauges in Prometheus' text format.
type metricsWriter struct {
	buf  bytes.Buffer
	name string
}

// family starts the gauge name.
func (m *metricsWriter) family(name, help string) {
	m.name = name
	m.buf.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n")
}

// sample writes one sample of the current family, labels given as
// name, value pairs.
func (m *metricsWriter) sample(v float64, labels ...string) {
	m.buf.WriteString(m.name)
	for i := 0; i+1 < len(labels); i += 2 {
		sep := ","
		if i == 0 {
			sep = "{"
		}
		m.buf.WriteString(sep + labels[i] + `="` + labelEscaper.Replace(labels[i+1]) + `"`)
	}
	if len(labels) > 0 {
		m.buf.WriteByte('}')
	}
	m.buf.WriteString(" " + strconv.FormatFloat(v, 'g', -1, 64) + "\n")
}

// labelEscaper escapes a label value as the text format requires.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
