package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/internal/testkit/syncbuf"
)

// watch prints a line only when what it shows changes: on a busy
// database it printed the same counts several times a second, one line
// per signal.
func TestWatchPrinterPrintsChanges(t *testing.T) {
	one := map[string]cairnq.StatusCounts{"q": {Queued: 1}}
	two := map[string]cairnq.StatusCounts{"q": {Queued: 1}, "r": {Running: 1}}
	for _, asJSON := range []bool{false, true} {
		var out strings.Builder
		p := &watchPrinter{out: &out, json: asJSON}
		now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		steps := []struct {
			reason string
			stats  map[string]cairnq.StatusCounts
			prints bool
		}{
			{"start", map[string]cairnq.StatusCounts{}, true},
			{"poll", map[string]cairnq.StatusCounts{}, false},
			{"queued", one, true},
			{"poll", one, false},
			{"done", map[string]cairnq.StatusCounts{"q": {Queued: 1}}, false},
			{"poll", two, true},
			{"poll", one, true},
		}
		for i, s := range steps {
			if got := p.show(now, cairnq.Signal{Reason: s.reason}, s.stats); got != s.prints {
				t.Errorf("json %v, step %d (%s %v): printed %v, want %v", asJSON, i, s.reason, s.stats, got, s.prints)
			}
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if len(lines) != 4 {
			t.Fatalf("json %v: %d lines, want 4:\n%s", asJSON, len(lines), out.String())
		}
		if !asJSON && lines[3] != "03:04:05 poll    q: 1 queued 0 running 0 succeeded 0 failed 0 canceled" {
			t.Errorf("watch line %q", lines[3])
		}
	}
}

func TestWatchRefusesPoll(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.db")
	for _, c := range []struct{ flag, msg string }{
		{"--poll=0s", "--poll must be more than 0, got 0s"},
		{"--poll=-1s", "--poll must be more than 0, got -1s"},
		{"--for=-1s", "--for must not be negative, got -1s"},
	} {
		r := cli(t, "watch", "--db", missing, c.flag)
		want := "cairnq: usage: watch: " + c.msg + " (see 'cairnq watch -h')\n"
		if r.code != exitUsage || !errors.Is(r.err, errUsage) || r.stderr != want {
			t.Errorf("watch %s: want exit 2 and %q\n%s", c.flag, want, r)
		}
	}
}

// End to end on a database polled far more often than it changes: one
// line per change, none repeating the one before.
func TestWatchPrintsOnlyChanges(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	ok(t, "migrate", "--db", db)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"watch", "--db", db, "--json", "--poll", "5ms"}, &env{out: &out, errOut: &errOut, getenv: func(string) string { return "" }})
	}()
	lines := func() []watchLine {
		var ls []watchLine
		for l := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
			var w watchLine
			if l != "" && json.Unmarshal([]byte(l), &w) == nil {
				ls = append(ls, w)
			}
		}
		return ls
	}
	queued := func(n int) func() bool {
		return func() bool { ls := lines(); return len(ls) > 0 && ls[len(ls)-1].Queues["default"].Queued == n }
	}
	waitFor(t, "the start line", func() bool { return len(lines()) > 0 })
	ok(t, "submit", "--db", db, "a") // another client: seen by a poll
	waitFor(t, "a line counting one task", queued(1))
	ok(t, "submit", "--db", db, "b")
	waitFor(t, "a line counting two tasks", queued(2))
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("watch: %v\n%s", err, errOut.String())
	}
	ls := lines()
	if len(ls) != 3 {
		t.Errorf("watch printed %d lines, want 3 (start, one task, two):\n%s", len(ls), out.String())
	}
	for i := 1; i < len(ls); i++ {
		if reflect.DeepEqual(ls[i].Queues, ls[i-1].Queues) {
			t.Errorf("watch line %d repeats the one before:\n%s", i, out.String())
		}
	}
}
