package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// list --limit below 1 is a usage error: --limit 0 silently listed 100
// rows (the library's default). A list the limit cut short says so on
// stderr, leaving stdout the list alone.
func TestListLimit(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	for _, n := range []string{"0", "-1"} {
		r := cli(t, "list", "--db", missing, "--limit", n)
		want := "cairnq: usage: list: --limit must be at least 1, got " + n + " (see 'cairnq list -h')\n"
		if r.code != exitUsage || !errors.Is(r.err, errUsage) || r.stderr != want || r.stdout != "" {
			t.Errorf("list --limit %s: want exit 2 and %q\n%s", n, want, r)
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused --limit touched %s", missing)
	}

	db := filepath.Join(dir, "tasks.db")
	ok(t, "migrate", "--db", db)
	for range 3 {
		ok(t, "submit", "--db", db, "n")
	}
	rows := func(r result) int { return strings.Count(r.stdout, "task_") }
	r := ok(t, "list", "--db", db, "--limit", "2")
	if rows(r) != 2 || r.stderr != "cairnq: showing the newest 2 of 3 tasks; use --limit for more\n" {
		t.Errorf("list --limit 2 of 3: want 2 rows and the note on stderr\n%s", r)
	}
	for _, limit := range []string{"3", "4"} {
		if r := ok(t, "list", "--db", db, "--limit", limit); rows(r) != 3 || r.stderr != "" {
			t.Errorf("list --limit %s of 3: want every row and no note\n%s", limit, r)
		}
	}
	if r := ok(t, "list", "--db", db); rows(r) != 3 || r.stderr != "" {
		t.Errorf("list of 3 under the default limit:\n%s", r)
	}
	var list struct {
		Tasks []taskJSON `json:"tasks"`
	}
	r = ok(t, "list", "--db", db, "--json", "--limit", "1")
	decode(t, r, &list)
	if len(list.Tasks) != 1 || r.stderr != "cairnq: showing the newest 1 of 3 tasks; use --limit for more\n" {
		t.Errorf("list --json --limit 1 of 3: want one task on stdout, the note on stderr\n%s", r)
	}

	// A name filter has no count to read: the note says more match.
	if r := ok(t, "list", "--db", db, "--name", "n", "--limit", "1"); r.stderr != "cairnq: showing the newest 1 of more that match; use --limit for more\n" {
		t.Errorf("list --name n --limit 1 of 3:\n%s", r)
	}
}

// A list holding failed tasks says when each failed and why, on its line.
func TestListShowsFailures(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	c, err := cairnq.Open(t.Context(), db, &cairnq.SQLiteOptions{Options: cairnq.Options{Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Submit(t.Context(), "boom", nil, &cairnq.SubmitOptions{MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{PollInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("boom", func(context.Context, *cairnq.TaskContext) (any, error) {
		return nil, &cairnq.TaskError{Code: "smtp_rejected", Message: "550 mailbox\nunavailable " + strings.Repeat("x", 80)}
	}, nil)
	if tasks, err := w.WorkOne(t.Context()); err != nil || len(tasks) != 1 || tasks[0].Status != cairnq.StatusFailed {
		t.Fatalf("WorkOne = %v, %v", tasks, err)
	}
	r := ok(t, "list", "--db", db, "--status", "failed")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.HasSuffix(strings.Join(strings.Fields(lines[0]), " "), "created failed error") ||
		!strings.Contains(lines[1], "smtp_rejected: 550 mailbox unavailable xxx") || !strings.HasSuffix(lines[1], "…") {
		t.Errorf("list --status failed:\n%s", r.stdout)
	}
}

// list --search finds tasks by payload or error text.
func TestListSearchFlag(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	ok(t, "migrate", "--db", db)
	var ada struct{ ID string }
	decode(t, ok(t, "submit", "--db", db, "--json", "email", `{"to":"ada@example.com"}`), &ada)
	ok(t, "submit", "--db", db, "email", `{"to":"bob@example.com"}`)
	r := ok(t, "list", "--db", db, "--search", "ADA@")
	if !strings.Contains(r.stdout, ada.ID) || strings.Count(r.stdout, "\n") != 2 {
		t.Errorf("list --search ADA@:\n%s", r)
	}
}
