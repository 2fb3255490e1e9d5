package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/internal/testkit/syncbuf"
)

// cliStdin is cli with stdin reading in.
func cliStdin(t *testing.T, in string, args ...string) result {
	t.Helper()
	var out, errOut syncbuf.Buffer
	err := run(t.Context(), args, &env{in: strings.NewReader(in), out: &out, errOut: &errOut})
	if err != nil {
		reportError(&errOut, err)
	}
	return result{out.String(), errOut.String(), err, exitCode(err)}
}

// writeLines writes lines as a file of t's, one a line, and returns its
// path.
func writeLines(t *testing.T, lines []string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// fullTaskJSON is taskJSON with the fields a line of --from may set.
type fullTaskJSON struct {
	taskJSON
	Metadata      json.RawMessage `json:"metadata"`
	ParentID      *string         `json:"parent_id"`
	RootID        string          `json:"root_id"`
	CorrelationID *string         `json:"correlation_id"`
}

// allTasks is every task of db, by id.
func allTasks(t *testing.T, db string) map[string]fullTaskJSON {
	t.Helper()
	var list struct {
		Tasks []fullTaskJSON `json:"tasks"`
	}
	decode(t, ok(t, "list", "--db", db, "--json", "--limit", "100000"), &list)
	m := make(map[string]fullTaskJSON, len(list.Tasks))
	for _, task := range list.Tasks {
		m[task.ID] = task
	}
	return m
}

// ids is stdout's lines, each an id.
func ids(t *testing.T, r result) []string {
	t.Helper()
	if r.stdout == "" {
		return nil
	}
	out := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	for _, id := range out {
		if !strings.HasPrefix(id, "task_") {
			t.Fatalf("stdout line %q is not an id\n%s", id, r)
		}
	}
	return out
}

var fromProgress = regexp.MustCompile(`^submitted \d+ tasks?, lines? [0-9-]+$`)

// A file of 2,500 lines, in three batches, makes 2,500 tasks in the file's
// order, each with the fields its line gave and the flags' values where it
// gave none; blank lines are skipped but counted.
func TestSubmitFromFile(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ok(t, "migrate", "--db", b.db)
		parent := strings.TrimSpace(ok(t, "submit", "--db", b.db, "parent").stdout)
		var lines []string
		for i := range 2500 {
			l := fmt.Sprintf(`{"name": "t%d", "payload": {"i": %d}`, i, i)
			switch i % 4 {
			case 0:
				l += fmt.Sprintf(`, "queue": "q%d", "priority": %d, "max_attempts": %d`, i%3, i%5, 1+i%7)
			case 1:
				l += fmt.Sprintf(`, "delay": "1h", "metadata": {"m": %d}, "correlation_id": "c%d"`, i, i)
			case 2:
				l += fmt.Sprintf(`, "parent_id": %q, "root_id": %q, "priority": 0`, parent, parent)
			}
			lines = append(lines, l+"}")
			if i == 10 || i == 1999 {
				lines = append(lines, "", "  \t")
			}
		}
		r := ok(t, "submit", "--db", b.db, "--from", writeLines(t, lines), "--queue", "dq", "--priority", "9", "--max-attempts", "5")
		got := ids(t, r)
		if len(got) != 2500 {
			t.Fatalf("%d ids for 2500 lines", len(got))
		}
		if !strings.HasSuffix(r.stderr, "submitted 2500 tasks, lines 1-2504\n") {
			t.Errorf("stderr does not end with the final progress line:\n%s", r.stderr)
		}
		all := allTasks(t, b.db)
		if len(all) != 2501 {
			t.Errorf("%d tasks in the database, want 2501", len(all))
		}
		for i, id := range got {
			task, found := all[id]
			if !found {
				t.Fatalf("line %d's task %s is not in the database", i, id)
			}
			queue, prio, attempts := "dq", 9, 5
			corr, par, root, meta := "", "", id, `{}`
			switch i % 4 {
			case 0:
				queue, prio, attempts = fmt.Sprintf("q%d", i%3), i%5, 1+i%7
			case 1:
				meta, corr = fmt.Sprintf(`{"m":%d}`, i), fmt.Sprintf("c%d", i)
				if d := task.RunAtMs - task.CreatedAtMs; d < 3600_000-1 || d > 3600_000+60_000 {
					t.Errorf("line %d: due %d ms after its creation, want an hour", i, d)
				}
			case 2:
				prio, par, root = 0, parent, parent
			}
			if task.Name != fmt.Sprintf("t%d", i) || string(task.Payload) != fmt.Sprintf(`{"i":%d}`, i) || task.Status != "queued" ||
				task.Queue != queue || task.Priority != prio || task.MaxAttempts != attempts || string(task.Metadata) != meta ||
				deref(task.CorrelationID) != corr || deref(task.ParentID) != par || task.RootID != root {
				t.Fatalf("line %d: task %+v", i, task)
			}
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Keys and conflicts do what the same submits one after another would,
// across the batches as within one; a key taken under reject stops the
// run with exit 1, after what the batches before it committed.
func TestSubmitFromKeys(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ok(t, "migrate", "--db", b.db)
		lines := []string{
			`{"name": "k", "key": "a"}`,
			`{"name": "k", "key": "a"}`,                        // reuse: the first
			`{"name": "k", "key": "a", "conflict": "replace"}`, // the first canceled
			`{"name": "k", "key": "b", "conflict": "reject"}`,
			`{"name": "k", "key": "a", "conflict": "reuse"}`, // the third
		}
		for _, batch := range []string{"1000", "2", "1"} {
			t.Run("batch "+batch, func(t *testing.T) {
				keyed := make([]string, len(lines))
				for i, l := range lines {
					keyed[i] = strings.ReplaceAll(l, `"key": "`, `"key": "`+batch+`-`)
				}
				got := ids(t, ok(t, "submit", "--db", b.db, "--from", writeLines(t, keyed), "--batch", batch))
				if len(got) != 5 || got[1] != got[0] || got[2] == got[0] || got[3] == got[2] || got[4] != got[2] {
					t.Fatalf("ids %v: want 1 = 0, 2 new, 3 new, 4 = 2", got)
				}
				all := allTasks(t, b.db)
				if all[got[0]].Status != "canceled" || all[got[2]].Status != "queued" || all[got[3]].Status != "queued" {
					t.Errorf("statuses: %s %s %s; want canceled, queued, queued", all[got[0]].Status, all[got[2]].Status, all[got[3]].Status)
				}

				// The reject-keyed line again, after a new line.
				before := len(all)
				r := cli(t, "submit", "--db", b.db, "--batch", batch, "--from",
					writeLines(t, []string{`{"name": "k2"}`, keyed[3]}))
				var ae *cairnq.AlreadyExistsError
				if r.code != exitError || !errors.As(r.err, &ae) || ae.TaskID != got[3] {
					t.Fatalf("a taken reject key: want exit 1 and an *AlreadyExistsError naming %s\n%s", got[3], r)
				}
				wantMsg, wrote := "nothing submitted; line 2: ", 0
				if batch == "1" {
					wantMsg, wrote = "line 1 submitted (1 task); line 2: ", 1
				}
				if !strings.Contains(r.stderr, "cairnq: submit --from: "+wantMsg) || len(ids(t, r)) != wrote {
					t.Errorf("want %q and %d ids\n%s", wantMsg, wrote, r)
				}
				if n := len(allTasks(t, b.db)); n != before+wrote {
					t.Errorf("%d tasks written, want %d", n-before, wrote)
				}
			})
		}
	})
}

// A bad line stops the run with its line number: the batches before it
// are committed, and said to be, nothing of its own batch is, and stdout
// holds the committed ids alone.
func TestSubmitFromBadLine(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ok(t, "migrate", "--db", b.db)
		count := func() int {
			n, _ := strconv.Atoi(b.text(t, "SELECT count(*) FROM cairnq_tasks"))
			return n
		}
		for _, c := range []struct {
			n, batch, at int // at: the bad line, from 1
			line, says   string
		}{
			// 2,500 lines in batches of 1,000: two committed.
			{2500, defaultBatch, 2417, `{"name": "x", "payload": {`, "not valid JSON"},
			{2500, defaultBatch, 2417, `{"name": ""}`, "invalid name"},
			{2500, defaultBatch, 1, `["x"]`, "not a JSON object"},
			{5, 2, 4, `{"name": "x", "max_attempt": 2}`, `unknown field "max_attempt"`},
			{5, 2, 4, `{"name": "x", "priority": "high"}`, "priority is a JSON string, want a whole number"},
			{5, 2, 4, `{"name": "x", "delay": "soon"}`, `delay "soon" is not a duration`},
			{5, 2, 4, `{"name": "x"} {"name": "y"}`, "more than one JSON value"},
			// Refused by SubmitMany: the item's error, by its line.
			{5, 2, 4, `{"name": "x", "key": "k", "conflict": "sometimes"}`, "invalid conflict"},
			{5, 2, 3, `{"name": "x", "metadata": [1]}`, "invalid metadata"},
		} {
			lines := make([]string, c.n)
			for i := range lines {
				lines[i] = fmt.Sprintf(`{"name": "ok%d"}`, i)
			}
			lines[c.at-1] = c.line
			before := count()
			r := cli(t, "submit", "--db", b.db, "--batch", strconv.Itoa(c.batch), "--from", writeLines(t, lines))
			committed := (c.at - 1) / c.batch * c.batch
			done := "nothing submitted"
			if committed > 0 {
				done = fmt.Sprintf("lines 1-%d submitted (%d tasks)", committed, committed)
			}
			wantMsg := fmt.Sprintf("cairnq: submit --from: %s; line %d: ", done, c.at)
			if r.code != exitUsage || !strings.Contains(r.stderr, wantMsg) || !strings.Contains(r.stderr, c.says) {
				t.Errorf("line %d %s: want exit 2 and %q ... %q\n%s", c.at, c.line, wantMsg, c.says, r)
				continue
			}
			got := ids(t, r)
			if len(got) != committed || count() != before+committed {
				t.Errorf("line %d %s: %d ids printed, %d tasks written; want %d", c.at, c.line, len(got), count()-before, committed)
			}
			if c.n < 2500 || c.at == 1 {
				continue
			}
			all := allTasks(t, b.db)
			for i, id := range got {
				if all[id].Name != fmt.Sprintf("ok%d", i) {
					t.Fatalf("id %d is task %+v", i, all[id])
				}
			}
		}
	})
}

// - reads stdin; a blank input submits nothing and prints nothing; --json
// prints each task on a line of its own, in the lines' order.
func TestSubmitFromStdinAndJSON(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	ok(t, "migrate", "--db", db)
	for _, in := range []string{"", "\n\n  \n", "\r\n"} {
		r := cliStdin(t, in, "submit", "--db", db, "--from", "-")
		if r.code != exitOK || r.stdout != "" || r.stderr != "" {
			t.Errorf("blank stdin %q: want exit 0 and no output\n%s", in, r)
		}
	}
	blank := writeLines(t, nil)
	if r := ok(t, "submit", "--db", db, "--from", blank, "--json"); r.stdout != "" || r.stderr != "" {
		t.Errorf("a blank file: want no output\n%s", r)
	}
	if n := len(allTasks(t, db)); n != 0 {
		t.Errorf("blank input wrote %d tasks", n)
	}

	in := "{\"name\": \"a\", \"payload\": [1]}\r\n\n{\"name\": \"b\", \"queue\": \"q\"}\n{\"name\": \"c\", \"payload\": null}" // no final newline
	r := cliStdin(t, in, "submit", "--db", db, "--from", "-", "--json", "--batch", "2")
	want(t, r, exitOK, "submit --from - --json")
	var tasks []fullTaskJSON
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	for {
		var task fullTaskJSON
		if err := dec.Decode(&task); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("stdout: %v\n%s", err, r)
		}
		tasks = append(tasks, task)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(tasks) != 3 || len(lines) != 3 || tasks[0].Name != "a" || string(tasks[0].Payload) != "[1]" ||
		tasks[1].Name != "b" || tasks[1].Queue != "q" || tasks[2].Name != "c" || string(tasks[2].Payload) != "null" {
		t.Errorf("--json: want the three tasks, one a line\n%s", r)
	}
	all := allTasks(t, db)
	for _, task := range tasks {
		if all[task.ID].Name != task.Name || all[task.ID].Status != "queued" {
			t.Errorf("task %+v is %+v in the database", task, all[task.ID])
		}
	}
	// The first batch's line, then the total.
	if r.stderr != "submitted 2 tasks, lines 1-3\nsubmitted 3 tasks, lines 1-4\n" {
		t.Errorf("stderr: want plain progress lines ending with the total\n%s", r.stderr)
	}
}

// What submit --from refuses before it reads a line: exit 2, nothing
// written.
func TestSubmitFromUsage(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	ok(t, "migrate", "--db", db)
	file := writeLines(t, []string{`{"name": "x"}`})
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--from", file, "name"}, "--from takes no NAME"},
		{[]string{"--from", file, "--key", "k"}, "--key names one task"},
		{[]string{"--from", file, "--batch", "0"}, "--batch must be 1 to 10000, got 0"},
		{[]string{"--from", file, "--batch", "10001"}, "--batch must be 1 to 10000"},
		{[]string{"--from="}, "--from needs a file"},
		{[]string{"name", "--batch", "5"}, "--batch is for --from"},
		{nil, "takes NAME and an optional JSON payload, or --from FILE"},
	} {
		args := append([]string{"submit", "--db", db}, c.args...)
		if r := cli(t, args...); r.code != exitUsage || !strings.Contains(r.stderr, c.says) {
			t.Errorf("cairnq %s: want exit 2 saying %q\n%s", strings.Join(args, " "), c.says, r)
		}
	}
	if r := cli(t, "submit", "--db", db, "--from", filepath.Join(t.TempDir(), "missing.jsonl")); r.code != exitError ||
		!strings.Contains(r.stderr, "cairnq: submit --from: open ") || !strings.Contains(r.stderr, "no such file") {
		t.Errorf("a missing file: want exit 1 naming it\n%s", r)
	}
	if n := len(allTasks(t, db)); n != 0 {
		t.Errorf("refused command lines wrote %d tasks", n)
	}
}

// On a terminal the progress line is redrawn in place on stderr, and the
// ids printed on the same terminal each start a line of their own: the
// progress line is cleared before them and drawn again after.
func TestSubmitFromProgressOnATerminal(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	ok(t, "migrate", "--db", db)
	var lines []string
	for i := range 250 {
		lines = append(lines, fmt.Sprintf(`{"name": "t%d"}`, i))
	}
	file := writeLines(t, lines)

	var term syncbuf.Buffer // stdout and stderr on one terminal
	err := run(t.Context(), []string{"submit", "--db", db, "--from", file, "--batch", "100"},
		&env{out: &term, errOut: &term, isTerminal: func(io.Writer) bool { return true }})
	if err != nil {
		t.Fatalf("submit --from: %v\n%q", err, term.String())
	}
	if !strings.Contains(term.String(), "\r\033[K") {
		t.Errorf("the progress line is not drawn in place:\n%q", term.String())
	}
	shown := screen(term.String())
	var got []string
	for i, l := range shown {
		switch {
		case strings.HasPrefix(l, "task_") && len(l) == len("task_")+26:
			got = append(got, l)
		case i == len(shown)-1 && l == "submitted 250 tasks, lines 1-250":
		default:
			t.Errorf("screen line %d is neither an id nor the final progress line: %q", i, l)
		}
	}
	if len(got) != 250 {
		t.Errorf("%d ids on the screen, want 250:\n%s", len(got), strings.Join(shown, "\n"))
	}
	all := allTasks(t, db)
	for i, id := range got {
		if all[id].Name != fmt.Sprintf("t%d", i) {
			t.Fatalf("screen id %d is task %+v", i, all[id])
		}
	}

	// Only stderr a terminal: stdout holds the ids alone.
	var out, errOut syncbuf.Buffer
	err = run(t.Context(), []string{"submit", "--db", db, "--from", file, "--batch", "100"},
		&env{out: &out, errOut: &errOut, isTerminal: func(w io.Writer) bool { return w == &errOut }})
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out.String(), "\r\033") || strings.Count(out.String(), "\n") != 250 {
		t.Errorf("stdout holds more than the 250 ids:\n%q", out.String())
	}
	if s := screen(errOut.String()); len(s) != 1 || s[0] != "submitted 250 tasks, lines 1-250" {
		t.Errorf("stderr shows %q, want the final progress line", s)
	}

	// Off a terminal: plain progress lines, the last the total.
	r := ok(t, "submit", "--db", db, "--from", file, "--batch", "100")
	errLines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	for _, l := range errLines {
		if !fromProgress.MatchString(l) {
			t.Errorf("stderr line %q is not a progress line", l)
		}
	}
	if errLines[len(errLines)-1] != "submitted 250 tasks, lines 1-250" || strings.ContainsAny(r.stderr+r.stdout, "\r\033") {
		t.Errorf("off a terminal: want plain lines ending with the total\n%s", r)
	}
}

// An interrupt while stdin waits for its writer ends the command, as an
// error, with nothing of the batch it was reading: before, the closed
// input could read as its end, and the command exit 0.
func TestSubmitFromInterruptedStdin(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	ok(t, "migrate", "--db", db)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	wrote := make(chan error, 1)
	go func() {
		// The pipe returns once the command has read the line; it then
		// waits for the next, and the interrupt comes.
		_, err := io.WriteString(pw, `{"name": "a"}`+"\n")
		cancel()
		wrote <- err
	}()
	var out, errOut syncbuf.Buffer
	err := run(ctx, []string{"submit", "--db", db, "--from", "-"}, &env{in: pr, out: &out, errOut: &errOut})
	if werr := <-wrote; werr != nil {
		t.Fatal(werr)
	}
	if err != nil {
		reportError(&errOut, err)
	}
	if !errors.Is(err, context.Canceled) || exitCode(err) != exitError || out.String() != "" ||
		!strings.Contains(errOut.String(), "cairnq: submit --from: nothing submitted; interrupted reading line 2: context canceled") {
		t.Errorf("interrupted: err %v (exit %d)\nstdout %q\nstderr %q", err, exitCode(err), out.String(), errOut.String())
	}
	if n := len(allTasks(t, db)); n != 0 {
		t.Errorf("an interrupted run wrote %d tasks", n)
	}
}

// failingWriter refuses every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// A batch committed but not printed is said to be submitted: stdout
// failing does not undo it.
func TestSubmitFromStdoutFails(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	ok(t, "migrate", "--db", db)
	var errOut syncbuf.Buffer
	err := run(t.Context(), []string{"submit", "--db", db, "--batch", "2", "--from", writeLines(t, []string{`{"name": "a"}`, `{"name": "b"}`, `{"name": "c"}`})},
		&env{out: failingWriter{}, errOut: &errOut})
	reportError(&errOut, err)
	if exitCode(err) != exitError || !strings.Contains(errOut.String(), "cairnq: submit --from: lines 1-2 submitted (2 tasks); printing lines 1-2: disk full") {
		t.Errorf("stdout failing: err %v\nstderr %q", err, errOut.String())
	}
	if n := len(allTasks(t, db)); n != 2 {
		t.Errorf("%d tasks written, want the first batch's 2", n)
	}
}

// Rerunning submit --from with the same keys says the tasks were there
// already, rather than that it submitted them.
func TestSubmitFromRerunSaysExisting(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) { submitFromRerun(t, b.db) })
}

func submitFromRerun(t *testing.T, db string) {
	ok(t, "migrate", "--db", db)
	file := filepath.Join(t.TempDir(), "lines.jsonl")
	if err := os.WriteFile(file, []byte(`{"name":"a","key":"k1"}
{"name":"a","key":"k2"}
{"name":"a"}
{"name":"a","key":"k1"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	// The fourth line's key is the first's: its task is there already.
	if r := ok(t, "submit", "--db", db, "--from", file); !strings.HasSuffix(r.stderr, "submitted 4 tasks, lines 1-4: 3 new, 1 already there under their keys\n") {
		t.Errorf("first run: %q", r.stderr)
	}
	if r := ok(t, "submit", "--db", db, "--from", file); !strings.HasSuffix(r.stderr, "submitted 4 tasks, lines 1-4: 1 new, 3 already there under their keys\n") {
		t.Errorf("rerun: %q", r.stderr)
	}
}
