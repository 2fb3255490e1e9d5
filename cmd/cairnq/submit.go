package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/internal/engine"
)

const submitHelp = `Submits a task named NAME with JSON as its payload (default {}) and
prints its id (--json: the task). The database must exist: 'cairnq
migrate' creates one.

With --from FILE (- for stdin) it takes no NAME and submits a task per
line of FILE, each line a JSON object of which only name is required:

  {"name": "render", "payload": {"page": 1}, "queue": "gpu", "key": "page-1",
   "conflict": "reuse", "priority": 0, "max_attempts": 3, "delay": "90s",
   "metadata": {}, "parent_id": ID, "root_id": ID, "correlation_id": ID}

conflict is what a taken key does: reuse (the default), reuse-succeeded,
reject or replace; delay is a duration as --delay takes it. --queue,
--priority, --max-attempts and --delay are the values of a line that
names none; --key, which names one task, is refused. Blank lines are
skipped. The lines go in batches of --batch, each batch one transaction,
in the file's order, so the tasks are what the same submits one after
another would make, keys included. The ids are printed in the lines'
order, a batch's once it is committed (--json: the task, one per line),
and a progress line goes to stderr (redrawn in place on a terminal, a
line a second otherwise), which says how many tasks a line's key found
already there, as a rerun of the same file finds them: "submitted 5000
tasks, lines 1-5000: 0 new, 5000 already there under their keys". A line that is not a task (not a JSON object,
an unknown field, a bad name or conflict) stops the command with its
line number, exit 2 (exit 1 for a key taken under reject); nothing of
its batch is written, and the message says what the batches before it
submitted: "lines 1-2000 submitted (2000 tasks); line 2417: ...".

` + taskJSONHelp

// defaultBatch is how many lines of --from go in one SubmitMany.
const defaultBatch = 1000

func cmdSubmit(ctx context.Context, e *env, args []string) error {
	fs := e.dbFlags()
	var o cairnq.SubmitOptions
	fs.StringVar(&o.Queue, "queue", "", "`queue` (default \"default\")")
	fs.StringVar(&o.Key, "key", "", "deduplication `key`")
	fs.IntVar(&o.Priority, "priority", 0, "higher runs first")
	fs.IntVar(&o.MaxAttempts, "max-attempts", 0, "attempts before the task fails for good (default 3)")
	fs.DurationVar(&o.Delay, "delay", 0, "defer the first claim by this long")
	from := fs.String("from", "", "submit a task per line of this JSON Lines `file` (- for stdin) instead of NAME")
	batch := fs.Int("batch", defaultBatch, fmt.Sprintf("with --from, the lines submitted in one transaction (1 to %d)", cairnq.MaxSubmitMany))
	if err := e.parse(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["from"] {
		return e.submitFrom(ctx, fs, *from, *batch, o)
	}
	switch {
	case set["batch"]:
		return e.usageError("--batch is for --from")
	case fs.NArg() == 0:
		return e.usageError("takes NAME and an optional JSON payload, or --from FILE")
	}
	var payload any = map[string]any{}
	if fs.NArg() == 2 {
		if !json.Valid([]byte(fs.Arg(1))) {
			return e.usageError("the payload is not valid JSON")
		}
		payload = json.RawMessage(fs.Arg(1))
	}
	c, err := e.client(ctx)
	if err != nil {
		return err
	}
	t, err := c.Submit(ctx, fs.Arg(0), payload, &o)
	if err != nil {
		return err
	}
	if e.db.json {
		return writeJSON(e.out, t)
	}
	fmt.Fprintln(e.out, t.ID)
	return nil
}

// submitFrom is submit --from: the lines of path (stdin for "-") in
// batches of batch, each line's options over defaults.
func (e *env) submitFrom(ctx context.Context, fs *flag.FlagSet, path string, batch int, defaults cairnq.SubmitOptions) error {
	switch {
	case fs.NArg() > 0:
		return e.usageError("--from takes no NAME or JSON: each line names its task")
	case path == "":
		return e.usageError("--from needs a file, or - for stdin")
	case batch < 1 || batch > cairnq.MaxSubmitMany:
		return e.usageError("--batch must be 1 to %d, got %d", cairnq.MaxSubmitMany, batch)
	case defaults.Key != "":
		return e.usageError("--key names one task; give each line its own \"key\"")
	}
	in, err := e.input(path)
	if err != nil {
		return err
	}
	defer in.Close()
	// A read of stdin waits for its writer; an interrupt ends it.
	stop := context.AfterFunc(ctx, func() { in.Close() })
	defer stop()
	c, err := e.client(ctx)
	if err != nil {
		return err
	}
	r := &fromRun{
		c: c, json: e.db.json, batch: batch, defaults: defaults,
		lines: lineReader{r: bufio.NewReader(in)},
		// The ids are written through the progress line, which a terminal
		// holding both redraws below them.
		live: &liveLine{out: e.errOut, logOut: e.out, tty: e.terminal(e.errOut)},
	}
	err = r.run(ctx)
	r.live.end()
	return err
}

// input opens path for reading, or stdin for "-".
func (e *env) input(path string) (io.ReadCloser, error) {
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("submit --from: %w", err)
		}
		return f, nil
	}
	if rc, ok := e.in.(io.ReadCloser); ok {
		return rc, nil
	}
	if e.in == nil {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	return io.NopCloser(e.in), nil
}

// fromRun is one submit --from: the batches submitted so far, and the
// lines still to read.
type fromRun struct {
	c        *cairnq.Client
	json     bool
	batch    int
	defaults cairnq.SubmitOptions
	lines    lineReader
	live     *liveLine

	through  int             // the last line of the batches committed
	tasks    int             // the tasks they returned
	existing int             // of those, the ones a key found already there
	seen     map[string]bool // the ids returned so far, for a key repeated in the file
}

func (r *fromRun) run(ctx context.Context) error {
	for {
		items, at, err := r.read(ctx)
		if len(items) > 0 {
			if err := r.submit(ctx, items, at); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			if r.tasks > 0 {
				r.live.set(r.progress(), true)
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// progress is the progress line.
func (r *fromRun) progress() string {
	if r.existing == 0 {
		return fmt.Sprintf("submitted %s, %s", plural(r.tasks, "task"), lineRange(1, r.through))
	}
	return fmt.Sprintf("submitted %s, %s: %d new, %d already there under their keys",
		plural(r.tasks, "task"), lineRange(1, r.through), r.tasks-r.existing, r.existing)
}

// lineRange is "line 7" or "lines 1-7".
func lineRange(from, to int) string {
	if from == to {
		return fmt.Sprintf("line %d", from)
	}
	return fmt.Sprintf("lines %d-%d", from, to)
}

// read reads the next batch: its items and each one's line number. It
// returns io.EOF with the last batch (which may be empty), or, with
// nothing of the batch, the error of a line that is not a task or of
// reading, or ctx's once it is done.
func (r *fromRun) read(ctx context.Context) (items []cairnq.SubmitItem, at []int, err error) {
	for len(items) < r.batch {
		line, n, err := r.lines.next()
		switch {
		case ctx.Err() != nil:
			// An interrupt closed the input, which may read as its end.
			return nil, nil, r.failed(fmt.Sprintf("interrupted reading line %d", r.lines.n+1), ctx.Err())
		case errors.Is(err, io.EOF):
			return items, at, err
		case err != nil:
			return nil, nil, r.failed(fmt.Sprintf("after line %d", r.lines.n), err)
		}
		it, err := parseLine(line, r.defaults)
		if err != nil {
			return nil, nil, r.failed(fmt.Sprintf("line %d", n), err)
		}
		items, at = append(items, it), append(at, n)
	}
	return items, at, nil
}

// submit submits one batch and writes its tasks.
func (r *fromRun) submit(ctx context.Context, items []cairnq.SubmitItem, at []int) error {
	// A task created before the batch began, by the database's clock,
	// is one a key found there (a rerun of the same file). Times are in
	// whole milliseconds: one created in the millisecond the batch began,
	// or the one before, counts as new.
	began, err := engine.Of(r.c.Store()).ConsoleNow(ctx)
	began = began.Truncate(time.Millisecond).Add(-time.Millisecond)
	if err != nil {
		return r.failed(lineRange(at[0], at[len(at)-1]), err)
	}
	tasks, err := r.c.SubmitMany(ctx, items)
	if err != nil {
		var ie *cairnq.SubmitItemError
		if errors.As(err, &ie) && ie.Index >= 0 && ie.Index < len(at) {
			return r.failed(fmt.Sprintf("line %d", at[ie.Index]), ie.Err)
		}
		return r.failed(lineRange(at[0], at[len(at)-1]), err)
	}
	r.through, r.tasks = at[len(at)-1], r.tasks+len(tasks)
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	for _, t := range tasks {
		if t.CreatedAt.Before(began) || r.seen[t.ID] {
			r.existing++
		}
		r.seen[t.ID] = true
	}
	var out bytes.Buffer
	for _, t := range tasks {
		if !r.json {
			fmt.Fprintln(&out, t.ID)
		} else if err := writeJSON(&out, t); err != nil {
			return r.failed("printing "+lineRange(at[0], at[len(at)-1]), err)
		}
	}
	if _, err := r.live.Write(out.Bytes()); err != nil {
		return r.failed("printing "+lineRange(at[0], at[len(at)-1]), err)
	}
	r.live.set(r.progress(), false)
	return nil
}

// failed is the error that stopped the run at where, saying what the
// batches before it submitted.
func (r *fromRun) failed(where string, err error) error {
	done := "nothing submitted"
	if r.tasks > 0 {
		done = fmt.Sprintf("%s submitted (%s)", lineRange(1, r.through), plural(r.tasks, "task"))
	}
	return &fromError{prefix: fmt.Sprintf("submit --from: %s; %s: ", done, where), err: err}
}

// fromError is an error of submit --from, after what was submitted. Its
// exit status is its cause's.
type fromError struct {
	prefix string
	err    error
}

func (e *fromError) Error() string { return e.prefix + e.err.Error() }
func (e *fromError) Unwrap() error { return e.err }

// lineReader reads the lines of --from that are not blank, counting every
// line.
type lineReader struct {
	r *bufio.Reader
	n int // the lines read so far
}

// next returns the next line that is not blank and its number, or io.EOF.
func (l *lineReader) next() ([]byte, int, error) {
	for {
		line, err := l.r.ReadBytes('\n')
		if len(line) > 0 {
			l.n++
			if b := bytes.TrimSpace(line); len(b) > 0 {
				return b, l.n, nil
			}
		}
		if err != nil {
			return nil, l.n, err
		}
	}
}

// fromLine is one line of --from, in the protocol's names for submit's
// arguments. A pointer is an option the line may leave to the flags.
type fromLine struct {
	Name          string          `json:"name"`
	Payload       json.RawMessage `json:"payload"`
	Queue         *string         `json:"queue"`
	Key           string          `json:"key"`
	Conflict      string          `json:"conflict"`
	Priority      *int            `json:"priority"`
	MaxAttempts   *int            `json:"max_attempts"`
	Delay         *string         `json:"delay"`
	Metadata      json.RawMessage `json:"metadata"`
	ParentID      string          `json:"parent_id"`
	RootID        string          `json:"root_id"`
	CorrelationID string          `json:"correlation_id"`
}

// parseLine reads one line of --from as an item, its options over
// defaults. What the line holds is checked by SubmitMany; what is not a
// line of --from is a usage error here.
func parseLine(b []byte, defaults cairnq.SubmitOptions) (cairnq.SubmitItem, error) {
	var l fromLine
	if b[0] != '{' {
		return cairnq.SubmitItem{}, lineError("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return cairnq.SubmitItem{}, lineError(jsonProblem(err))
	}
	if dec.More() {
		return cairnq.SubmitItem{}, lineError("more than one JSON value")
	}
	o := defaults
	if l.Queue != nil {
		o.Queue = *l.Queue
	}
	if l.Priority != nil {
		o.Priority = *l.Priority
	}
	if l.MaxAttempts != nil {
		o.MaxAttempts = *l.MaxAttempts
	}
	if l.Delay != nil {
		d, err := time.ParseDuration(*l.Delay)
		if err != nil {
			return cairnq.SubmitItem{}, lineError(fmt.Sprintf("delay %q is not a duration (90s, 5m, 1h30m)", *l.Delay))
		}
		o.Delay = d
	}
	o.Key, o.Conflict = l.Key, cairnq.Conflict(l.Conflict)
	if len(l.Metadata) > 0 && string(l.Metadata) != "null" {
		o.Metadata = l.Metadata
	}
	o.ParentID, o.RootID, o.CorrelationID = l.ParentID, l.RootID, l.CorrelationID
	it := cairnq.SubmitItem{Name: l.Name, Options: o}
	if l.Payload != nil {
		it.Payload = l.Payload
	}
	return it, nil
}

// jsonProblem says what is wrong with a line, in its own field names.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return fmt.Sprintf("%s is a JSON %s, want a %s", te.Field, te.Value, jsonKind(te.Type.Kind().String()))
	case errors.As(err, &se):
		return "not valid JSON: " + se.Error()
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "not valid JSON: the object does not end"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKind names a Go kind as JSON does.
func jsonKind(k string) string {
	if k == "int" {
		return "whole number"
	}
	return k
}
