package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ncruces/go-sqlite3"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/internal/testkit/syncbuf"
)

// hostile is what anybody may name a task, queue, step, key or worker,
// or write in an error or a message: an OSC that sets the terminal's
// title (ended by BEL), a CSI that clears the screen and one that colors
// it, a carriage return, a tab, another C0 control, DEL, two C1 controls
// (NEL, and CSI on its own), a bidi override and isolate, a line
// separator, and a newline that would start a forged row.
const hostile = "\x1b]0;PWNED\x07\x1b[2J\x1b[31mred\r\t\x01\x7f\u0085\u009b2J\u202e\u2066\u2028\nforged-row"

// hostileShown is hostile as a text output shows it.
const hostileShown = `\x1b]0;PWNED\a\x1b[2J\x1b[31mred\r\t\x01\x7f\u0085\u009b2J\u202e\u2066\u2028\nforged-row`

// hostilePath is hostile as a file name may hold it: no '/'.
const hostilePath = "db\x1b]0;PWNED\x07\x1b[2J\r\t\u009b\u202e\nforged-row.db"

// assertNoControls fails t when out holds what a terminal acts on rather
// than shows: a C0 control other than the newline ending a line, DEL, a
// C1 control, a format character (the bidi controls), a line or
// paragraph separator, or invalid UTF-8.
func assertNoControls(t *testing.T, what, out string) {
	t.Helper()
	for i, r := range out {
		bad := r < 0x20 && r != '\n' || r >= 0x7f && r <= 0x9f || unicode.Is(unicode.Cf, r) ||
			r == '\u2028' || r == '\u2029' || r == utf8.RuneError
		if bad {
			t.Errorf("%s: %U raw at byte %d:\n%q", what, r, i, out)
			return
		}
	}
}

// assertTerminalSafe is assertNoControls, and fails t too when a line of
// out starts where a hostile value's newline would have split a row.
func assertTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	assertNoControls(t, what, out)
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "forged-row") {
			t.Errorf("%s: a value's newline split a line:\n%q", what, out)
			return
		}
	}
}

// assertLines fails t unless out has n lines.
func assertLines(t *testing.T, what, out string, n int) {
	t.Helper()
	if got := strings.Count(out, "\n"); got != n {
		t.Errorf("%s: %d lines, want %d:\n%s", what, got, n, out)
	}
}

// TestWorkflowGetEscapesHostileStepNames: workflow get printed its step
// names, task names and the steps they wait for raw, so a step named
// with an OSC and a CSI set the terminal's title and cleared the screen,
// and a newline split a row of the table.
func TestWorkflowGetEscapesHostileStepNames(t *testing.T) {
	ctx := t.Context()
	db := filepath.Join(t.TempDir(), "tasks.db")
	c, err := cairnq.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
		{Step: "a" + hostile, Task: "t" + hostile},
		{Step: "b" + hostile, Task: "t" + hostile, After: []string{"a" + hostile}},
	}, nil)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := ok(t, "workflow", "get", "--db", db, rec.ID)
	assertTerminalSafe(t, "workflow get", r.stdout)
	assertLines(t, "workflow get", r.stdout, 4) // the workflow, the header, two steps
	for _, want := range []string{"a" + hostileShown + "  queued", "b" + hostileShown + "  waiting", "t" + hostileShown + "  a" + hostileShown} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("workflow get lacks %q:\n%s", want, r.stdout)
		}
	}
}

// hostileDB is a database named hostilePath holding hostile values in
// every field a text output of the CLI shows.
type hostileDB struct {
	path                       string
	named, failed, odd, record string // task ids
}

// TestTextOutputsEscapeHostileValues runs every text output of the CLI on
// a database whose file name, task names, queues, keys, metadata, worker,
// error, message and ids hold hostile: none may reach stdout or stderr
// raw, none may split a line. get printed the C1 controls and bidi
// controls JSON leaves as they are; migrate, doctor, ui and demo printed
// the file name raw; cancel and retry the task's id.
func TestTextOutputsEscapeHostileValues(t *testing.T) {
	h := seedHostile(t)
	file := filepath.Join(t.TempDir(), "tasks.jsonl")
	line, _ := json.Marshal(map[string]any{"name": hostile, "queue": hostile, "key": "k" + hostile, "metadata": map[string]string{"m": hostile}})
	if err := os.WriteFile(file, append(line, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		code int
		args []string
	}{
		{exitOK, []string{"migrate"}},
		{exitOK, []string{"migrate", "--check"}},
		{exitOK, []string{"stats"}},
		{exitOK, []string{"stats", "--queue", hostile}},
		{exitOK, []string{"list", "--limit", "100"}},
		{exitOK, []string{"list", "--queue", hostile, "--name", hostile}},
		{exitOK, []string{"get", h.named}},
		{exitOK, []string{"get", h.failed}},
		{exitOK, []string{"get", h.odd}},
		{exitOK, []string{"workflow", "get", h.record}},
		{exitAttention, []string{"doctor", "--max-wait", "1ns"}},
		{exitOK, []string{"cancel", h.odd}},
		{exitOK, []string{"retry", h.odd}},
		{exitOK, []string{"submit", "--queue", hostile, "--key", hostile, hostile, `{"p": "\u001b\u202e"}`}},
		{exitOK, []string{"submit", "--from", file}},
		{exitOK, []string{"purge", "--queue", hostile, "--name", hostile}},
		{exitNotFound, []string{"get", "gone_" + hostile}},
		{exitError, []string{"workflow", "get", h.odd}},
		{exitError, []string{"retry", h.named}},
	} {
		r := cli(t, append(c.args, "--db", h.path)...)
		what := fmt.Sprintf("cairnq %q", c.args)
		if r.code != c.code {
			t.Errorf("%s: exit %d, want %d\n%s", what, r.code, c.code, r)
		}
		assertTerminalSafe(t, what+" (stdout)", r.stdout)
		// An error may run over several lines (reportError keeps them),
		// each escaped.
		assertNoControls(t, what+" (stderr)", r.stderr)
	}
	assertHostileShown(t, h)
	assertHostileWatch(t, h.path)
	assertHostileUI(t, h.path)
	assertHostileDemo(t)
}

// assertHostileShown checks that the text outputs show the hostile values
// escaped, and that get's JSON still holds them as they are.
func assertHostileShown(t *testing.T, h hostileDB) {
	t.Helper()
	var list struct{ Tasks []taskJSON }
	decode(t, ok(t, "list", "--json", "--limit", "100", "--db", h.path), &list)
	r := ok(t, "list", "--limit", "100", "--db", h.path)
	assertLines(t, "list", r.stdout, 1+len(list.Tasks))
	for _, args := range [][]string{{"list"}, {"stats"}, {"cancel", h.odd}, {"doctor"}, {"migrate"}} {
		r := cli(t, append(args, "--db", h.path)...)
		if !strings.Contains(r.stdout, hostileShown) && !strings.Contains(r.stdout, `\x1b]0;PWNED\a\x1b[2J\r\t\u009b\u202e\nforged-row.db`) {
			t.Errorf("cairnq %s shows no hostile value escaped:\n%s", args[0], r.stdout)
		}
	}
	var got struct {
		Name, Message string
		Metadata      struct{ M string }
		Error         struct{ Message string }
	}
	if err := json.Unmarshal([]byte(ok(t, "get", "--json", "--db", h.path, h.failed).stdout), &got); err != nil {
		t.Fatal(err)
	}
	if got.Name != hostile || got.Message != hostile || got.Metadata.M != hostile || got.Error.Message != hostile {
		t.Errorf("get's JSON does not hold the values as they are: %+v", got)
	}
}

// seedHostile makes the hostile database: a task named, queued, keyed and
// described by hostile values; one that failed for good with a hostile
// error and message, by a hostile worker; one running under that worker
// with its lease expired; one whose id is hostile (as another SDK or a
// hand-edited row may leave); and a workflow whose steps are named so.
func seedHostile(t *testing.T) hostileDB {
	ctx := t.Context()
	h := hostileDB{path: filepath.Join(t.TempDir(), hostilePath)}
	c, err := cairnq.Open(ctx, h.path, &cairnq.SQLiteOptions{Options: cairnq.Options{Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	meta := map[string]string{"m": hostile}
	submit := func(o *cairnq.SubmitOptions) string {
		t.Helper()
		task, err := c.Submit(ctx, hostile, map[string]string{"p": hostile}, o)
		if err != nil {
			t.Fatal(err)
		}
		return task.ID
	}
	h.named = submit(&cairnq.SubmitOptions{Queue: hostile, Key: hostile, Metadata: meta, CorrelationID: "c" + hostile})
	h.failed = submit(&cairnq.SubmitOptions{Queue: hostile, Metadata: meta, MaxAttempts: 1})
	failHostile(t, c)
	expired := submit(&cairnq.SubmitOptions{Queue: hostile})
	h.odd = submit(nil)
	rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
		{Step: "a" + hostile, Task: hostile},
		{Step: "b" + hostile, Task: hostile, After: []string{"a" + hostile}},
	}, &cairnq.WorkflowOptions{Metadata: meta})
	if err != nil {
		t.Fatal(err)
	}
	h.record = rec.ID
	past := time.Now().Add(-time.Minute).UnixMilli()
	sqliteExec(t, h.path, "UPDATE cairnq_tasks SET status = 'running', attempt = 1, worker_id = ?, lease_until_ms = ? WHERE id = ?", "w"+hostile, past, expired)
	sqliteExec(t, h.path, "UPDATE cairnq_tasks SET id = ? WHERE id = ?", "task_"+hostile, h.odd)
	h.odd = "task_" + hostile
	return h
}

// failHostile runs the one task due on hostile's queue with a worker
// named by hostile, which reports hostile as its message and fails with
// it.
func failHostile(t *testing.T, c *cairnq.Client) {
	t.Helper()
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{ID: "w" + hostile, Queues: []string{hostile}, RetryBackoff: time.Hour, RetryBackoffMax: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle(hostile, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		if err := tc.Message(ctx, hostile); err != nil {
			return nil, err
		}
		return nil, errors.New(hostile)
	}, nil)
	// Each call claims one of the two tasks due: the one allowed a single
	// attempt fails for good, the other waits an hour for its retry.
	for range 2 {
		if _, err := w.WorkOne(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// sqliteExec runs one statement on the SQLite file at path with args
// bound: a row no SDK call writes.
func sqliteExec(t *testing.T, path, query string, args ...any) {
	t.Helper()
	c, err := sqlite3.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, _, err := c.Prepare(query)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i, a := range args {
		switch v := a.(type) {
		case string:
			err = st.BindText(i+1, v)
		case int64:
			err = st.BindInt64(i+1, v)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Exec(); err != nil {
		t.Fatal(err)
	}
}

// assertHostileWatch runs watch on the hostile file, of every queue and
// of hostile's, until it prints its first line, which shows hostile's
// queue.
func assertHostileWatch(t *testing.T, db string) {
	t.Helper()
	for _, args := range [][]string{{}, {"--queue", hostile}} {
		out, errOut := runUntil(t, "start", append([]string{"watch", "--db", db}, args...)...)
		what := fmt.Sprintf("cairnq watch %q", args)
		assertTerminalSafe(t, what+" (stdout)", out)
		assertNoControls(t, what+" (stderr)", errOut)
		if !strings.Contains(out, hostileShown+": ") {
			t.Errorf("%s does not show the queue escaped:\n%s", what, out)
		}
	}
}

// runUntil runs the CLI on args until its stdout holds mark, then
// interrupts it, and returns its stdout and stderr.
func runUntil(t *testing.T, mark string, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, args, &env{out: &out, errOut: &errOut, getenv: func(string) string { return "" }})
	}()
	waitFor(t, fmt.Sprintf("%q from cairnq %s", mark, args[0]), func() bool { return strings.Contains(out.String(), mark) })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("cairnq %s: %v\n%q", args[0], err, errOut.String())
	}
	return out.String(), errOut.String()
}

// assertHostileUI runs ui on the hostile file until it prints where it
// serves.
func assertHostileUI(t *testing.T, db string) {
	t.Helper()
	out, errOut := runUntil(t, "interrupt to stop", "ui", "--db", db, "--addr", "127.0.0.1:0")
	assertTerminalSafe(t, "cairnq ui (stdout)", out)
	assertNoControls(t, "cairnq ui (stderr)", errOut)
}

// assertHostileDemo runs the demo on a file named by hostile.
func assertHostileDemo(t *testing.T) {
	t.Helper()
	r := ok(t, "demo", "--db", filepath.Join(t.TempDir(), hostilePath), "--n", "2", "--concurrency", "2")
	assertTerminalSafe(t, "cairnq demo (stdout)", r.stdout)
	assertNoControls(t, "cairnq demo (stderr)", r.stderr)
}

// TestPrintableJSON: get's JSON escapes what encoding/json leaves raw (DEL,
// C1 and bidi controls, a format character beyond U+FFFF as a surrogate
// pair, a byte of invalid UTF-8) and still parses to the same values.
func TestPrintableJSON(t *testing.T) {
	in := []byte("{\n  \"a\": \"x\x7f\u0085\u202e\U000e0001 ünï \\u001b\xff\"\n}\n")
	want := "{\n  \"a\": \"x\\u007f\\u0085\\u202e\\udb40\\udc01 ünï \\u001b\\ufffd\"\n}\n"
	got := printableJSON(in)
	if string(got) != want {
		t.Fatalf("printableJSON = %q, want %q", got, want)
	}
	var before, after map[string]string
	if err := json.Unmarshal(in, &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &after); err != nil || after["a"] != before["a"] {
		t.Errorf("printableJSON changed the value: %q, want %q (%v)", after["a"], before["a"], err)
	}
}
