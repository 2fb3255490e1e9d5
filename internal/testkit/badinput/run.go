package badinput

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
)

// Run runs every row as its own subtest, in parallel, each on a client
// open gives it on a fresh, empty database.
func Run(t *testing.T, open func(t *testing.T) *cairnq.Client) {
	cases := Cases()
	if len(cases) < 40 {
		t.Fatalf("the table has %d rows, want at least 40", len(cases))
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		if seen[tc.Name] {
			t.Fatalf("two rows named %q", tc.Name)
		}
		seen[tc.Name] = true
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			runCase(t, open(t), tc)
		})
	}
}

func runCase(t *testing.T, c *cairnq.Client, tc Case) {
	ctx := context.Background()
	e := seed(t, ctx, c)
	before := snapshot(t, ctx, c)

	out, err := tc.Call(ctx, e)
	var se *setupError
	if errors.As(err, &se) {
		t.Fatal(se)
	}
	checkError(t, tc, err)

	after := snapshot(t, ctx, c)
	adds := tc.Adds
	for id, was := range before.tasks {
		now, ok := after.tasks[id]
		switch {
		case !ok:
			t.Errorf("task %s is gone after the call", id)
		case !bytes.Equal(now, was):
			t.Errorf("task %s changed:\nbefore %s\nafter  %s", id, clip(was), clip(now))
		}
	}
	if got := len(after.tasks) - len(before.tasks); got != adds {
		t.Errorf("the call left %d new tasks, want %d", got, adds)
		for id, task := range after.tasks {
			if _, ok := before.tasks[id]; !ok {
				t.Logf("new task: %s", clip(task))
			}
		}
	}
	if got := after.total - before.total; got != adds {
		t.Errorf("Stats counts %d more tasks after the call, want %d", got, adds)
	}
	if out.Task != nil && (tc.Want != Accepted && tc.Adds == 0) {
		t.Errorf("a refused call returned a task: %s", out.Task.ID)
	}
	if tc.Want == Accepted && out.Sent != nil {
		if out.Task == nil {
			t.Fatal("an accepted submit returned no task")
		}
		readsBack(t, ctx, c, out.Task.ID, out.Sent)
	}
	if tc.Check != nil && !t.Failed() {
		if err := tc.Check(ctx, e, out); err != nil {
			t.Error(err)
		}
	}
}

// checkError checks the call's error against the row.
func checkError(t *testing.T, tc Case, err error) {
	t.Helper()
	if tc.Want == Accepted {
		if err != nil {
			t.Fatalf("want success, got %T: %v", err, err)
		}
		return
	}
	if err == nil {
		t.Fatalf("want %v, got no error", tc.Want)
	}
	if !errors.Is(err, cairnq.ErrInvalidArgument) {
		t.Errorf("errors.Is(err, ErrInvalidArgument) is false for %T: %v", err, err)
	}
	switch tc.Want {
	case Argument:
		var ae *cairnq.ArgumentError
		if !errors.As(err, &ae) {
			t.Errorf("want *ArgumentError, got %T: %v", err, err)
		} else if tc.Arg != "" && ae.Arg != tc.Arg {
			t.Errorf("*ArgumentError names argument %q, want %q: %v", ae.Arg, tc.Arg, err)
		}
	case Serialization, TooLarge:
		var se *cairnq.SerializationError
		if !errors.As(err, &se) {
			t.Errorf("want *SerializationError, got %T: %v", err, err)
		} else if tc.Field != "" && se.Field != tc.Field {
			t.Errorf("*SerializationError names field %q, want %q: %v", se.Field, tc.Field, err)
		}
		if tooLarge := errors.Is(err, cairnqtype.ErrValueTooLarge); tooLarge != (tc.Want == TooLarge) {
			t.Errorf("errors.Is(err, ErrValueTooLarge) = %v, want %v: %v", tooLarge, tc.Want == TooLarge, err)
		}
	}
	if msg := err.Error(); len(msg) > 4096 {
		t.Errorf("the error message is %d bytes long; it should not echo a large value", len(msg))
	}
}

// seed writes the witnesses: a queued task and a canceled one, each under
// a key.
func seed(t *testing.T, ctx context.Context, c *cairnq.Client) *Env {
	t.Helper()
	q, err := c.Submit(ctx, witness, map[string]any{"w": "queued"}, &cairnq.SubmitOptions{Key: "witness-queued"})
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	k, err := c.Submit(ctx, witness, map[string]any{"w": "canceled"}, &cairnq.SubmitOptions{Key: "witness-canceled"})
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	k, err = c.Cancel(ctx, k.ID)
	if err != nil || k == nil || k.Status != cairnq.StatusCanceled {
		t.Fatalf("seed: cancel: %v %v", k, err)
	}
	return &Env{C: c, Queued: q, Canceled: k}
}

type state struct {
	tasks map[string][]byte // id → the task as JSON
	total int               // tasks Stats counts
}

func snapshot(t *testing.T, ctx context.Context, c *cairnq.Client) state {
	t.Helper()
	list, err := c.List(ctx, &cairnq.ListOptions{Limit: 1000})
	if err != nil {
		t.Fatalf("snapshot: List: %v", err)
	}
	s := state{tasks: map[string][]byte{}}
	for _, task := range list {
		b, err := json.Marshal(digest(task))
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		s.tasks[task.ID] = b
	}
	stats, err := c.Stats(ctx, "")
	if err != nil {
		t.Fatalf("snapshot: Stats: %v", err)
	}
	for _, n := range stats {
		s.total += n.Queued + n.Running + n.Succeeded + n.Failed + n.Canceled
	}
	return s
}

// digest is task with its large JSON columns replaced by their SHA-256, so a
// snapshot of a 16 MiB payload stays cheap to encode and compare.
func digest(task *cairnq.Task) *cairnq.Task {
	d := *task
	for _, col := range []*json.RawMessage{&d.Payload, &d.Metadata, &d.Result} {
		if len(*col) > 4096 {
			sum := sha256.Sum256(*col)
			*col, _ = json.Marshal(fmt.Sprintf("%d bytes, sha256 %x", len(*col), sum))
		}
	}
	return &d
}

// readsBack checks that the task's stored payload is the JSON value sent.
func readsBack(t *testing.T, ctx context.Context, c *cairnq.Client, id string, sent any) {
	t.Helper()
	task, err := c.Get(ctx, id)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if s, ok := sent.(string); ok {
		// Decoding once is enough for a string, which may be 16 MiB.
		var got string
		if err := json.Unmarshal(task.Payload, &got); err != nil {
			t.Fatalf("the stored payload is not a JSON string: %v: %s", err, clip(task.Payload))
		}
		if got != s {
			t.Errorf("the payload reads back as %s, want the %d-byte string sent", clip(task.Payload), len(s))
		}
		return
	}
	want, ok := sent.(json.RawMessage)
	if b, isBytes := sent.([]byte); isBytes { // JSON text, as RawMessage
		want, ok = b, true
	}
	if !ok {
		if want, err = json.Marshal(sent); err != nil {
			t.Fatalf("encoding the payload sent: %v", err)
		}
	}
	wv, err := decode(want)
	if err != nil {
		t.Fatalf("decoding the payload sent: %v", err)
	}
	gv, err := decode(task.Payload)
	if err != nil {
		t.Fatalf("the stored payload is not JSON: %v: %s", err, clip(task.Payload))
	}
	if !reflect.DeepEqual(gv, wv) {
		t.Errorf("the payload reads back as %s, want %s", clip(task.Payload), clip(want))
	}
}

// decode decodes a JSON text with its numbers as exact rationals, since
// Postgres's jsonb keeps a number's value, not its spelling (1e2 reads
// back as 100).
func decode(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return exact(v)
}

func exact(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		r, ok := new(big.Rat).SetString(string(x))
		if !ok {
			return nil, fmt.Errorf("number %.40s does not parse", x)
		}
		return r.RatString(), nil
	case []any:
		for i := range x {
			var err error
			if x[i], err = exact(x[i]); err != nil {
				return nil, err
			}
		}
	case map[string]any:
		for k := range x {
			var err error
			if x[k], err = exact(x[k]); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// clip shortens a JSON text for a failure message.
func clip(b []byte) string {
	if len(b) > 300 {
		return fmt.Sprintf("%s... (%d bytes)", b[:300], len(b))
	}
	return string(b)
}
