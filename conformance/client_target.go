package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
)

// ClientTarget drives a cairnq Client and its store through the scenario
// ops, whatever database the store runs on.
type ClientTarget struct {
	Client *cairnq.Client
}

var _ Target = ClientTarget{}

// ErrorName maps cairnq errors to the scenario vocabulary.
func (ClientTarget) ErrorName(err error) string {
	var timeout *cairnq.TaskTimeoutError
	switch {
	case errors.Is(err, cairnqtype.ErrAlreadyExists):
		return "AlreadyExists"
	case errors.Is(err, cairnqtype.ErrLostLease):
		return "LostLease"
	case errors.Is(err, cairnqtype.ErrQueueFull):
		return "QueueFull"
	case errors.Is(err, cairnqtype.ErrTaskCanceled):
		return "TaskCanceled"
	case errors.As(err, &timeout):
		return "TaskTimeout"
	case errors.Is(err, cairnqtype.ErrInvalidArgument):
		return "InvalidArgument"
	}
	var failed *cairnqtype.TaskFailedError
	var ser *cairnqtype.SerializationError
	var pv *cairnqtype.ProtocolVersionMismatchError
	switch {
	case errors.As(err, &failed):
		return "TaskFailed"
	case errors.As(err, &ser):
		return "SerializationError"
	case errors.As(err, &pv):
		return "ProtocolVersionMismatch"
	}
	return ""
}

// args reads scenario arguments, remembering the first malformed one.
type args struct {
	m   map[string]any
	err error
}

func (a *args) has(k string) bool { _, ok := a.m[k]; return ok && a.m[k] != nil }

func (a *args) str(k string) string {
	v, ok := a.m[k]
	if !ok || v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok && a.err == nil {
		a.err = fmt.Errorf("argument %s: want a string, got %T", k, v)
	}
	return s
}

func (a *args) int(k string) int {
	v, ok := a.m[k]
	if !ok || v == nil {
		return 0
	}
	f, ok := v.(float64)
	if !ok && a.err == nil {
		a.err = fmt.Errorf("argument %s: want a number, got %T", k, v)
	}
	return int(f)
}

func (a *args) ms(k string) time.Duration { return time.Duration(a.int(k)) * time.Millisecond }

func (a *args) bool(k string, def bool) bool {
	v, ok := a.m[k]
	if !ok || v == nil {
		return def
	}
	b, ok := v.(bool)
	if !ok && a.err == nil {
		a.err = fmt.Errorf("argument %s: want a boolean, got %T", k, v)
	}
	return b
}

// strings reads a list of strings; absent is nil, [] is an empty non-nil slice.
func (a *args) strings(k string) []string {
	v, ok := a.m[k]
	if !ok || v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		if a.err == nil {
			a.err = fmt.Errorf("argument %s: want a list, got %T", k, v)
		}
		return nil
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok && a.err == nil {
			a.err = fmt.Errorf("argument %s: want strings, got %T", k, x)
		}
		out = append(out, s)
	}
	return out
}

func (a *args) float(k string) *float64 {
	v, ok := a.m[k]
	if !ok || v == nil {
		return nil
	}
	f, ok := v.(float64)
	if !ok && a.err == nil {
		a.err = fmt.Errorf("argument %s: want a number, got %T", k, v)
	}
	return &f
}

func (a *args) strp(k string) *string {
	if !a.has(k) {
		return nil
	}
	s := a.str(k)
	return &s
}

// Do runs one scenario op.
func (t ClientTarget) Do(ctx context.Context, op string, m map[string]any) (any, error) {
	a := &args{m: m}
	res, err := t.do(ctx, op, a)
	if a.err != nil {
		return nil, fmt.Errorf("%s: %w", op, a.err)
	}
	if err != nil {
		return nil, err
	}
	return jsonShape(res)
}

func (t ClientTarget) do(ctx context.Context, op string, a *args) (any, error) {
	c := t.Client
	st := storeOf(c)
	switch op {
	case "submit":
		payload := a.m["payload"]
		if payload == nil {
			payload = map[string]any{}
		}
		return c.Submit(ctx, a.str("name"), payload, &cairnq.SubmitOptions{
			Key: a.str("key"), Queue: a.str("queue"), Conflict: cairnq.Conflict(a.str("conflict")),
			MaxAttempts: a.int("max_attempts"), Priority: a.int("priority"), Metadata: a.m["metadata"],
			ParentID: a.str("parent_id"), RootID: a.str("root_id"), CorrelationID: a.str("correlation_id"),
			Delay: a.ms("run_at_delay_ms"),
		})
	case "get":
		return orNil(c.Get(ctx, a.str("id")))
	case "get_by_key":
		return orNil(c.GetByKey(ctx, a.str("key")))
	case "get_status":
		return refOrNil(c.GetStatus(ctx, a.str("id")))
	case "get_status_by_key":
		return refOrNil(c.GetStatusByKey(ctx, a.str("key")))
	case "list":
		return c.List(ctx, &cairnq.ListOptions{
			Status: cairnq.Status(a.str("status")), Queue: a.str("queue"), Name: a.str("name"),
			RootID: a.str("root_id"), CorrelationID: a.str("correlation_id"),
			Limit: a.int("limit"), Offset: a.int("offset"),
		})
	case "cancel":
		return c.Cancel(ctx, a.str("id"))
	case "cancel_by_key":
		return c.CancelByKey(ctx, a.str("key"))
	case "retry":
		return c.Retry(ctx, a.str("id"), &cairnq.RetryOptions{ResetAttempt: a.bool("reset_attempt", false)})
	case "retry_by_key":
		return c.RetryByKey(ctx, a.str("key"), &cairnq.RetryOptions{ResetAttempt: a.bool("reset_attempt", false)})
	case "purge":
		return c.Purge(ctx, &cairnq.PurgeOptions{
			OlderThan: a.ms("older_than_ms"), Queue: a.str("queue"), Status: cairnq.Status(a.str("status")),
			Name: a.str("name"), Limit: a.int("limit"),
		})
	case "stats":
		return c.Stats(ctx, a.str("queue"))
	case "queue_depth":
		return c.QueueHeadroom(ctx, a.str("queue"), a.int("max_depth"))
	case "claim":
		return st.Claim(ctx, cairnqtype.ClaimParams{
			Queues: a.strings("queues"), Names: a.strings("names"), WorkerID: a.str("worker_id"),
			Lease: a.ms("lease_ms"), Limit: a.int("limit"),
		})
	case "heartbeat":
		return st.Heartbeat(ctx, a.str("id"), a.str("worker_id"), a.ms("lease_ms"))
	case "heartbeat_batch":
		ids := a.strings("ids")
		renewed, err := st.HeartbeatBatch(ctx, ids, a.str("worker_id"), a.ms("lease_ms"))
		if err != nil {
			return nil, err
		}
		// In the order asked: an absent id lost its lease.
		out := []map[string]any{}
		for _, id := range ids {
			if cancel, ok := renewed[id]; ok {
				out = append(out, map[string]any{"id": id, "cancel_requested": cancel})
			}
		}
		return out, nil
	case "progress":
		return st.Progress(ctx, a.str("id"), a.str("worker_id"), a.float("progress"), a.strp("message"))
	case "succeed":
		return st.Succeed(ctx, a.str("id"), a.str("worker_id"), a.m["result"])
	case "complete":
		// Complete answers with the status only; the scenarios check the
		// settled row, which is what Get reads back.
		ref, err := st.Complete(ctx, a.str("id"), a.str("worker_id"), a.m["result"])
		if err != nil {
			return nil, err
		}
		return st.Get(ctx, ref.ID)
	case "fail":
		var env cairnqtype.ErrorEnvelope
		if raw, ok := a.m["error"]; ok && raw != nil {
			b, err := json.Marshal(raw)
			if err != nil {
				return nil, err
			}
			if err := json.Unmarshal(b, &env); err != nil {
				return nil, fmt.Errorf("fail: error is not an envelope: %w", err)
			}
		}
		return st.Fail(ctx, a.str("id"), a.str("worker_id"), env, a.bool("retryable", true), a.ms("delay_ms"))
	case "snooze":
		// This SDK's own statement (protocol/sql/*/snooze.sql), not the
		// reference's: its scenarios are ours alone.
		return st.Snooze(ctx, a.str("id"), a.str("worker_id"), a.ms("delay_ms"))
	}
	return nil, fmt.Errorf("unknown op %q", op)
}

func orNil(t *cairnq.Task, err error) (any, error) {
	if errors.Is(err, cairnqtype.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

func refOrNil(r cairnq.TaskRef, err error) (any, error) {
	if errors.Is(err, cairnqtype.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// jsonShape turns a result into plain JSON values (maps, slices, float64)
// the interpreter compares; a nil task pointer becomes nil.
func jsonShape(v any) (any, error) {
	if t, ok := v.(*cairnq.Task); ok && t == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}
