// Package badinput is the one table of bad input every backend must refuse
// alike, and its runner. The root package runs it on SQLite
// (badinput_test.go), conformance/ on Postgres through the pgx adapter.
//
// Each row is one call on the public API with one bad (or, for the
// positive controls, just acceptable) value. A refused call must fail with
// an error that satisfies errors.Is(err, cairnq.ErrInvalidArgument) and is
// the typed error the row names, and it must write nothing: the tasks
// listed before and after the call are the same. An accepted call must
// write exactly the tasks it says, and a payload must read back as
// submitted.
//
// It is test support only: nothing outside tests imports it.
package badinput

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// Want is what a row's call must do.
type Want int

const (
	// Argument: refused with an *cairnq.ArgumentError.
	Argument Want = iota
	// Serialization: refused with a *cairnq.SerializationError.
	Serialization
	// TooLarge: refused with a *cairnq.SerializationError that satisfies
	// errors.Is(err, engine.ErrValueTooLarge).
	TooLarge
	// Accepted: a positive control; the call succeeds.
	Accepted
)

func (w Want) String() string {
	switch w {
	case Argument:
		return "*ArgumentError"
	case Serialization:
		return "*SerializationError"
	case TooLarge:
		return "*SerializationError (ErrValueTooLarge)"
	case Accepted:
		return "success"
	}
	return fmt.Sprintf("Want(%d)", int(w))
}

// Env is what a row's call runs against: a client on a fresh database
// holding two witness tasks, one queued and one canceled, each under a
// key. A refused call must leave both exactly as they were.
type Env struct {
	C        *cairnq.Client
	Queued   *cairnq.Task
	Canceled *cairnq.Task
}

// Outcome is what an accepted call reports back to the runner.
type Outcome struct {
	// Task is the task the call created, if any.
	Task *cairnq.Task
	// Sent is the payload the call submitted; when set, the stored payload
	// must read back as the same JSON value.
	Sent any
	// Seen is the task as the handler saw it right after its call (rows
	// that run a worker).
	Seen *cairnq.Task
}

// Case is one row.
type Case struct {
	Name string
	Want Want
	// Arg, for Argument rows, is the ArgumentError.Arg the refusal must
	// name; "" does not check it.
	Arg string
	// Field, for Serialization and TooLarge rows, is the
	// SerializationError.Field the refusal must name.
	Field string
	// Adds is how many tasks the call leaves behind beside the witnesses:
	// a task the row itself submits in order to run its call (worker
	// rows), or the one an accepted submit creates.
	Adds int
	// Call makes the call. An error from the row's own setup, rather than
	// from the call under test, is wrapped with setupErr.
	Call func(ctx context.Context, e *Env) (Outcome, error)
	// Check, when set, checks what the call left, after the common checks.
	Check func(ctx context.Context, e *Env, out Outcome) error
}

// setupError marks an error from a row's setup, not from the call tested.
type setupError struct{ err error }

func (e *setupError) Error() string { return "setup: " + e.err.Error() }
func (e *setupError) Unwrap() error { return e.err }

func setupErr(err error) error { return &setupError{err} }

// Names the rows use. workerTask is what the worker rows run; nothing
// else is named so.
const (
	taskName   = "bi.task"
	witness    = "bi.witness"
	workerTask = "bi.worker"
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

// call is a row whose call returns no task.
func call(fn func(ctx context.Context, e *Env) error) func(context.Context, *Env) (Outcome, error) {
	return func(ctx context.Context, e *Env) (Outcome, error) { return Outcome{}, fn(ctx, e) }
}

// newWorker is a row calling NewWorker with o.
func newWorker(o cairnq.WorkerOptions) func(context.Context, *Env) (Outcome, error) {
	return call(func(ctx context.Context, e *Env) error {
		_, err := cairnq.NewWorker(e.C, &o)
		return err
	})
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

// inHandler is a row that submits a workerTask, runs a worker until the
// task ends, and makes act's call from inside the handler. The handler
// reads the task back right after the call, so the row can tell what the
// call wrote before the settlement overwrites progress.
func inHandler(act func(ctx context.Context, tc *cairnq.TaskContext) error) func(context.Context, *Env) (Outcome, error) {
	return func(ctx context.Context, e *Env) (Outcome, error) {
		t, err := e.C.Submit(ctx, workerTask, map[string]any{}, nil)
		if err != nil {
			return Outcome{}, setupErr(err)
		}
		w, err := cairnq.NewWorker(e.C, &cairnq.WorkerOptions{PollInterval: 20 * time.Millisecond})
		if err != nil {
			return Outcome{}, setupErr(err)
		}
		type result struct {
			err     error
			seen    *cairnq.Task
			readErr error
		}
		got := make(chan result, 1)
		err = w.Handle(workerTask, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			var r result
			r.err = act(ctx, tc)
			r.seen, r.readErr = e.C.Get(ctx, tc.ID())
			got <- r
			return nil, nil
		}, nil)
		if err != nil {
			return Outcome{}, setupErr(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		ran := make(chan error, 1)
		go func() { ran <- w.Run(runCtx) }()
		// A bound on a stuck worker, not a timing assertion: the task is
		// claimable at once.
		final, waitErr := e.C.Wait(ctx, t.ID, &cairnq.WaitOptions{Timeout: 2 * time.Minute})
		stop()
		if err := <-ran; err != nil {
			return Outcome{}, setupErr(fmt.Errorf("worker Run: %w", err))
		}
		if waitErr != nil {
			return Outcome{}, setupErr(fmt.Errorf("waiting for the handler's task: %w", waitErr))
		}
		// The handler sent before it returned, and the task ended only after.
		r := <-got
		if r.readErr != nil {
			return Outcome{}, setupErr(fmt.Errorf("reading the task in the handler: %w", r.readErr))
		}
		return Outcome{Task: final, Seen: r.seen}, r.err
	}
}

// untouchedByHandler checks that the refused call stored no progress and no
// message on the running task.
func untouchedByHandler(_ context.Context, _ *Env, out Outcome) error {
	if out.Seen == nil {
		return errors.New("the handler's read of its task is missing")
	}
	if out.Seen.Progress != nil || out.Seen.Message != nil {
		return fmt.Errorf("the refused call wrote to the running task: progress %v, message %v",
			derefFloat(out.Seen.Progress), derefString(out.Seen.Message))
	}
	return nil
}

func derefFloat(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func derefString(p *string) any {
	if p == nil {
		return nil
	}
	if len(*p) > 40 {
		return fmt.Sprintf("%q... (%d bytes)", (*p)[:40], len(*p))
	}
	return *p
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

// Cases returns the table, built afresh (its closures hold no large value).
func Cases() []Case {
	var nilCtx context.Context // a nil context, as a careless caller passes it
	long := func(n int) string { return strings.Repeat("i", n) }
	name255 := strings.Repeat("€", 85)  // 255 bytes, 85 characters
	key1024 := strings.Repeat("𝄞", 256) // 1024 bytes, 256 characters
	msg64k := strings.Repeat("m", engine.MaxMessageBytes)

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
			Call: submitLazy(func() any { return nestedSlices(engine.MaxJSONDepth + 1) })},
		{Name: "submit/payload/nested 512 deep accepted", Want: Accepted, Adds: 1,
			Call: submitLazy(func() any { return nestedSlices(engine.MaxJSONDepth) })},
		{Name: "submit/payload/RawMessage nested 513 deep", Want: Serialization, Field: "payload",
			Call: submitLazy(func() any { return nestedObjects(engine.MaxJSONDepth + 1) })},
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
			Call: submitLazy(func() any { return stringEncodedAs(engine.MaxValueBytes + 1) })},
		{Name: "submit/payload/RawMessage 16 MiB + 1", Want: TooLarge, Field: "payload",
			Call: submitLazy(func() any {
				return json.RawMessage(`"` + stringEncodedAs(engine.MaxValueBytes+1) + `"`)
			})},
		{Name: "submit/payload/16 MiB encoded accepted", Want: Accepted, Adds: 1,
			Call: submitLazy(func() any { return stringEncodedAs(engine.MaxValueBytes) })},

		// ---- Submit: the metadata.
		{Name: "submit/metadata/not an object", Want: Argument, Arg: "metadata",
			Call: submit(nil, &cairnq.SubmitOptions{Metadata: []int{1}})},
		{Name: "submit/metadata/NUL", Want: Serialization, Field: "metadata",
			Call: submit(nil, &cairnq.SubmitOptions{Metadata: map[string]string{"k": "\x00"}})},
		{Name: "submit/metadata/16 MiB + 1 encoded", Want: TooLarge, Field: "metadata",
			Call: func(ctx context.Context, e *Env) (Outcome, error) {
				m := map[string]string{"k": strings.Repeat("x", engine.MaxValueBytes-7)} // {"k":"…"} is 8 bytes more
				t, err := e.C.Submit(ctx, taskName, nil, &cairnq.SubmitOptions{Metadata: m})
				return Outcome{Task: t}, err
			}},

		// ---- Call: a bad wait option must refuse before the submit.
		{Name: "call/timeout/negative", Want: Argument, Arg: "Timeout",
			Call: func(ctx context.Context, e *Env) (Outcome, error) {
				t, err := e.C.Call(ctx, taskName, nil, &cairnq.CallOptions{WaitOptions: cairnq.WaitOptions{Timeout: -time.Second}})
				return Outcome{Task: t}, err
			}},

		// ---- Reads.
		{Name: "get/id/empty", Want: Argument, Arg: "id",
			Call: call(func(ctx context.Context, e *Env) error { _, err := e.C.Get(ctx, ""); return err })},
		{Name: "get/id/NUL", Want: Argument, Arg: "id",
			Call: call(func(ctx context.Context, e *Env) error { _, err := e.C.Get(ctx, e.Queued.ID+"\x00"); return err })},
		{Name: "get/context/nil", Want: Argument, Arg: "context",
			Call: call(func(_ context.Context, e *Env) error { _, err := e.C.Get(nilCtx, e.Queued.ID); return err })},
		{Name: "get by key/key/empty", Want: Argument, Arg: "key",
			Call: call(func(ctx context.Context, e *Env) error { _, err := e.C.GetByKey(ctx, ""); return err })},
		{Name: "get status/id/invalid UTF-8", Want: Argument, Arg: "id",
			Call: call(func(ctx context.Context, e *Env) error { _, err := e.C.GetStatus(ctx, "task_\xff"); return err })},
		{Name: "list/status/unknown", Want: Argument, Arg: "status",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.List(ctx, &cairnq.ListOptions{Status: "paused"})
				return err
			})},
		{Name: "list/limit/negative", Want: Argument, Arg: "limit",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.List(ctx, &cairnq.ListOptions{Limit: -1})
				return err
			})},
		{Name: "list/offset/negative", Want: Argument, Arg: "offset",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.List(ctx, &cairnq.ListOptions{Offset: -1})
				return err
			})},
		{Name: "list/queue/NUL", Want: Argument, Arg: "queue",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.List(ctx, &cairnq.ListOptions{Queue: "default\x00"})
				return err
			})},
		{Name: "stats/queue/256 bytes", Want: Argument, Arg: "queue",
			Call: call(func(ctx context.Context, e *Env) error { _, err := e.C.Stats(ctx, long(256)); return err })},
		{Name: "queue depth/queue/empty", Want: Argument, Arg: "queue",
			Call: call(func(ctx context.Context, e *Env) error { _, err := e.C.QueueHeadroom(ctx, "", 10); return err })},
		{Name: "queue depth/max depth/negative", Want: Argument, Arg: "max depth",
			Call: call(func(ctx context.Context, e *Env) error { _, err := e.C.QueueHeadroom(ctx, "default", -1); return err })},

		// ---- Writes by id or key.
		{Name: "cancel/id/empty", Want: Argument, Arg: "id",
			Call: call(func(ctx context.Context, e *Env) error { _, err := e.C.Cancel(ctx, ""); return err })},
		{Name: "cancel/id/NUL", Want: Argument, Arg: "id",
			Call: call(func(ctx context.Context, e *Env) error { _, err := e.C.Cancel(ctx, e.Queued.ID+"\x00"); return err })},
		{Name: "cancel by key/key/NUL", Want: Argument, Arg: "key",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.CancelByKey(ctx, "witness-queued\x00")
				return err
			})},
		{Name: "retry/id/NUL", Want: Argument, Arg: "id",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.Retry(ctx, e.Canceled.ID+"\x00", nil)
				return err
			})},
		{Name: "retry by key/key/1025 bytes", Want: Argument, Arg: "key",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.RetryByKey(ctx, key1024+"k", nil)
				return err
			})},
		{Name: "purge/status/queued", Want: Argument, Arg: "status",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.Purge(ctx, &cairnq.PurgeOptions{Status: cairnq.StatusQueued})
				return err
			})},
		{Name: "purge/limit/negative", Want: Argument, Arg: "limit",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.Purge(ctx, &cairnq.PurgeOptions{Limit: -1})
				return err
			})},
		{Name: "purge/older than/negative", Want: Argument, Arg: "older than",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.Purge(ctx, &cairnq.PurgeOptions{OlderThan: -time.Hour})
				return err
			})},

		// ---- Wait options.
		{Name: "wait/timeout/negative", Want: Argument, Arg: "Timeout",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.Wait(ctx, e.Canceled.ID, &cairnq.WaitOptions{Timeout: -time.Second})
				return err
			})},
		{Name: "wait by key/poll interval/1ns", Want: Argument, Arg: "PollInterval",
			Call: call(func(ctx context.Context, e *Env) error {
				_, err := e.C.WaitByKey(ctx, "witness-canceled", &cairnq.WaitOptions{PollInterval: time.Nanosecond})
				return err
			})},

		// ---- Worker options.
		{Name: "worker/lease/1ns", Want: Argument, Arg: "LeaseDuration",
			Call: newWorker(cairnq.WorkerOptions{LeaseDuration: time.Nanosecond})},
		{Name: "worker/lease/20ms", Want: Argument, Arg: "LeaseDuration",
			Call: newWorker(cairnq.WorkerOptions{LeaseDuration: 20 * time.Millisecond})},
		{Name: "worker/heartbeat/half the lease", Want: Argument, Arg: "HeartbeatInterval",
			Call: newWorker(cairnq.WorkerOptions{LeaseDuration: 10 * time.Second, HeartbeatInterval: 5 * time.Second})},
		{Name: "worker/heartbeat/the whole lease", Want: Argument, Arg: "HeartbeatInterval",
			Call: newWorker(cairnq.WorkerOptions{LeaseDuration: 10 * time.Second, HeartbeatInterval: 10 * time.Second})},
		{Name: "worker/poll interval/1ns", Want: Argument, Arg: "PollInterval",
			Call: newWorker(cairnq.WorkerOptions{PollInterval: time.Nanosecond})},

		// ---- Writes from a running handler.
		{Name: "task context/message/NUL", Want: Argument, Adds: 1, Check: untouchedByHandler,
			Call: inHandler(func(ctx context.Context, tc *cairnq.TaskContext) error { return tc.Message(ctx, "half\x00way") })},
		{Name: "task context/message/invalid UTF-8", Want: Argument, Adds: 1, Check: untouchedByHandler,
			Call: inHandler(func(ctx context.Context, tc *cairnq.TaskContext) error { return tc.Message(ctx, "caf\xe9") })},
		{Name: "task context/message/64 KiB + 1", Want: Argument, Adds: 1, Check: untouchedByHandler,
			Call: inHandler(func(ctx context.Context, tc *cairnq.TaskContext) error { return tc.Message(ctx, msg64k+"m") })},
		{Name: "task context/progress/NaN", Want: Argument, Adds: 1, Check: untouchedByHandler,
			Call: inHandler(func(ctx context.Context, tc *cairnq.TaskContext) error { return tc.Progress(ctx, math.NaN()) })},
		{Name: "task context/progress/+Inf", Want: Argument, Adds: 1, Check: untouchedByHandler,
			Call: inHandler(func(ctx context.Context, tc *cairnq.TaskContext) error { return tc.Progress(ctx, math.Inf(1)) })},
		{Name: "task context/report/64 KiB accepted", Want: Accepted, Adds: 1,
			Call: inHandler(func(ctx context.Context, tc *cairnq.TaskContext) error { return tc.Report(ctx, 0.5, msg64k) }),
			Check: func(_ context.Context, _ *Env, out Outcome) error {
				if s := out.Seen; s == nil || s.Message == nil || *s.Message != msg64k || s.Progress == nil || *s.Progress != 0.5 {
					return fmt.Errorf("the handler read back progress %v, message %v; want 0.5 and the 64 KiB message",
						derefFloat(s.Progress), derefString(s.Message))
				}
				return nil
			}},
	}
}

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
		if tooLarge := errors.Is(err, engine.ErrValueTooLarge); tooLarge != (tc.Want == TooLarge) {
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
