package conformance

// The row and value checks: the values a statement returns come back in a
// form the store reads (int8_normalized, jsonb_normalized), and the
// arguments it passes bind as the store expects (null_params, params_bind).
// Also the helpers that read a row's values as the store does.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
)

// dbNowMs reads the database clock in epoch milliseconds, the way the
// store stamps tasks.
func dbNowMs(r reporter, e env) int64 {
	r.Helper()
	row := one(r, e.ctx, e.ex, "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint) AS now_ms")
	n, err := int8Value(column(r, row, "now_ms"))
	if err != nil {
		r.Fatalf("reading the database clock: %v (see int8_normalized)", err)
	}
	return n
}

// int8Value reads a non-NULL bigint in the forms executor.Row allows
// (executor.Int64 defines them).
func int8Value(v any) (int64, error) {
	n, ok, err := executor.Int64(v)
	if err == nil && !ok {
		err = errors.New("NULL where a value was selected")
	}
	return n, err
}

// textValue reads a text column: a string or its bytes.
func textValue(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	}
	return "", fmt.Errorf("%s is not text (want string or []byte)", describe(v))
}

// jsonValueOf reads a jsonb column as the store does (executor.JSONText)
// and decodes it.
func jsonValueOf(v any) (any, error) {
	text, err := executor.JSONText(v)
	if err != nil || text == nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(text, &out); err != nil {
		return nil, fmt.Errorf("%s is not JSON text: %v", describe(v), err)
	}
	return out, nil
}

// describe shows a driver's value with its Go type, text quoted.
func describe(v any) string {
	switch x := v.(type) {
	case string, []byte, json.RawMessage:
		return fmt.Sprintf("%T %q", x, x)
	}
	return fmt.Sprintf("%T %v", v, v)
}

func keys(row executor.Row) []string {
	out := make([]string, 0, len(row))
	for k := range row {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func decodeJSON(s string) any {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		panic(err) // the suite's own literals
	}
	return v
}

// int8Normalized: bigint values come back in a form the store reads, and
// the store's integer fields (epoch-ms stamps, counts) come out right.
func (s *suite) int8Normalized(r reporter) {
	e := s.setup(r)
	const fix = "Fix: return the driver's bigint value unconverted, in a form executor.Int64 reads (int64, int32, int, an exact float64, json.Number, or its decimal text as string or []byte)"
	row := one(r, e.ctx, e.ex, "SELECT 4503599627370497::int8 AS big, (-42)::int8 AS neg, 0::int8 AS zero, "+
		"NULL::int8 AS absent, count(*) AS counted FROM (VALUES (1), (2)) AS v(x)")
	for _, want := range []struct {
		col string
		n   int64
	}{{"big", 4503599627370497}, {"neg", -42}, {"zero", 0}, {"counted", 2}} {
		v := column(r, row, want.col)
		n, err := int8Value(v)
		switch {
		case err != nil:
			r.Errorf("bigint column %s (%d) came back as %s, which the store cannot read: %v. %s", want.col, want.n, describe(v), err, fix)
		case n != want.n:
			r.Errorf("bigint column %s came back as %s, which reads as %d, not %d. %s", want.col, describe(v), n, want.n, fix)
		}
	}
	if v := column(r, row, "absent"); v != nil {
		r.Errorf("a NULL bigint came back as %s, not nil. Fix: return SQL NULL as nil; the store reads nil as a timestamp that is not set", describe(v))
	}

	c := s.client(r, e)
	before := dbNowMs(r, e)
	sub, err := c.Submit(e.ctx, "certify.int8", map[string]any{"n": 1}, &cairnq.SubmitOptions{Queue: "certify", MaxAttempts: 7, Priority: -3})
	if err != nil {
		r.Fatalf("Submit through the store failed: %v. The store reads the inserted row back (RETURNING *), epoch-ms bigint columns included. %s", err, fix)
	}
	after := dbNowMs(r, e)
	got, err := c.Get(e.ctx, sub.ID)
	if err != nil {
		r.Fatalf("Get through the store failed: %v. %s", err, fix)
	}
	list, err := c.List(e.ctx, &cairnq.ListOptions{Queue: "certify"})
	if err != nil {
		r.Fatalf("List through the store failed: %v. %s", err, fix)
	}
	if len(list) != 1 {
		r.Fatalf("List returned %d tasks, want the 1 submitted", len(list))
	}
	for op, task := range map[string]*cairnq.Task{"Submit": sub, "Get": got, "List": list[0]} {
		for field, at := range map[string]time.Time{"created_at_ms": task.CreatedAt, "updated_at_ms": task.UpdatedAt, "run_at_ms": task.RunAt} {
			if ms := at.UnixMilli(); ms < before || ms > after {
				r.Errorf("%s returned %s = %d, outside [%d, %d], the database clock just before and after the submit: the store misread a bigint column. %s", op, field, ms, before, after, fix)
			}
		}
		if task.MaxAttempts != 7 || task.Priority != -3 || task.Attempt != 0 {
			r.Errorf("%s returned max_attempts %d, priority %d, attempt %d; want 7, -3, 0. %s", op, task.MaxAttempts, task.Priority, task.Attempt, fix)
		}
		if !task.LeaseUntil.IsZero() || !task.CompletedAt.IsZero() {
			r.Errorf("%s returned lease_until %v and completed_at %v for a queued task, whose columns are NULL. Fix: return SQL NULL as nil", op, task.LeaseUntil, task.CompletedAt)
		}
	}
	stats, err := c.Stats(e.ctx, "certify")
	if err != nil {
		r.Fatalf("Stats through the store failed: %v. count(*) is a bigint. %s", err, fix)
	}
	if n := stats["certify"].Queued; n != 1 {
		r.Errorf("Stats counts %d queued tasks, want 1: the store misread count(*), a bigint. %s", n, fix)
	}
	if room, err := c.QueueHeadroom(e.ctx, "certify", 5); err != nil || room != 4 {
		r.Errorf("QueueHeadroom(5) = %d, %v; want 4 with one task queued. %s", room, err, fix)
	}
}

// jsonbNormalized: jsonb values come back in a form the store reads, and
// payload, metadata and result round-trip through the store unchanged.
func (s *suite) jsonbNormalized(r reporter) {
	e := s.setup(r)
	const fix = "Fix: return jsonb as the server's text ([]byte, string or json.RawMessage), or decoded as a map[string]any or []any; a string is always taken as JSON text, so a driver that decodes jsonb scalars must hand those back undecoded"
	cols := []struct{ col, json string }{
		{"obj", `{"s": "naïve \"q\" \\ 🚀", "n": -1.5, "b": true, "z": null, "l": [1, "two", []], "o": {}}`},
		{"arr", `[{"k": "v"}, 2, null]`},
		{"str", `"hello"`},
		{"numstr", `"123"`},
		{"num", `17`},
	}
	var sel []string
	for _, c := range cols {
		sel = append(sel, "'"+strings.ReplaceAll(c.json, "'", "''")+"'::jsonb AS "+c.col)
	}
	row := one(r, e.ctx, e.ex, "SELECT "+strings.Join(sel, ", ")+", NULL::jsonb AS absent")
	for _, c := range cols {
		v := column(r, row, c.col)
		got, err := jsonValueOf(v)
		if err != nil {
			r.Errorf("jsonb column %s (%s) cannot be read: %v. %s", c.col, c.json, err, fix)
			continue
		}
		if want := decodeJSON(c.json); !jsonEqual(got, want) {
			r.Errorf("jsonb column %s came back as %s, which reads as %s, want %s. %s", c.col, describe(v), show(got), show(want), fix)
		}
	}
	if v := column(r, row, "absent"); v != nil {
		r.Errorf("a NULL jsonb came back as %s, not nil. Fix: return SQL NULL as nil", describe(v))
	}

	c := s.client(r, e)
	metadata := map[string]any{"origin": "café", "flags": []any{true, false, nil}}
	payloads := []any{
		decodeJSON(cols[0].json), decodeJSON(cols[1].json), "hello", "123", 17.0, true,
	}
	ids := map[string]any{}
	for _, p := range payloads {
		task, err := c.Submit(e.ctx, "certify.json", p, &cairnq.SubmitOptions{Queue: "certify", Metadata: metadata})
		if err != nil {
			r.Fatalf("Submit of payload %s through the store failed: %v. %s", show(p), err, fix)
		}
		ids[task.ID] = p
	}
	claimed, err := storeOf(c).Claim(e.ctx, cairnqtype.ClaimParams{Queues: []string{"certify"}, WorkerID: "certify", Lease: time.Minute, Limit: len(payloads)})
	if err != nil || len(claimed) != len(payloads) {
		r.Fatalf("Claim through the store returned %d tasks, %v; want %d. %s", len(claimed), err, len(payloads), fix)
	}
	for id, p := range ids {
		// The result echoes the payload: the result column is jsonb too.
		if _, err := storeOf(c).Succeed(e.ctx, id, "certify", p); err != nil {
			r.Fatalf("Succeed with result %s through the store failed: %v. %s", show(p), err, fix)
		}
		got, err := c.Get(e.ctx, id)
		if err != nil {
			r.Fatalf("Get through the store failed: %v. %s", err, fix)
		}
		for field, raw := range map[string]json.RawMessage{"payload": got.Payload, "result": got.Result} {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				r.Errorf("Get returned %s `%s`, which is not JSON (it went in as %s). %s", field, raw, show(p), fix)
			} else if !jsonEqual(v, jsonShapeOf(p)) {
				r.Errorf("Get returned %s `%s`, want %s. %s", field, raw, show(p), fix)
			}
		}
		var md any
		if err := json.Unmarshal(got.Metadata, &md); err != nil || !jsonEqual(md, jsonShapeOf(metadata)) {
			r.Errorf("Get returned metadata `%s`, want %s. %s", got.Metadata, show(metadata), fix)
		}
	}
}

// jsonShapeOf converts a Go value to decoded-JSON shapes.
func jsonShapeOf(v any) any {
	out, err := jsonValue(v)
	if err != nil {
		panic(err) // the suite's own values
	}
	return out
}

// nullParams: a nil argument binds SQL NULL, and SQL NULL comes back nil.
func (s *suite) nullParams(r reporter) {
	e := s.setup(r)
	const fix = "Fix: bind a nil argument as SQL NULL, whatever the parameter's type; the store passes nil for every absent value (optional filters, parent ids, messages)"
	rows, err := e.ex.Query(e.ctx, `SELECT
		CASE WHEN $1::text IS NULL THEN 'null' ELSE 'bound' END AS text_param,
		CASE WHEN $2::bigint IS NULL THEN 'null' ELSE 'bound' END AS bigint_param,
		CASE WHEN $3::jsonb IS NULL THEN 'null' ELSE 'bound' END AS jsonb_param,
		CASE WHEN $4::double precision IS NULL THEN 'null' ELSE 'bound' END AS float_param,
		$5::text AS after_nulls,
		NULL::text AS null_text`, nil, nil, nil, nil, "x")
	if err != nil {
		r.Fatalf("Query with nil arguments failed: %v. %s", err, fix)
	}
	if len(rows) != 1 {
		r.Fatalf("Query returned %d rows, want 1", len(rows))
	}
	row := rows[0]
	for _, col := range []string{"text_param", "bigint_param", "jsonb_param", "float_param"} {
		got, err := textValue(column(r, row, col))
		if err != nil {
			r.Errorf("%s: %v", col, err)
		} else if got != "null" {
			r.Errorf("a nil argument for a %s parameter did not bind SQL NULL: the server saw a value. %s", strings.TrimSuffix(col, "_param"), fix)
		}
	}
	if got, err := textValue(column(r, row, "after_nulls")); err != nil || got != "x" {
		r.Errorf("the argument after four nils came back as %v (%v), want \"x\": arguments must bind to $1..$n in order, nils included. %s", got, err, fix)
	}
	if v := column(r, row, "null_text"); v != nil {
		r.Errorf("a NULL text column came back as %s, not nil. Fix: return SQL NULL as nil, never as a zero value", describe(v))
	}
}

// paramsBind: the argument types the store passes bind as it expects.
func (s *suite) paramsBind(r reporter) {
	e := s.setup(r)
	text := "it's \"quoted\", back\\slash, naïve 🚀"
	array := `{"a","b \"q\" \\ c","","NULL-ish"}`
	row := one(r, e.ctx, e.ex, `SELECT $1::text AS s, $2::bigint AS i, $3::integer AS i4, $4::double precision AS f,
		$5::boolean AS b, cardinality($6::text[]) AS n, ($6::text[])[2] AS second, $7::jsonb ->> 'k' AS k,
		CASE WHEN $1::text = $8 THEN 'same' ELSE 'differs' END AS reused`,
		text, int64(1)<<40+1, int64(-7), 2.5, true, array, `{"k": "v ü"}`, text)
	if got, err := textValue(column(r, row, "s")); err != nil || got != text {
		r.Errorf("a string argument came back as %q (%v), want %q. Fix: bind string arguments as text, byte for byte", got, err, text)
	}
	for _, want := range []struct {
		col string
		n   int64
	}{{"i", 1<<40 + 1}, {"i4", -7}, {"n", 4}} {
		if n, err := int8Value(column(r, row, want.col)); err != nil || n != want.n {
			r.Errorf("an int64 argument (%s) came back as %d (%v), want %d. Fix: bind int64 arguments to bigint and integer parameters", want.col, n, err, want.n)
		}
	}
	switch f := column(r, row, "f").(type) {
	case float64:
		if f != 2.5 {
			r.Errorf("a float64 argument came back as %v, want 2.5", f)
		}
	default:
		if s, err := textValue(f); err != nil || s != "2.5" {
			r.Errorf("a float64 argument came back as %s, want 2.5. Fix: bind float64 arguments to double precision parameters", describe(f))
		}
	}
	if b, ok := column(r, row, "b").(bool); !ok || !b {
		r.Errorf("a bool argument came back as %s, want true. Fix: bind bool arguments to boolean parameters and return booleans as bool", describe(row["b"]))
	}
	if got, err := textValue(column(r, row, "second")); err != nil || got != `b "q" \ c` {
		r.Errorf("a text[] literal bound as a string lost its quoting: element 2 came back as %q (%v). Fix: bind the string as is; the store sends arrays as text[] literals", got, err)
	}
	if got, err := textValue(column(r, row, "k")); err != nil || got != "v ü" {
		r.Errorf("JSON text bound as a string and cast to jsonb came back as %q (%v), want \"v ü\". Fix: bind the string as is", got, err)
	}
	if got, err := textValue(column(r, row, "reused")); err != nil || got != "same" {
		r.Errorf("a parameter used twice ($1) did not bind the same value both times (%q, %v). Fix: bind $n by position; the store reuses parameters", got, err)
	}
	rows, err := e.ex.Query(e.ctx, "SELECT 1 AS x WHERE $1::boolean", false)
	if err != nil || len(rows) != 0 {
		r.Errorf("a statement yielding no rows returned %d rows, %v; want none and no error", len(rows), err)
	}
}

// rowsByPosition checks executor.PositionalQuerier where the executor, or the
// session of its transactions, has it: the store reads a claim's rows
// through it, so it must return exactly what Query returns, by position.
func (s *suite) rowsByPosition(r reporter) {
	e := s.setup(r)
	const fix = "Fix: build QueryPositional and Query from the same decoding, Columns in the statement's order and Values row after row"
	const sql = "SELECT x AS n, 'text ' || x AS t, NULL::int8 AS absent, x % 2 = 0 AS even, " +
		"jsonb_build_object('x', x) AS doc, 1.5::float8 AS f, x AS n FROM generate_series(1, 3) AS g(x) ORDER BY x"
	compare := func(where string, sess executor.Session) {
		rq, ok := sess.(executor.PositionalQuerier)
		if !ok {
			return
		}
		maps, err := sess.Query(e.ctx, sql)
		if err != nil {
			r.Fatalf("%s: Query: %v", where, err)
		}
		rows, err := rq.QueryPositional(e.ctx, sql)
		if err != nil {
			r.Fatalf("%s: QueryPositional: %v. %s", where, err, fix)
		}
		want := []string{"n", "t", "absent", "even", "doc", "f", "n"}
		if !slices.Equal(rows.Columns, want) {
			r.Fatalf("%s: QueryPositional named the columns %q, want %q. %s", where, rows.Columns, want, fix)
		}
		if len(rows.Values) != len(maps) {
			r.Fatalf("%s: QueryPositional returned %d rows, Query %d. %s", where, len(rows.Values), len(maps), fix)
		}
		for i, m := range maps {
			if len(rows.Values[i]) != len(want) {
				r.Fatalf("%s: QueryPositional returned %d values in row %d for %d columns. %s", where, len(rows.Values[i]), i, len(want), fix)
			}
			for j, col := range want { // n, named twice, holds one value
				got, q := rows.Values[i][j], m[col]
				if !sameValue(got, q) {
					r.Errorf("%s: row %d column %s: QueryPositional gave %s, Query %s. %s", where, i, col, describe(got), describe(q), fix)
				}
			}
		}
	}
	compare("the executor", e.ex)
	if err := e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		compare("a transaction's session", sess)
		return nil
	}); err != nil {
		r.Fatalf("Tx: %v", err)
	}
}

// sameValue reports whether two values of one column are the same value
// in the same form (JSON text compared as text).
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case []byte:
		y, ok := b.([]byte)
		return ok && string(x) == string(y)
	case json.RawMessage:
		y, ok := b.(json.RawMessage)
		return ok && string(x) == string(y)
	}
	return reflect.DeepEqual(a, b)
}
