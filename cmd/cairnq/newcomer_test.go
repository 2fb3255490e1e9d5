package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
)

// What a newcomer mistypes gets the one meant, or the list to choose
// from; the flags every command takes may come before it; a refusal's
// verb is spelled right (issue 50).
func TestNewcomerMistakes(t *testing.T) {
	db := sqliteBackend(t).db
	ok(t, "migrate", "--db", db)
	var task taskJSON
	decode(t, ok(t, "submit", "--json", "--db", db, "x"), &task)

	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"retry", "--db", db, task.ID}, exitError, "only failed or canceled tasks can be retried"},
		{[]string{"list", "--db", db, "--stauts", "failed"}, exitUsage, "did you mean --status?"},
		{[]string{"list", "--db", db, "--status", "faild"}, exitUsage, `unknown status "faild": one of queued, running, succeeded, failed, canceled; did you mean failed?`},
		{[]string{"purge", "--db", db, "--status", "queued"}, exitUsage, "one of succeeded, failed, canceled"},
		{[]string{"workflow", "gte", task.ID, "--db", db}, exitUsage, "did you mean get?"},
		{[]string{"workflow", "get", task.ID, "--db", db}, exitError, `(named "x") is not a workflow's record`},
	} {
		r := cli(t, c.args...)
		want(t, r, c.code, c.args...)
		if !strings.Contains(r.stderr, c.says) {
			t.Errorf("cairnq %s: stderr %q, want it to say %q", strings.Join(c.args, " "), r.stderr, c.says)
		}
	}

	for _, args := range [][]string{{"--db", db, "stats"}, {"--json", "--db=" + db, "stats"}, {"--db", db, "list", "--limit", "1"}} {
		if r := ok(t, args...); !strings.Contains(r.stdout, "default") && !strings.Contains(r.stdout, task.ID) {
			t.Errorf("cairnq %s printed %q", strings.Join(args, " "), r.stdout)
		}
	}
	if r := ok(t, "--db", db, "help", "stats"); !strings.Contains(r.stdout, "Counts the tasks") {
		t.Errorf("cairnq --db DB help stats printed %q", r.stdout)
	}
	if r := ok(t, "--db", db, "-h"); !strings.Contains(r.stdout, "Commands") && !strings.Contains(r.stdout, "stats") {
		t.Errorf("cairnq --db DB -h printed %q", r.stdout)
	}
	if r := ok(t, "help"); !strings.Contains(r.stdout, "or get (show), cancel or retry one") {
		t.Errorf("help does not name workflow get:\n%s", r.stdout)
	}
}

// The demo's next steps name the program as the user ran it: with go run
// there is no cairnq on the PATH.
func TestDemoNextStepsAsInvoked(t *testing.T) {
	for self, want := range map[string]string{"": "  cairnq ui --db d.db", "go run ./cmd/cairnq": "  go run ./cmd/cairnq ui --db d.db"} {
		var out bytes.Buffer
		printNext(&out, self, "d.db")
		if !strings.Contains(out.String(), want) {
			t.Errorf("printNext as %q:\n%s\nwant a line starting %q", self, out.String(), want)
		}
	}
}

// get shows a task for a person: its key, its times in UTC, and an error
// a succeeded task still holds as an earlier attempt's (newcomer trip 6).
func TestGetShowsKeyTimesAndAnEarlierError(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	ok(t, "migrate", "--db", db)
	c, err := cairnq.Open(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	task, err := c.Submit(context.Background(), "flaky", nil, &cairnq.SubmitOptions{Key: "order-42"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cairnq.NewWorker(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	w.Handle("flaky", func(context.Context, *cairnq.TaskContext) (any, error) {
		if calls++; calls == 1 {
			return nil, errors.New("first try fails")
		}
		return "ok", nil
	}, nil)
	waitFor(t, "the retry to succeed", func() bool { // the retry waits out its backoff
		done, err := w.WorkOne(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return len(done) == 1 && done[0].Status == cairnq.StatusSucceeded
	})
	r := ok(t, "get", "--db", db, task.ID)
	fields := map[string]string{}
	for _, line := range strings.Split(r.stdout, "\n") {
		if name, value, ok := strings.Cut(line, "  "); ok && !strings.HasPrefix(line, " ") {
			fields[name] = strings.TrimSpace(value)
		}
	}
	if fields["status"] != "succeeded, attempt 2 of 3" || fields["key"] != "order-42" {
		t.Errorf("get's status %q and key %q:\n%s", fields["status"], fields["key"], r.stdout)
	}
	for _, want := range []string{" UTC (", "every attempt's error (the newest ten, oldest first):\n  attempt 1, ",
		"error of an earlier attempt (the task then succeeded):", "first try fails", "result:\n  \"ok\""} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("get lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "_ms") {
		t.Errorf("get shows epoch milliseconds:\n%s", r.stdout)
	}
}

// stats counts the workflows' records as workflows, apart from the
// queues; list shows a record's attempts as a dash (newcomer trip 4).
func TestStatsAndListShowWorkflowsAsWorkflows(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	ok(t, "migrate", "--db", db)
	c, err := cairnq.Open(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.SubmitWorkflow(context.Background(), []cairnq.WorkflowStep{{Step: "a", Task: "wf.a"}}, nil); err != nil {
		t.Fatal(err)
	}
	r := ok(t, "stats", "--db", db)
	if strings.Contains(r.stdout, "cairnq.workflow ") || !strings.Contains(r.stdout, "workflows: 1 live, 0 succeeded, 0 failed, 0 canceled") {
		t.Errorf("stats:\n%s", r.stdout)
	}
	if r := ok(t, "list", "--db", db); strings.Contains(r.stdout, "2147483647") {
		t.Errorf("list shows a record's unbounded attempts:\n%s", r.stdout)
	}
}
