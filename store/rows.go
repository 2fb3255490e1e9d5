package store

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/cairnq/cairnq-go/executor"
)

// This file is the one place rows become values. Drivers disagree about
// wire forms (int8 as int64, string or json.Number; jsonb as bytes, string
// or decoded maps), and normalizing here rather than asking each adapter to
// reconfigure its driver is what keeps an application's own type mapping
// untouched.

// rowToTask turns a row of cairnq_tasks into a Task.
func rowToTask(r executor.Row) (*Task, error) {
	var t Task
	var err error
	get := func(col string) any { return r[col] }
	str := func(col string) string {
		if err != nil {
			return ""
		}
		var s string
		s, _, err = asString(col, get(col))
		return s
	}
	i64 := func(col string) (int64, bool) {
		if err != nil {
			return 0, false
		}
		var n int64
		var ok bool
		n, ok, err = asInt64(col, get(col))
		return n, ok
	}
	raw := func(col string) json.RawMessage {
		if err != nil {
			return nil
		}
		var m json.RawMessage
		m, err = asJSON(col, get(col))
		return m
	}
	t.ID = str("id")
	t.Name = str("name")
	t.Queue = str("queue")
	t.Status = Status(str("status"))
	t.Payload = raw("payload")
	t.Metadata = raw("metadata")
	t.Result = raw("result")
	if e := raw("error"); e != nil {
		env, perr := parseEnvelope(e)
		if perr != nil && err == nil {
			err = perr
		}
		t.Error = env
	}
	if err == nil {
		var f float64
		var ok bool
		f, ok, err = asFloat("progress", get("progress"))
		if ok {
			t.Progress = &f
		}
	}
	if err == nil {
		var s string
		var ok bool
		s, ok, err = asString("message", get("message"))
		if ok {
			t.Message = &s
		}
	}
	n, _ := i64("attempt")
	t.Attempt = int(n)
	n, _ = i64("max_attempts")
	t.MaxAttempts = int(n)
	n, _ = i64("priority")
	t.Priority = int(n)
	t.WorkerID = str("worker_id")
	t.LeaseUntil = msTime(i64("lease_until_ms"))
	t.RunAt = msTime(i64("run_at_ms"))
	t.CancelRequestedAt = msTime(i64("cancel_requested_at_ms"))
	t.ParentID = str("parent_id")
	t.RootID = str("root_id")
	t.CorrelationID = str("correlation_id")
	t.CreatedAt = msTime(i64("created_at_ms"))
	t.UpdatedAt = msTime(i64("updated_at_ms"))
	t.CompletedAt = msTime(i64("completed_at_ms"))
	if err != nil {
		return nil, fmt.Errorf("cairnq: reading task row %q: %w", t.ID, err)
	}
	return &t, nil
}

func rowsToTasks(rows []executor.Row) ([]*Task, error) {
	out := make([]*Task, 0, len(rows))
	for _, r := range rows {
		t, err := rowToTask(r)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func rowToRef(r executor.Row) (TaskRef, error) {
	id, _, err := asString("id", r["id"])
	if err != nil {
		return TaskRef{}, err
	}
	st, _, err := asString("status", r["status"])
	return TaskRef{ID: id, Status: Status(st)}, err
}

// parseEnvelope reads a stored error. Another SDK (or a hand-written row)
// may have stored something that is not an envelope; it is kept as the
// message rather than failing the whole read.
func parseEnvelope(b json.RawMessage) (*ErrorEnvelope, error) {
	var env ErrorEnvelope
	if err := json.Unmarshal(b, &env); err != nil {
		return &ErrorEnvelope{Type: "Error", Code: "unparsed_error", Message: string(b)}, nil
	}
	if env.Details == nil {
		env.Details = map[string]any{}
	}
	return &env, nil
}

// asInt64 reads an integer column in any form a driver produces. ok is false
// for SQL NULL.
func asInt64(col string, v any) (n int64, ok bool, err error) {
	switch x := v.(type) {
	case nil:
		return 0, false, nil
	case int64:
		return x, true, nil
	case int32:
		return int64(x), true, nil
	case int:
		return int64(x), true, nil
	case int16:
		return int64(x), true, nil
	case int8:
		return int64(x), true, nil
	case uint32:
		return int64(x), true, nil
	case uint64:
		if x > math.MaxInt64 {
			return 0, false, fmt.Errorf("column %s: %d overflows int64", col, x)
		}
		return int64(x), true, nil
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, false, fmt.Errorf("column %s: %v is not an exact integer", col, x)
		}
		return int64(x), true, nil
	case float32:
		return asInt64(col, float64(x))
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("column %s: %w", col, err)
		}
		return n, true, nil
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("column %s: %w", col, err)
		}
		return n, true, nil
	case []byte:
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("column %s: %w", col, err)
		}
		return n, true, nil
	case bool:
		if x {
			return 1, true, nil
		}
		return 0, true, nil
	}
	return 0, false, fmt.Errorf("column %s: unexpected integer type %T", col, v)
}

// asFloat reads a floating-point column. ok is false for SQL NULL.
func asFloat(col string, v any) (f float64, ok bool, err error) {
	switch x := v.(type) {
	case nil:
		return 0, false, nil
	case float64:
		return x, true, nil
	case float32:
		return float64(x), true, nil
	case int64:
		return float64(x), true, nil
	case int32:
		return float64(x), true, nil
	case int:
		return float64(x), true, nil
	case json.Number:
		f, err := x.Float64()
		return f, err == nil, err
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil, err
	case []byte:
		f, err := strconv.ParseFloat(string(x), 64)
		return f, err == nil, err
	}
	return 0, false, fmt.Errorf("column %s: unexpected float type %T", col, v)
}

// asString reads a text column. ok is false for SQL NULL.
func asString(col string, v any) (s string, ok bool, err error) {
	switch x := v.(type) {
	case nil:
		return "", false, nil
	case string:
		return x, true, nil
	case []byte:
		return string(x), true, nil
	}
	return "", false, fmt.Errorf("column %s: unexpected text type %T", col, v)
}

// asJSON reads a JSON column (SQLite text, Postgres jsonb) as encoded JSON.
// nil is SQL NULL. A JSON null stored in the column is kept as "null".
func asJSON(col string, v any) (json.RawMessage, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return append(json.RawMessage(nil), x...), nil
	case []byte:
		return append(json.RawMessage(nil), x...), nil
	case string:
		return json.RawMessage(x), nil
	}
	// A driver that decodes jsonb itself hands back maps, slices, numbers...
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("column %s: re-encoding %T: %w", col, v, err)
	}
	return b, nil
}

// asBool reads a boolean the dialect's way (SQLite 0/1, Postgres bool).
func asBool(col string, v any) (bool, error) {
	if b, ok := v.(bool); ok {
		return b, nil
	}
	n, ok, err := asInt64(col, v)
	return ok && n != 0, err
}
