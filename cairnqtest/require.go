package cairnqtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strings"

	cairnq "github.com/cairnq/cairnq-go"
)

// Match narrows the tasks a Require helper looks at, beyond their name.
// Zero fields match anything; a nil *Match matches every task of the name.
type Match struct {
	// Queue the task was submitted to.
	Queue string
	// Key matches the task the key points at now (Client.GetByKey).
	Key string
	// Priority, when set, is the task's priority: &p, or new(5).
	Priority *int
	// Status is the task's status now; submitted tasks are queued until a
	// worker claims them.
	Status cairnq.Status
	// ParentID is the task that submitted this one (TaskContext.Submit).
	ParentID string
	// Payload, when not nil, is the payload expected. RequireSubmitted
	// and RequireNotSubmitted compare it as JSON: it is encoded as Submit
	// encodes a payload (a json.RawMessage or []byte is JSON text), and
	// two values match when they decode to the same JSON value, whatever
	// the key order, spacing or spelling of numbers. The Def helpers
	// compare it as the TaskDef's payload type P instead; it must then be
	// a P.
	Payload any
}

// payloadEq reports whether a stored payload matches; why says how not.
type payloadEq func(stored json.RawMessage) (ok bool, why string)

// RequireSubmitted asserts that exactly one task named name matching m
// exists in c's database, and returns it. Otherwise it fails the test with
// every task of that name and what kept each from matching, or with the
// tasks that matched when there are several. Tasks count whatever their
// status, unless m.Status says otherwise.
func RequireSubmitted(ctx context.Context, tb TB, c *cairnq.Client, name string, m *Match) *cairnq.Task {
	tb.Helper()
	eq, err := jsonPayload(m)
	if err != nil {
		tb.Fatalf("cairnqtest: RequireSubmitted: %v", err)
		return nil
	}
	return requireSubmitted(ctx, tb, "RequireSubmitted", c, name, m, eq)
}

// RequireNotSubmitted asserts that no task named name matching m exists
// in c's database, and otherwise fails the test naming the tasks that
// match.
func RequireNotSubmitted(ctx context.Context, tb TB, c *cairnq.Client, name string, m *Match) {
	tb.Helper()
	eq, err := jsonPayload(m)
	if err != nil {
		tb.Fatalf("cairnqtest: RequireNotSubmitted: %v", err)
		return
	}
	requireNotSubmitted(ctx, tb, "RequireNotSubmitted", c, name, m, eq)
}

// RequireSubmittedDef is RequireSubmitted for def's tasks, with the
// payload compared as a P: m.Payload, when set, must be a P, and matches
// a stored payload that decodes into a P (as def.Handle decodes it) equal
// to it: by reflect.DeepEqual or, failing that, by encoding to the same
// JSON, so that a time.Time decoded from the payload equals the one it was
// encoded from, whose monotonic reading or *time.Location DeepEqual would
// tell apart (the same instant in another time zone encodes differently,
// and does not match). It returns the task and its payload decoded.
func RequireSubmittedDef[P, R any](ctx context.Context, tb TB, c *cairnq.Client, def cairnq.TaskDef[P, R], m *Match) (*cairnq.Task, P) {
	tb.Helper()
	var p P
	eq, err := typedPayload[P](m)
	if err != nil {
		tb.Fatalf("cairnqtest: RequireSubmittedDef: %v", err)
		return nil, p
	}
	t := requireSubmitted(ctx, tb, "RequireSubmittedDef", c, def.Name, m, eq)
	if t == nil {
		return nil, p
	}
	if err := json.Unmarshal(t.Payload, &p); err != nil {
		tb.Fatalf("cairnqtest: RequireSubmittedDef: the payload of task %s is not a %T: %v", t.ID, p, err)
		return nil, p
	}
	return t, p
}

// RequireNotSubmittedDef is RequireNotSubmitted for def's tasks, with the
// payload compared as a P, as RequireSubmittedDef compares it.
func RequireNotSubmittedDef[P, R any](ctx context.Context, tb TB, c *cairnq.Client, def cairnq.TaskDef[P, R], m *Match) {
	tb.Helper()
	eq, err := typedPayload[P](m)
	if err != nil {
		tb.Fatalf("cairnqtest: RequireNotSubmittedDef: %v", err)
		return
	}
	requireNotSubmitted(ctx, tb, "RequireNotSubmittedDef", c, def.Name, m, eq)
}

func requireSubmitted(ctx context.Context, tb TB, op string, c *cairnq.Client, name string, m *Match, eq payloadEq) *cairnq.Task {
	tb.Helper()
	all, matched, whyNot, err := find(ctx, c, name, m, eq)
	if err != nil {
		tb.Fatalf("cairnqtest: %s: %v", op, err)
		return nil
	}
	switch len(matched) {
	case 1:
		return matched[0]
	case 0:
		var b strings.Builder
		fmt.Fprintf(&b, "cairnqtest: %s: no task named %q matches %s", op, name, describe(m))
		if len(all) == 0 {
			fmt.Fprintf(&b, "; there is no task named %q", name)
		} else {
			fmt.Fprintf(&b, "; the %d task(s) named %q:", len(all), name)
			for i, t := range all {
				fmt.Fprintf(&b, "\n\t%s: %s", t.ID, whyNot[i])
			}
		}
		tb.Fatalf("%s", b.String())
	default:
		tb.Fatalf("cairnqtest: %s: %d tasks named %q match %s, want exactly one:%s",
			op, len(matched), name, describe(m), listTasks(matched))
	}
	return nil
}

func requireNotSubmitted(ctx context.Context, tb TB, op string, c *cairnq.Client, name string, m *Match, eq payloadEq) {
	tb.Helper()
	_, matched, _, err := find(ctx, c, name, m, eq)
	if err != nil {
		tb.Fatalf("cairnqtest: %s: %v", op, err)
		return
	}
	if len(matched) > 0 {
		tb.Fatalf("cairnqtest: %s: %d task(s) named %q match %s, want none:%s",
			op, len(matched), name, describe(m), listTasks(matched))
	}
}

// listPage is how many tasks find reads per List call.
const listPage = 500

// find reads every task named name, oldest first, and sorts out those
// matching m; whyNot[i] says why all[i] does not match ("" if it does).
func find(ctx context.Context, c *cairnq.Client, name string, m *Match, eq payloadEq) (all, matched []*cairnq.Task, whyNot []string, err error) {
	if c == nil {
		return nil, nil, nil, errors.New("the client is nil")
	}
	if m == nil {
		m = &Match{}
	}
	lo := cairnq.ListOptions{Name: name, Limit: listPage}
	for {
		page, err := c.List(ctx, &lo)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("listing tasks named %q: %w", name, err)
		}
		all = append(all, page...)
		if len(page) < listPage {
			break
		}
		lo.Offset += len(page)
	}
	slices.Reverse(all) // List is newest first
	keyed := ""         // the id the key points at
	if m.Key != "" {
		t, err := c.GetByKey(ctx, m.Key)
		switch {
		case err == nil:
			keyed = t.ID
		case !errors.Is(err, cairnq.ErrNotFound):
			return nil, nil, nil, fmt.Errorf("reading key %q: %w", m.Key, err)
		}
	}
	for _, t := range all {
		why := mismatch(t, m, keyed, eq)
		whyNot = append(whyNot, why)
		if why == "" {
			matched = append(matched, t)
		}
	}
	return all, matched, whyNot, nil
}

// mismatch says every way t differs from m, or "" when it matches.
func mismatch(t *cairnq.Task, m *Match, keyed string, eq payloadEq) string {
	var diffs []string
	if m.Queue != "" && t.Queue != m.Queue {
		diffs = append(diffs, fmt.Sprintf("queue %q, want %q", t.Queue, m.Queue))
	}
	if m.Key != "" && t.ID != keyed {
		if keyed == "" {
			diffs = append(diffs, fmt.Sprintf("key %q points at no task", m.Key))
		} else {
			diffs = append(diffs, fmt.Sprintf("key %q points at %s", m.Key, keyed))
		}
	}
	if m.Priority != nil && t.Priority != *m.Priority {
		diffs = append(diffs, fmt.Sprintf("priority %d, want %d", t.Priority, *m.Priority))
	}
	if m.Status != "" && t.Status != m.Status {
		diffs = append(diffs, fmt.Sprintf("status %s, want %s", t.Status, m.Status))
	}
	if m.ParentID != "" && t.ParentID != m.ParentID {
		diffs = append(diffs, fmt.Sprintf("parent %q, want %q", t.ParentID, m.ParentID))
	}
	if eq != nil {
		if ok, why := eq(t.Payload); !ok {
			diffs = append(diffs, why)
		}
	}
	return strings.Join(diffs, "; ")
}

// describe renders m for a failure message.
func describe(m *Match) string {
	if m == nil {
		return "(any)"
	}
	var parts []string
	add := func(k string, v any) { parts = append(parts, fmt.Sprintf("%s=%v", k, v)) }
	if m.Queue != "" {
		add("queue", fmt.Sprintf("%q", m.Queue))
	}
	if m.Key != "" {
		add("key", fmt.Sprintf("%q", m.Key))
	}
	if m.Priority != nil {
		add("priority", *m.Priority)
	}
	if m.Status != "" {
		add("status", m.Status)
	}
	if m.ParentID != "" {
		add("parent", m.ParentID)
	}
	if m.Payload != nil {
		add("payload", compact(m.Payload))
	}
	if len(parts) == 0 {
		return "(any)"
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// listTasks renders tasks one a line for a failure message.
func listTasks(ts []*cairnq.Task) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "\n\t%s: queue %q, priority %d, status %s, payload %s", t.ID, t.Queue, t.Priority, t.Status, compactRaw(t.Payload))
	}
	return b.String()
}

// compact renders a payload as one line of JSON where it can.
func compact(v any) string {
	raw, err := encodeJSON(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(raw)
}

// compactRaw renders stored JSON on one line, the same on every backend
// (Postgres's jsonb adds spaces).
func compactRaw(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// encodeJSON encodes v as Client.Submit encodes a payload: a
// json.RawMessage or []byte is JSON text already.
func encodeJSON(v any) ([]byte, error) {
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
	case []byte:
		raw = x
	default:
		return json.Marshal(v)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, fmt.Errorf("not JSON text: %w", err)
	}
	return b.Bytes(), nil
}

// jsonPayload is the payload comparison of the untyped helpers.
func jsonPayload(m *Match) (payloadEq, error) {
	if m == nil || m.Payload == nil {
		return nil, nil
	}
	want, err := encodeJSON(m.Payload)
	if err != nil {
		return nil, fmt.Errorf("Match.Payload cannot be encoded as JSON: %w", err)
	}
	wantV, err := decodeJSON(want)
	if err != nil {
		return nil, fmt.Errorf("Match.Payload cannot be encoded as JSON: %w", err)
	}
	return func(stored json.RawMessage) (bool, string) {
		got, err := decodeJSON(stored)
		if err == nil && jsonEqual(got, wantV) {
			return true, ""
		}
		return false, fmt.Sprintf("payload %s, want %s", compactRaw(stored), want)
	}, nil
}

// typedPayload is the payload comparison of the Def helpers.
func typedPayload[P any](m *Match) (payloadEq, error) {
	if m == nil || m.Payload == nil {
		return nil, nil
	}
	want, ok := m.Payload.(P)
	if !ok {
		var p P
		return nil, fmt.Errorf("Match.Payload is a %T, want a %T (the TaskDef's payload type)", m.Payload, p)
	}
	wantJSON, wantErr := json.Marshal(want)
	return func(stored json.RawMessage) (bool, string) {
		var got P
		if err := json.Unmarshal(stored, &got); err != nil {
			return false, fmt.Sprintf("payload %s is not a %T: %v", compactRaw(stored), got, err)
		}
		if reflect.DeepEqual(got, want) {
			return true, ""
		}
		if gotJSON, err := json.Marshal(got); err == nil && wantErr == nil {
			g, gerr := decodeJSON(gotJSON)
			w, werr := decodeJSON(wantJSON)
			if gerr == nil && werr == nil && jsonEqual(g, w) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("payload %+v, want %+v (as %T)", got, want, got)
	}, nil
}

// decodeJSON decodes one JSON value, keeping numbers as written.
func decodeJSON(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

// jsonEqual compares two decoded JSON values; numbers are equal when they
// denote the same number (1, 1.0 and 1e0 are), exactly.
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !jsonEqual(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		rx, okx := new(big.Rat).SetString(string(x))
		ry, oky := new(big.Rat).SetString(string(y))
		return okx && oky && rx.Cmp(ry) == 0
	default: // string, bool, nil
		return a == b
	}
}
