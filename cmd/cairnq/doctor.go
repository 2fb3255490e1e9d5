package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
)

const doctorHelp = `One screen of health, changing nothing:
  schema    the protocol and schema versions against this cairnq's
            (behind, ahead or another protocol major needs attention)
  route     Postgres: whether the connection keeps one server session
            (direct, or through a relay) or goes through a connection
            pooler, and so whether cairnq keeps its statements prepared;
            "n/a" on SQLite
  listen    whether LISTEN/NOTIFY works (Postgres: a notification sent and
            received on a channel of its own); "n/a" behind a
            transaction-mode pooler, where it cannot and workers poll, and
            on SQLite
  leases    running tasks whose lease has expired: no worker has claimed
            since (a claim recovers them)
  queues    per queue, the due queued tasks and how long the oldest has
            waited (longer than --max-wait needs attention, but on a
            queue paused with 'cairnq pause')
  paused    the queues paused for every Go worker, since when, by whom
            and why (information: a pause never needs attention)
  failures  tasks that failed for good within --window, by name (more than
            --max-failures needs attention)
Exit status 0 when nothing needs attention, 4 when something does, 3 when
there is no database or no cairnq tables. On a schema behind or of another
protocol, the task checks are skipped.

--json: {"ok": BOOL, "backend": "sqlite" | "postgres", "database": "...",
"checks": [{"check": "schema" | "route" | "listen" | "leases" | "queues" |
"paused" | "failures", "status": "ok" | "attention" | "n/a" | "skipped", "detail":
"..."}], "schema": STATUS (see 'cairnq migrate -h'), "expired_leases":
[{"id", "name", "queue", "worker_id", "lease_until_ms", "attempt",
"max_attempts"}], "queues": [{"queue", "due", "oldest_run_at_ms",
"oldest_age_ms"}], "paused": [{"queue", "paused_at_ms", "by", "reason"}],
"failures": [{"name", "count", "last_failed_at_ms"}],
"max_wait_ms": N, "failure_window_ms": N, "max_failures": N}.`

// The statuses of a doctor check.
const (
	checkOK        = "ok"
	checkAttention = "attention"
	checkNA        = "n/a"
	checkSkipped   = "skipped"
)

// doctorCheck is one line of the doctor's screen.
type doctorCheck struct {
	Check  string `json:"check"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

// leaseEntry is a running task with an expired lease, in the protocol's
// field names.
type leaseEntry struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Queue        string `json:"queue"`
	WorkerID     string `json:"worker_id"`
	LeaseUntilMs int64  `json:"lease_until_ms"`
	Attempt      int    `json:"attempt"`
	MaxAttempts  int    `json:"max_attempts"`
}

// doctorReport is doctor's whole finding; doctor --json prints it.
type doctorReport struct {
	OK              bool                  `json:"ok"`
	Backend         string                `json:"backend"`
	Database        string                `json:"database"`
	Checks          []doctorCheck         `json:"checks"`
	Schema          *cairnq.SchemaStatus  `json:"schema"`
	ExpiredLeases   []leaseEntry          `json:"expired_leases"`
	Queues          []cairnq.QueueAge     `json:"queues"`
	Paused          []pauseDoc            `json:"paused"`
	Failures        []cairnq.FailureCount `json:"failures"`
	MaxWaitMs       int64                 `json:"max_wait_ms"`
	FailureWindowMs int64                 `json:"failure_window_ms"`
	MaxFailures     int                   `json:"max_failures"`
}

func (r *doctorReport) add(check, status, format string, a ...any) {
	r.Checks = append(r.Checks, doctorCheck{Check: check, Status: status, Detail: fmt.Sprintf(format, a...)})
	if status == checkAttention {
		r.OK = false
	}
}

// expiredLeasesShown bounds the expired leases doctor reads and reports.
const expiredLeasesShown = 100

// listenTimeout bounds the LISTEN check.
const listenTimeout = 5 * time.Second

func cmdDoctor(ctx context.Context, e *env, args []string) error {
	fs := e.dbFlags()
	maxWait := fs.Duration("max-wait", 5*time.Minute, "a queue whose oldest due task has waited longer needs attention")
	window := fs.Duration("window", time.Hour, "count the failures of this long a window")
	maxFailures := fs.Int("max-failures", 0, "more failures than this within --window need attention")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if *maxWait <= 0 || *window <= 0 || *maxFailures < 0 {
		return e.usageError("--max-wait and --window must be > 0, --max-failures >= 0")
	}
	d, err := e.connect(ctx)
	if err != nil {
		return err
	}
	t := d.t
	r := &doctorReport{
		OK: true, Backend: "sqlite", Database: t.String(),
		Checks: []doctorCheck{}, ExpiredLeases: []leaseEntry{}, Queues: []cairnq.QueueAge{}, Paused: []pauseDoc{}, Failures: []cairnq.FailureCount{},
		MaxWaitMs: maxWait.Milliseconds(), FailureWindowMs: window.Milliseconds(), MaxFailures: *maxFailures,
	}
	if t.postgres {
		r.Backend = "postgres"
	}
	verdict, err := diagnose(ctx, d, r, *maxWait, *window, *maxFailures)
	if err != nil {
		return err
	}
	if e.db.json {
		if err := writeJSON(e.out, r); err != nil {
			return err
		}
	} else {
		printDoctor(e.out, r)
	}
	return verdict
}

// diagnose fills r. It returns the verdict (nil, errAttention or no
// database) apart from a failure to diagnose at all.
func diagnose(ctx context.Context, d *database, r *doctorReport, maxWait, window time.Duration, maxFailures int) (verdict, err error) {
	st, err := d.inspect(ctx)
	if err != nil {
		return nil, err
	}
	r.Schema = st
	taskChecks := true
	switch st.State {
	case cairnq.SchemaCurrent:
		r.add("schema", checkOK, "%s", stateLine(st))
	case cairnq.SchemaAbsent:
		r.add("schema", checkAttention, "%s", stateLine(st))
		taskChecks = false
		verdict = &dbError{d.t, fmt.Errorf("%w: %s holds no cairnq tables", cairnq.ErrNoDatabase, d.t)}
	case cairnq.SchemaAhead:
		r.add("schema", checkAttention, "%s", stateLine(st))
	default:
		r.add("schema", checkAttention, "%s", stateLine(st))
		taskChecks = false
	}

	if d.t.postgres {
		pooled, route := checkRoute(ctx, d)
		r.add("route", checkOK, "%s", route)
		switch ok, silent, detail := checkListen(ctx, d); {
		case ok:
			r.add("listen", checkOK, "%s", detail)
		case pooled && silent:
			// Behind a transaction-mode pooler no notification can reach
			// the session that listens: polling is how cairnq runs there.
			r.add("listen", checkNA, "behind a connection pooler no notification came back within %s: workers and waiters poll, as they should there; nothing to configure", listenTimeout)
		default:
			r.add("listen", checkAttention, "%s", detail)
		}
	} else {
		r.add("route", checkNA, "SQLite is a file: there is no connection to route")
		r.add("listen", checkNA, "SQLite has no LISTEN: other processes' commits are seen through a watch of the WAL file, and by polling")
	}

	if !taskChecks {
		for _, c := range []string{"leases", "queues", "paused", "failures"} {
			r.add(c, checkSkipped, "needs a current schema")
		}
	} else if err := taskHealth(ctx, d, r, maxWait, window, maxFailures); err != nil {
		return nil, err
	}
	if verdict == nil && !r.OK {
		n := 0
		for _, c := range r.Checks {
			if c.Status == checkAttention {
				n++
			}
		}
		verdict = fmt.Errorf("%w: %s", errAttention, count(n, "check"))
	}
	return verdict, nil
}

// taskHealth runs the checks that read tasks.
func taskHealth(ctx context.Context, d *database, r *doctorReport, maxWait, window time.Duration, maxFailures int) error {
	c, err := d.open(ctx)
	if err != nil {
		return err
	}
	expired, err := c.ExpiredLeases(ctx, expiredLeasesShown)
	if err != nil {
		return err
	}
	for _, t := range expired {
		r.ExpiredLeases = append(r.ExpiredLeases, leaseEntry{
			ID: t.ID, Name: t.Name, Queue: t.Queue, WorkerID: t.WorkerID,
			LeaseUntilMs: t.LeaseUntil.UnixMilli(), Attempt: t.Attempt, MaxAttempts: t.MaxAttempts,
		})
	}
	if len(expired) == 0 {
		r.add("leases", checkOK, "no running task has an expired lease")
	} else {
		more := ""
		if len(expired) == expiredLeasesShown {
			more = " or more"
		}
		var some []string
		for _, t := range expired[:min(len(expired), 3)] {
			some = append(some, fmt.Sprintf("%s (%s on %s, worker %s, expired %s ago)", t.ID, t.Name, t.Queue, t.WorkerID,
				time.Since(t.LeaseUntil).Round(time.Second)))
		}
		r.add("leases", checkAttention, "%s%s with an expired lease (no worker has claimed since): %s",
			count(len(expired), "running task"), more, strings.Join(some, "; "))
	}

	ages, err := c.QueueAges(ctx)
	if err != nil {
		return err
	}
	pauses, err := c.PausedQueues(ctx)
	if err != nil {
		return err
	}
	paused := map[string]bool{}
	for _, p := range pauses {
		paused[p.Queue] = true
	}
	r.Queues = append(r.Queues, ages...)
	status := checkOK
	var parts []string
	for _, a := range ages {
		part := fmt.Sprintf("%s: %d due, oldest waiting %s", a.Queue, a.Due, a.OldestAge.Round(time.Second))
		switch {
		case paused[a.Queue]:
			part += " (paused)"
		case a.OldestAge > maxWait:
			status = checkAttention
			part += fmt.Sprintf(" (over %s)", maxWait)
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		parts = []string{"no task is waiting"}
	}
	r.add("queues", status, "%s", strings.Join(parts, "; "))
	parts = parts[:0]
	for _, p := range pauses {
		r.Paused = append(r.Paused, pauseDocOf(p))
		parts = append(parts, fmt.Sprintf("%s, %s", p.Queue, pauseText(p)))
	}
	if len(parts) == 0 {
		parts = []string{"no queue is paused"}
	}
	r.add("paused", checkOK, "%s", strings.Join(parts, "; "))

	fails, err := c.RecentFailures(ctx, window)
	if err != nil {
		return err
	}
	// A failed workflow's record fails because a step did, which is
	// counted under its own name: the record would count it twice.
	fails = slices.DeleteFunc(fails, func(f cairnq.FailureCount) bool { return f.Name == cairnq.WorkflowName })
	r.Failures = append(r.Failures, fails...)
	total := 0
	parts = parts[:0]
	for _, f := range fails {
		total += f.Count
		parts = append(parts, fmt.Sprintf("%s %d", f.Name, f.Count))
	}
	switch {
	case total == 0:
		r.add("failures", checkOK, "no task failed in the last %s", window)
	case total > maxFailures:
		r.add("failures", checkAttention, "%d failed in the last %s: %s", total, window, strings.Join(parts, ", "))
	default:
		r.add("failures", checkOK, "%d failed in the last %s (at most %d allowed): %s", total, window, maxFailures, strings.Join(parts, ", "))
	}
	return nil
}

// checkRoute says where the connection goes, and what cairnq makes of
// it; pooled is true when it goes through a connection pooler.
func checkRoute(ctx context.Context, d *database) (pooled bool, detail string) {
	keeps, route, err := d.ex.Route(ctx)
	switch {
	case err != nil:
		return false, fmt.Sprintf("not known (%v)", err)
	case keeps:
		return false, route + "; cairnq keeps its statements prepared"
	}
	return true, route + "; cairnq sends its statements unnamed, which any pooler passes through"
}

// checkListen listens on a channel of its own and sends itself
// notifications until one comes back, for at most listenTimeout.
// silent is true when a transaction-mode pooler kept notifications from
// coming back: the adapter refused to listen, having found one, or
// LISTEN and NOTIFY were accepted and nothing came back.
func checkListen(ctx context.Context, d *database) (ok, silent bool, detail string) {
	ctx, cancel := context.WithTimeout(ctx, listenTimeout)
	defer cancel()
	var b [8]byte
	rand.Read(b[:])
	channel, token := "cairnq_doctor_"+hex.EncodeToString(b[:]), hex.EncodeToString(b[:4])
	got := make(chan struct{}, 1)
	start := time.Now()
	stop, err := d.ex.Listen(ctx, []string{channel}, func(_, payload string) {
		if payload == token {
			select {
			case got <- struct{}{}:
			default:
			}
		}
	})
	if err != nil {
		// An adapter that found a transaction-mode pooler refuses to
		// listen, as the server would never deliver.
		return false, errors.Is(err, executor.ErrTransactionPooler), fmt.Sprintf("LISTEN failed: %v; workers and waiters fall back to polling", err)
	}
	defer stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := d.ex.Query(ctx, "SELECT CAST(pg_notify($1, $2) AS text) AS sent", channel, token); err != nil && ctx.Err() == nil {
			return false, false, fmt.Sprintf("NOTIFY failed: %v", err)
		}
		select {
		case <-got:
			return true, false, fmt.Sprintf("a notification came back in %s", time.Since(start).Round(time.Millisecond))
		case <-ctx.Done():
			return false, true, fmt.Sprintf("no notification came back within %s (a transaction-mode pooler?); workers and waiters fall back to polling", listenTimeout)
		case <-tick.C:
		}
	}
}

// printDoctor prints the doctor's screen.
func printDoctor(out io.Writer, r *doctorReport) {
	fmt.Fprintf(out, "cairnq doctor: %s (%s)\n", printable(r.Database), r.Backend)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	attention := 0
	for _, c := range r.Checks {
		status := c.Status
		if status == checkAttention {
			attention++
			status = "ATTENTION"
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\n", c.Check, status, printable(c.Detail))
	}
	w.Flush()
	switch attention {
	case 0:
		fmt.Fprintln(out, "nothing needs attention")
	case 1:
		fmt.Fprintln(out, "1 check needs attention")
	default:
		fmt.Fprintf(out, "%d checks need attention\n", attention)
	}
}
