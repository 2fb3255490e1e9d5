package badinput

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
)

// wide returns n as an int, for values past the 32-bit range (the table is
// only meaningful where int has 64 bits, as on every platform CI runs).
func wide(n int64) int { return int(n) }

// submit is a row calling Submit with payload and opts.
func submit(payload any, opts *cairnq.SubmitOptions) func(context.Context, *Env) (Outcome, error) {
	return submitNamed(taskName, payload, opts)
}

func submitNamed(name string, payload any, opts *cairnq.SubmitOptions) func(context.Context, *Env) (Outcome, error) {
	return func(ctx context.Context, e *Env) (Outcome, error) {
		t, err := e.C.Submit(ctx, name, payload, opts)
		return Outcome{Task: t, Sent: payload}, err
	}
}

// submitLazy is submit for a payload built only when the row runs, so the
// large ones do not live for the whole test.
func submitLazy(build func() any) func(context.Context, *Env) (Outcome, error) {
	return func(ctx context.Context, e *Env) (Outcome, error) {
		p := build()
		t, err := e.C.Submit(ctx, taskName, p, nil)
		return Outcome{Task: t, Sent: p}, err
	}
}

// nestedSlices is a Go value nesting depth arrays around a string.
func nestedSlices(depth int) any {
	var v any = "leaf"
	for range depth {
		v = []any{v}
	}
	return v
}

// nestedObjects is JSON text nesting depth objects around a number.
func nestedObjects(depth int) json.RawMessage {
	return json.RawMessage(strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth))
}

// stringEncodedAs returns an ASCII string whose JSON encoding is n bytes.
func stringEncodedAs(n int) string { return strings.Repeat("x", n-2) }

// cyclic returns a map that contains itself.
func cyclic() map[string]any {
	m := map[string]any{}
	m["self"] = m
	return m
}

// stored checks a field of the task an accepted submit created, as Get
// reads it back.
func stored(what string, get func(*cairnq.Task) any, want any) func(context.Context, *Env, Outcome) error {
	return func(ctx context.Context, e *Env, out Outcome) error {
		if out.Task == nil {
			return errors.New("no task returned")
		}
		t, err := e.C.Get(ctx, out.Task.ID)
		if err != nil {
			return err
		}
		if got := get(t); !reflect.DeepEqual(got, want) {
			return fmt.Errorf("%s reads back as %v, want %v", what, got, want)
		}
		return nil
	}
}

// submitCases are the rows that call Submit, and Call with a bad wait
// option.
func submitCases() []Case {
	return slices.Concat(submitIdentityCases(), submitNumberCases(), submitPayloadCases(), submitMetadataCases())
}

// submitIdentityCases are Submit's rows for the strings that name a
// task: its name, queue, key and parent, root and correlation ids.
func submitIdentityCases() []Case {
	name255 := strings.Repeat("€", 85) // 255 bytes, 85 characters

	return []Case{
		// ---- Submit: the name.
		{Name: "submit/name/empty", Want: Argument, Arg: "name", Call: submitNamed("", nil, nil)},
		{Name: "submit/name/256 bytes", Want: Argument, Arg: "name", Call: submitNamed(name255+"x", nil, nil)},
		{Name: "submit/name/NUL", Want: Argument, Arg: "name", Call: submitNamed("a\x00b", nil, nil)},
		{Name: "submit/name/invalid UTF-8", Want: Argument, Arg: "name", Call: submitNamed("a\xffb", nil, nil)},
		{Name: "submit/name/255 bytes accepted", Want: Accepted, Adds: 1, Call: submitNamed(name255, nil, nil),
			Check: stored("name", func(t *cairnq.Task) any { return t.Name }, name255)},

		// ---- Submit: the queue.
		{Name: "submit/queue/256 bytes", Want: Argument, Arg: "queue",
			Call: submit(nil, &cairnq.SubmitOptions{Queue: long(256)})},
		{Name: "submit/queue/NUL", Want: Argument, Arg: "queue",
			Call: submit(nil, &cairnq.SubmitOptions{Queue: "q\x00"})},
		{Name: "submit/queue/invalid UTF-8", Want: Argument, Arg: "queue",
			Call: submit(nil, &cairnq.SubmitOptions{Queue: "q\xc3("})},

		// ---- Submit: the key.
		{Name: "submit/key/1025 bytes", Want: Argument, Arg: "key",
			Call: submit(nil, &cairnq.SubmitOptions{Key: key1024 + "k"})},
		{Name: "submit/key/NUL", Want: Argument, Arg: "key",
			Call: submit(nil, &cairnq.SubmitOptions{Key: "k\x00"})},
		{Name: "submit/key/invalid UTF-8", Want: Argument, Arg: "key",
			Call: submit(nil, &cairnq.SubmitOptions{Key: "k\xed\xa0\x80"})}, // an encoded surrogate
		{Name: "submit/key/1024 bytes accepted", Want: Accepted, Adds: 1,
			Call: submit(nil, &cairnq.SubmitOptions{Key: key1024}),
			Check: func(ctx context.Context, e *Env, out Outcome) error {
				t, err := e.C.GetByKey(ctx, key1024)
				if err != nil {
					return err
				}
				if out.Task == nil || t.ID != out.Task.ID {
					return fmt.Errorf("GetByKey found %s, want the submitted task", t.ID)
				}
				return nil
			}},

		// ---- Submit: parent, root and correlation ids.
		{Name: "submit/parent id/256 bytes", Want: Argument, Arg: "parent id",
			Call: submit(nil, &cairnq.SubmitOptions{ParentID: long(256)})},
		{Name: "submit/parent id/NUL", Want: Argument, Arg: "parent id",
			Call: submit(nil, &cairnq.SubmitOptions{ParentID: "task_\x00"})},
		{Name: "submit/root id/256 bytes", Want: Argument, Arg: "root id",
			Call: submit(nil, &cairnq.SubmitOptions{RootID: long(256)})},
		{Name: "submit/root id/NUL", Want: Argument, Arg: "root id",
			Call: submit(nil, &cairnq.SubmitOptions{RootID: "\x00"})},
		{Name: "submit/correlation id/256 bytes", Want: Argument, Arg: "correlation id",
			Call: submit(nil, &cairnq.SubmitOptions{CorrelationID: long(256)})},
		{Name: "submit/correlation id/NUL", Want: Argument, Arg: "correlation id",
			Call: submit(nil, &cairnq.SubmitOptions{CorrelationID: "corr\x00"})},
	}
}

// submitNumberCases are Submit's rows for its numbers, conflict
// strategy and context.
func submitNumberCases() []Case {
	return []Case{
		// ---- Submit: the numbers.
		{Name: "submit/priority/above MaxInt32", Want: Argument, Arg: "priority",
			Call: submit(nil, &cairnq.SubmitOptions{Priority: wide(math.MaxInt32 + 1)})},
		{Name: "submit/priority/below MinInt32", Want: Argument, Arg: "priority",
			Call: submit(nil, &cairnq.SubmitOptions{Priority: wide(math.MinInt32 - 1)})},
		{Name: "submit/priority/MaxInt32 accepted", Want: Accepted, Adds: 1,
			Call:  submit(nil, &cairnq.SubmitOptions{Priority: math.MaxInt32}),
			Check: stored("priority", func(t *cairnq.Task) any { return t.Priority }, math.MaxInt32)},
		{Name: "submit/priority/MinInt32 accepted", Want: Accepted, Adds: 1,
			Call:  submit(nil, &cairnq.SubmitOptions{Priority: math.MinInt32}),
			Check: stored("priority", func(t *cairnq.Task) any { return t.Priority }, math.MinInt32)},
		{Name: "submit/max attempts/-1", Want: Argument, Arg: "max attempts",
			Call: submit(nil, &cairnq.SubmitOptions{MaxAttempts: -1})},
		{Name: "submit/max attempts/above MaxInt32", Want: Argument, Arg: "max attempts",
			Call: submit(nil, &cairnq.SubmitOptions{MaxAttempts: wide(math.MaxInt32 + 1)})},
		{Name: "submit/max attempts/MaxInt32 accepted", Want: Accepted, Adds: 1,
			Call:  submit(nil, &cairnq.SubmitOptions{MaxAttempts: math.MaxInt32}),
			Check: stored("max attempts", func(t *cairnq.Task) any { return t.MaxAttempts }, math.MaxInt32)},
		{Name: "submit/delay/negative", Want: Argument, Arg: "delay",
			Call: submit(nil, &cairnq.SubmitOptions{Delay: -time.Second})},
		{Name: "submit/conflict/unknown", Want: Argument, Arg: "conflict",
			Call: submit(nil, &cairnq.SubmitOptions{Key: "k", Conflict: "overwrite"})},
		{Name: "submit/context/nil", Want: Argument, Arg: "context",
			Call: func(_ context.Context, e *Env) (Outcome, error) {
				t, err := e.C.Submit(nilCtx, taskName, nil, nil)
				return Outcome{Task: t}, err
			}},
	}
}

// submitPayloadCases are Submit's rows for the payload: what cannot be
// JSON, what is too deep or too large, and what must be stored as given.
func submitPayloadCases() []Case {
	return []Case{
		// ---- Submit: the payload.
		{Name: "submit/payload/NaN", Want: Serialization, Field: "payload", Call: submit(math.NaN(), nil)},
		{Name: "submit/payload/+Inf", Want: Serialization, Field: "payload",
			Call: submit(map[string]any{"x": math.Inf(1)}, nil)},
		{Name: "submit/payload/chan", Want: Serialization, Field: "payload", Call: submit(make(chan int), nil)},
		{Name: "submit/payload/func", Want: Serialization, Field: "payload",
			Call: submit(map[string]any{"f": func() {}}, nil)},
		{Name: "submit/payload/cyclic", Want: Serialization, Field: "payload", Call: submitLazy(func() any { return cyclic() })},
		{Name: "submit/payload/string with NUL", Want: Serialization, Field: "payload", Call: submit("a\x00b", nil)},
		{Name: "submit/payload/string not UTF-8", Want: Serialization, Field: "payload",
			Call: submit("caf\xe9", nil)}, // Latin-1: refused, not stored as U+FFFD
		{Name: "submit/payload/nested string not UTF-8", Want: Serialization, Field: "payload",
			Call: submit(map[string]any{"s": []string{"ok", "\xff\xfe"}}, nil)},
		{Name: "submit/payload/map key not UTF-8", Want: Serialization, Field: "payload",
			Call: submit(map[string]int{"k\xff": 1}, nil)},
		{Name: "submit/payload/nested 513 deep", Want: Serialization, Field: "payload",
			Call: submitLazy(func() any { return nestedSlices(cairnqtype.MaxJSONDepth + 1) })},
		{Name: "submit/payload/nested 512 deep accepted", Want: Accepted, Adds: 1,
			Call: submitLazy(func() any { return nestedSlices(cairnqtype.MaxJSONDepth) })},
		{Name: "submit/payload/RawMessage nested 513 deep", Want: Serialization, Field: "payload",
			Call: submitLazy(func() any { return nestedObjects(cairnqtype.MaxJSONDepth + 1) })},
		{Name: "submit/payload/RawMessage invalid", Want: Serialization, Field: "payload",
			Call: submit(json.RawMessage(`{"a":`), nil)},
		// A []byte is JSON text, stored as the JSON it holds, never as
		// encoding/json's base64 string, which other SDKs read as a string.
		{Name: "submit/payload/[]byte JSON text accepted", Want: Accepted, Adds: 1,
			Call: submit([]byte(`{"a":1}`), nil)},
		{Name: "submit/payload/[]byte not JSON", Want: Serialization, Field: "payload",
			Call: submit([]byte{0x01, 0x02, 0xff}, nil)},
		{Name: "submit/metadata/[]byte JSON object accepted", Want: Accepted, Adds: 1,
			Call: submit(nil, &cairnq.SubmitOptions{Metadata: []byte(`{"m":true}`)})},
		{Name: "submit/payload/RawMessage with u0000", Want: Serialization, Field: "payload",
			Call: submit(json.RawMessage(`{"a":"x\u0000y"}`), nil)},
		{Name: "submit/payload/RawMessage with lone surrogate", Want: Serialization, Field: "payload",
			Call: submit(json.RawMessage(`["\ud800"]`), nil)}, // Postgres's jsonb refuses it
		{Name: "submit/payload/RawMessage exponent past 1000", Want: Serialization, Field: "payload",
			Call: submit(json.RawMessage(`[1e1001]`), nil)},
		{Name: "submit/payload/RawMessage 1001-digit number", Want: Serialization, Field: "payload",
			Call: submit(json.RawMessage(strings.Repeat("9", 1001)), nil)},
		{Name: "submit/payload/RawMessage huge numbers accepted", Want: Accepted, Adds: 1,
			Call: submit(json.RawMessage(`[1e1000, -1e-1000, 123456789012345678901234567890.5, `+strings.Repeat("7", 1000)+`]`), nil)},
		{Name: "submit/payload/unicode accepted", Want: Accepted, Adds: 1,
			Call: submit(map[string]any{"s": "é 😀 \uFFFD \u2028 <&>", "ключ": []any{"中文", 1.5, nil, true}}, nil)},
		{Name: "submit/payload/16 MiB + 1 encoded", Want: TooLarge, Field: "payload",
			Call: submitLazy(func() any { return stringEncodedAs(cairnqtype.MaxValueBytes + 1) })},
		{Name: "submit/payload/RawMessage 16 MiB + 1", Want: TooLarge, Field: "payload",
			Call: submitLazy(func() any {
				return json.RawMessage(`"` + stringEncodedAs(cairnqtype.MaxValueBytes+1) + `"`)
			})},
		{Name: "submit/payload/16 MiB encoded accepted", Want: Accepted, Adds: 1,
			Call: submitLazy(func() any { return stringEncodedAs(cairnqtype.MaxValueBytes) })},
	}
}

// submitMetadataCases are Submit's rows for the metadata, and Call's for
// a bad wait option.
func submitMetadataCases() []Case {
	return []Case{
		// ---- Submit: the metadata.
		{Name: "submit/metadata/not an object", Want: Argument, Arg: "metadata",
			Call: submit(nil, &cairnq.SubmitOptions{Metadata: []int{1}})},
		{Name: "submit/metadata/NUL", Want: Serialization, Field: "metadata",
			Call: submit(nil, &cairnq.SubmitOptions{Metadata: map[string]string{"k": "\x00"}})},
		{Name: "submit/metadata/16 MiB + 1 encoded", Want: TooLarge, Field: "metadata",
			Call: func(ctx context.Context, e *Env) (Outcome, error) {
				m := map[string]string{"k": strings.Repeat("x", cairnqtype.MaxValueBytes-7)} // {"k":"…"} is 8 bytes more
				t, err := e.C.Submit(ctx, taskName, nil, &cairnq.SubmitOptions{Metadata: m})
				return Outcome{Task: t}, err
			}},

		// ---- Call: a bad wait option must refuse before the submit.
		{Name: "call/timeout/negative", Want: Argument, Arg: "Timeout",
			Call: func(ctx context.Context, e *Env) (Outcome, error) {
				t, err := e.C.Call(ctx, taskName, nil, &cairnq.CallOptions{WaitOptions: cairnq.WaitOptions{Timeout: -time.Second}})
				return Outcome{Task: t}, err
			}},
	}
}
