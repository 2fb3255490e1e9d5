package main

import (
	"bytes"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/internal/testkit/syncbuf"
)

// screen renders what a terminal shows for b: a carriage return goes back
// to the line's start, ESC [ K clears to its end, a newline starts the
// next line, anything else is written over what is under the cursor.
func screen(b string) []string {
	var lines []string
	var cur []rune
	col := 0
	for i := 0; i < len(b); {
		switch {
		case strings.HasPrefix(b[i:], "\033[K"):
			cur = cur[:col]
			i += 3
			continue
		case b[i] == '\r':
			col = 0
		case b[i] == '\n':
			lines = append(lines, string(cur))
			cur, col = nil, 0
		default:
			if col < len(cur) {
				cur[col] = rune(b[i])
			} else {
				cur = append(cur, rune(b[i]))
			}
			col++
		}
		i++
	}
	if len(cur) > 0 {
		lines = append(lines, string(cur))
	}
	return lines
}

var progressLine = regexp.MustCompile(`^queued \d+  running \d+  succeeded \d+  failed \d+  canceled \d+$`)

// The demo's log lines (its sample failures, at WARN) broke its progress
// line on a terminal: the library logged through the default logger,
// which knew nothing of the line drawn in place. The demo logs through a
// logger of its own, which clears the progress line before a log line and
// draws it again after: on the screen every line is one or the other.
func TestDemoLogsAroundTheProgressLine(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	var term syncbuf.Buffer // stdout and stderr on one terminal
	err := run(t.Context(), []string{"demo", "--db", db, "--n", "60", "--concurrency", "2"},
		&env{out: &term, errOut: &term, getenv: func(string) string { return "" }, isTerminal: func(io.Writer) bool { return true }})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, term.String())
	}
	lines := screen(term.String())
	logs, progress := 0, 0
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "level=WARN "):
			logs++
			if strings.Contains(l, "queued ") && strings.Contains(l, "succeeded ") {
				t.Errorf("a log line carries the progress line: %q", l)
			}
		case strings.HasPrefix(l, "queued "):
			progress++
			if !progressLine.MatchString(l) {
				t.Errorf("a progress line is broken: %q", l)
			}
		case strings.Contains(l, "level="):
			t.Errorf("a log line does not start its line: %q", l)
		}
	}
	// Every tenth render task fails once, the flaky one for good: on
	// purpose, so one line sums them up and none is logged.
	if logs != 0 || progress != 1 {
		t.Errorf("%d log lines and %d progress lines, want none and 1 (the final counts):\n%s", logs, progress, strings.Join(lines, "\n"))
	}
	if !slices.ContainsFunc(lines, onPurposeLine.MatchString) {
		t.Errorf("no line sums up the failures made on purpose:\n%s", strings.Join(lines, "\n"))
	}
	final := "queued 0  running 0  succeeded 58  failed 1  canceled 1"
	if i := slices.Index(lines, final); i < 0 || i+1 >= len(lines) || lines[i+1] != "" {
		t.Errorf("the final progress line %q is not on a line of its own:\n%s", final, strings.Join(lines, "\n"))
	}
}

// Off a terminal, the progress is plain lines on stdout, and the failures
// the demo makes on purpose are one line there too: nothing goes to
// stderr, and the library's default logger gets nothing.
func TestDemoLogsPlainOffATerminal(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	r := ok(t, "demo", "--db", db, "--n", "60", "--concurrency", "2")
	if strings.ContainsAny(r.stdout, "\r\033") || strings.Contains(r.stdout, "level=") {
		t.Errorf("stdout holds a control sequence or a log line:\n%s", r.stdout)
	}
	if r.stderr != "" {
		t.Errorf("stderr holds %q, want nothing: the failures are on purpose", r.stderr)
	}
	if !onPurposeLine.MatchString(r.stdout) {
		t.Errorf("stdout does not sum up the failures made on purpose:\n%s", r.stdout)
	}
}

// onPurposeLine is the demo's line about the failures it made on purpose:
// every tenth render task's first attempt, and the flaky task.
var onPurposeLine = regexp.MustCompile(`(?m)^[1-9]\d* attempts? failed on purpose and were retried; 1 task failed for good on purpose \(the list below shows it\)$`)

// A log line the demo does not make on purpose still shows: the filter
// takes only the sample failures.
func TestDemoLogsWhatIsNotOnPurpose(t *testing.T) {
	var out bytes.Buffer
	onPurpose := &purposeful{}
	log := (&liveLine{out: &out, logOut: &out}).logger(onPurpose)
	log.Warn("cairnq: task attempt failed; will retry", "task_name", "render")
	log.Warn("cairnq: task failed", "task_name", "flaky")
	log.Warn("cairnq: task failed", "task_name", "render")
	log.Warn("cairnq: worker error", "err", "disk full")
	if got := out.String(); strings.Count(got, "level=WARN") != 2 || !strings.Contains(got, "disk full") || !strings.Contains(got, "task_name=render") {
		t.Errorf("logged %q, want the render task's failure for good and the worker error", got)
	}
	if onPurpose.retried.Load() != 1 || onPurpose.failed.Load() != 1 {
		t.Errorf("counted %d retried and %d failed, want 1 and 1", onPurpose.retried.Load(), onPurpose.failed.Load())
	}
}

var settledLine = regexp.MustCompile(`the worker settled (\d+) tasks? in ([0-9.]+m?s), from its start to the last settlement: ([0-9]+) tasks/s at concurrency (\d+)`)

// The throughput counted 100 ms ticks of the progress loop (--n 2: "2
// tasks settled in 101ms: 20 tasks/s"). It is now the worker's tasks over
// the time from its start to the last of their completion times: at least
// the span of those times, at most the demo's run, and the rate is the
// count over it.
func TestDemoThroughputIsTheSettlements(t *testing.T) {
	for _, n := range []int{2, 40} {
		db := filepath.Join(t.TempDir(), "demo.db")
		began := time.Now()
		r := ok(t, "demo", "--db", db, "--n", strconv.Itoa(n))
		wall := time.Since(began)
		m := settledLine.FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("demo --n %d prints no throughput:\n%s", n, r.stdout)
		}
		count, _ := strconv.Atoi(m[1])
		elapsed, err := time.ParseDuration(m[2])
		if err != nil {
			t.Fatal(err)
		}
		rate, _ := strconv.ParseFloat(m[3], 64)
		if count != n-1 {
			t.Errorf("demo --n %d: the worker settled %d tasks, want %d (all but the canceled one)", n, count, n-1)
		}
		if n == 2 && !strings.Contains(r.stdout, "settled 1 task in") {
			t.Errorf("demo --n 2 does not say \"1 task\":\n%s", r.stdout)
		}
		// The completion times of the tasks the worker ran.
		var list struct {
			Tasks []taskJSON `json:"tasks"`
		}
		decode(t, ok(t, "list", "--db", db, "--json", "--limit", "1000"), &list)
		var first, last int64
		for _, task := range list.Tasks {
			if task.Status == "canceled" || task.CompletedMs == nil {
				continue
			}
			if first == 0 || *task.CompletedMs < first {
				first = *task.CompletedMs
			}
			last = max(last, *task.CompletedMs)
		}
		span := time.Duration(last-first) * time.Millisecond
		if elapsed+2*time.Millisecond < span || elapsed > wall+time.Millisecond {
			t.Errorf("demo --n %d: %v, want between the completions' span %v and the run's %v", n, elapsed, span, wall)
		}
		if want := float64(count) / elapsed.Seconds(); rate < want-1 || rate > want+1 {
			t.Errorf("demo --n %d: %v tasks/s, want %d over %v = %.0f", n, rate, count, elapsed, want)
		}
	}
}

// The demo ends with the commands that open what it made, on the file it
// made: `cairnq stats` after it looked in ./tasks.db and exited 3.
func TestDemoSaysWhatNext(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"demo.db", "my demo's.db"} {
		db := filepath.Join(dir, name)
		r := ok(t, "demo", "--db", db, "--n", "10")
		quoted := shellQuote(db)
		if name == "demo.db" && quoted != db || name != "demo.db" && quoted != "'"+strings.ReplaceAll(db, "'", `'\''`)+"'" {
			t.Errorf("shellQuote(%q) = %s", db, quoted)
		}
		for _, cmd := range []string{"cairnq ui --db " + quoted, "cairnq stats --db " + quoted, "cairnq list --db " + quoted + " --status failed"} {
			if !strings.Contains(r.stdout, "\n  "+cmd+" ") {
				t.Errorf("demo --db %q does not end with %q:\n%s", db, cmd, r.stdout)
			}
		}
		// What it says runs, on what it made.
		if r := ok(t, "stats", "--db", db); !regexp.MustCompile(`default\s+0\s+0\s+5\s+1\s+1`).MatchString(r.stdout) {
			t.Errorf("stats --db %q after the demo:\n%s", db, r.stdout)
		}
		if r := ok(t, "list", "--db", db, "--status", "failed"); !strings.Contains(r.stdout, "flaky") {
			t.Errorf("list --db %q --status failed after the demo:\n%s", db, r.stdout)
		}
		if u := startUI(t, nil, "--db", db, "--addr", "127.0.0.1:0"); u.url == "" {
			t.Errorf("ui --db %q after the demo: %q", db, u.banner)
		}
	}
}
