package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
)

// The value path of Submit and the row path of every read, fuzzed. The seed
// corpora live in testdata/fuzz/<FuzzName>/; .ci/run fuzzes each target
// briefly. The invariants are checked against models written here from the
// documented limits (limits.go), not against the code under test.

// ---------------------------------------------------------------- values

// jsonFacts is what an independent reading of a JSON text finds.
type jsonFacts struct {
	depth     int  // deepest nesting of arrays and objects
	nul       bool // a string or key holds U+0000
	replEsc   bool // a \ufffd escape, written in lower case
	lone      bool // a \u escape of a surrogate that is not half of a pair
	longNum   bool // a number of more than 1000 characters
	bigExpNum bool // a number whose exponent is beyond ±1000
}

// refused reports whether the limits refuse a text with these facts.
func (f jsonFacts) refused() bool {
	return f.depth > cairnqtype.MaxJSONDepth || f.nul || f.replEsc || f.lone || f.longNum || f.bigExpNum
}

// readJSON decodes text token by token (text must be valid JSON).
func readJSON(text []byte) (jsonFacts, error) {
	var f jsonFacts
	d := json.NewDecoder(bytes.NewReader(text))
	d.UseNumber()
	depth := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return f, err
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '[' || v == '{' {
				depth++
				f.depth = max(f.depth, depth)
			} else {
				depth--
			}
		case string:
			if strings.ContainsRune(v, 0) {
				f.nul = true
			}
		case json.Number:
			if len(v) > 1000 {
				f.longNum = true
			}
			if i := strings.IndexAny(string(v), "eE"); i >= 0 {
				exp := strings.TrimLeft(strings.TrimLeft(string(v[i+1:]), "+-"), "0")
				if n, err := strconv.Atoi(exp); len(exp) > 9 || err == nil && n > 1000 {
					f.bigExpNum = true
				}
			}
		}
	}
	f.replEsc = hasEscape(text, "ufffd")
	f.lone = hasLoneSurrogate(text)
	return f, nil
}

// hasLoneSurrogate reports whether text holds a \u escape of a surrogate
// that is not a high one immediately followed by the escape of a low one.
func hasLoneSurrogate(text []byte) bool {
	// The \u escapes, in order: where each starts and what it encodes.
	type esc struct {
		at int
		r  uint64
	}
	var escs []esc
	for i := 0; i+1 < len(text); i++ {
		if text[i] != '\\' {
			continue
		}
		if text[i+1] == 'u' && i+6 <= len(text) {
			r, err := strconv.ParseUint(string(text[i+2:i+6]), 16, 32)
			if err == nil {
				escs = append(escs, esc{i, r})
			}
		}
		i++ // step over the escaped character, a backslash included
	}
	for k := 0; k < len(escs); k++ {
		switch r := escs[k].r; {
		case r >= 0xD800 && r <= 0xDBFF:
			if k+1 == len(escs) || escs[k+1].at != escs[k].at+6 || escs[k+1].r < 0xDC00 || escs[k+1].r > 0xDFFF {
				return true
			}
			k++
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		}
	}
	return false
}

// hasEscape reports whether text holds the escape \<esc>: a backslash run
// of odd length before esc (an even run is escaped backslashes).
func hasEscape(text []byte, esc string) bool {
	for i := 0; ; {
		j := bytes.Index(text[i:], []byte(esc))
		if j < 0 {
			return false
		}
		k := i + j
		run := 0
		for k-run-1 >= 0 && text[k-run-1] == '\\' {
			run++
		}
		if run%2 == 1 {
			return true
		}
		i = k + 1
	}
}

// checkEncoded checks the invariants of one encodeJSON outcome: a refusal
// is a typed *SerializationError for field; an accepted text is valid
// JSON, valid UTF-8, within MaxValueBytes and MaxJSONDepth, and holds no
// NUL. It returns whether the value was accepted.
func checkEncoded(t *testing.T, what, field, out string, err error) bool {
	t.Helper()
	if err != nil {
		var se *cairnqtype.SerializationError
		if !errors.Is(err, cairnqtype.ErrInvalidArgument) || !errors.As(err, &se) {
			t.Fatalf("%s: refused with %T, want *SerializationError (ErrInvalidArgument): %v", what, err, err)
		}
		if se.Field != field {
			t.Fatalf("%s: SerializationError.Field %q, want %q", what, se.Field, field)
		}
		if out != "" {
			t.Fatalf("%s: refused, yet returned %.80q", what, out)
		}
		return false
	}
	if !json.Valid([]byte(out)) {
		t.Fatalf("%s: accepted text is not JSON: %.200q", what, out)
	}
	if !utf8.ValidString(out) {
		t.Fatalf("%s: accepted text is not UTF-8: %.200q", what, out)
	}
	if len(out) > cairnqtype.MaxValueBytes {
		t.Fatalf("%s: accepted %d bytes, the limit is %d", what, len(out), cairnqtype.MaxValueBytes)
	}
	facts, err := readJSON([]byte(out))
	if err != nil {
		t.Fatalf("%s: accepted text does not decode: %v", what, err)
	}
	if facts.depth > cairnqtype.MaxJSONDepth {
		t.Fatalf("%s: accepted text nests %d deep, the limit is %d", what, facts.depth, cairnqtype.MaxJSONDepth)
	}
	if facts.nul || hasEscape([]byte(out), "u0000") {
		t.Fatalf("%s: accepted text holds a NUL: %.200q", what, out)
	}
	if facts.refused() {
		t.Fatalf("%s: accepted text breaks a limit (%+v): %.200q", what, facts, out)
	}
	return true
}

// roundTrips checks that an accepted text decodes to want.
func roundTrips(t *testing.T, what, out string, want any) {
	t.Helper()
	got := reflect.New(reflect.TypeOf(want))
	if err := json.Unmarshal([]byte(out), got.Interface()); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !reflect.DeepEqual(got.Elem().Interface(), want) {
		t.Fatalf("%s: reads back as %.200q, want %.200q", what, fmt.Sprint(got.Elem().Interface()), fmt.Sprint(want))
	}
}

// textOK is the model of a Go string in a value: kept exactly, so it must
// be UTF-8 (encoding/json would replace the rest with U+FFFD) without NUL
// (Postgres's jsonb cannot hold it).
func textOK(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// FuzzEncodeJSON runs Submit's value path (encodeJSON) on fuzzed JSON text
// as a json.RawMessage, on Go values built from the fuzzed string (a
// string, a map, nested arrays), and on the Go value the text decodes to.
// It never panics; every refusal is a *SerializationError satisfying
// ErrInvalidArgument; every accepted text keeps every limit; and the
// accept/refuse decision matches a model of the limits.
func FuzzEncodeJSON(f *testing.F) {
	f.Add([]byte(`{"page":1}`), "render", uint16(1))
	f.Add([]byte(`"\u0000"`), "a\x00b", uint16(0))
	f.Add([]byte(`["\ufffd"]`), "caf\xe9", uint16(2))
	f.Add([]byte(strings.Repeat("[", 512)+strings.Repeat("]", 512)), "", uint16(512))
	f.Add([]byte(strings.Repeat("[", 513)+strings.Repeat("]", 513)), "x", uint16(513))
	f.Fuzz(func(t *testing.T, raw []byte, s string, depth uint16) {
		// A json.RawMessage passes through as its trimmed text, or is refused.
		out, err := encodeJSON("payload", json.RawMessage(raw), "{}")
		accepted := checkEncoded(t, "RawMessage", "payload", out, err)
		want := raw != nil // nil is the default {}
		trimmed := bytes.TrimSpace(raw)
		if want {
			want = json.Valid(raw) && utf8.Valid(raw) && len(trimmed) <= cairnqtype.MaxValueBytes
		}
		if want {
			facts, ferr := readJSON(raw)
			want = ferr == nil && !facts.refused()
		}
		switch {
		case raw == nil:
			if out != "{}" {
				t.Fatalf("nil RawMessage encodes as %q, want {}", out)
			}
		case accepted != want:
			t.Fatalf("RawMessage %.200q: accepted=%v, the model says %v (err %v)", raw, accepted, want, err)
		case accepted && out != string(trimmed):
			t.Fatalf("RawMessage %.200q stored as %.200q, want its trimmed text", raw, out)
		}
		if err != nil && json.Valid(raw) && errors.Is(err, cairnqtype.ErrValueTooLarge) != (len(trimmed) > cairnqtype.MaxValueBytes) {
			t.Fatalf("RawMessage of %d bytes: ErrValueTooLarge=%v", len(trimmed), errors.Is(err, cairnqtype.ErrValueTooLarge))
		}

		// A Go string is kept exactly or refused.
		out, err = encodeJSON("payload", s, "{}")
		if accepted := checkEncoded(t, "string", "payload", out, err); accepted != textOK(s) {
			t.Fatalf("string %q: accepted=%v, want %v (err %v)", s, accepted, textOK(s), err)
		} else if accepted {
			roundTrips(t, "string", out, s)
		}

		// So is a map's key.
		m := map[string]string{s: strings.ToUpper(s)}
		out, err = encodeJSON("metadata", m, "{}")
		if accepted, ok := checkEncoded(t, "map", "metadata", out, err), textOK(s) && textOK(m[s]); accepted != ok {
			t.Fatalf("map %q: accepted=%v, want %v (err %v)", m, accepted, ok, err)
		} else if accepted {
			roundTrips(t, "map", out, m)
		}

		// Nesting is kept up to MaxJSONDepth. Depths past twice the limit
		// fold to shallow ones, which keep most runs quick.
		d := int(depth)
		if d > 2*cairnqtype.MaxJSONDepth+8 {
			d %= 8
		}
		var v any = s
		for range d {
			v = []any{v}
		}
		out, err = encodeJSON("payload", v, "{}")
		if accepted, ok := checkEncoded(t, "nested", "payload", out, err), d <= cairnqtype.MaxJSONDepth && textOK(s); accepted != ok {
			t.Fatalf("%q nested %d deep: accepted=%v, want %v (err %v)", s, d, accepted, ok, err)
		} else if accepted {
			roundTrips(t, "nested", out, v)
		}

		// The Go value the text decodes to goes through encoding/json.
		if json.Valid(raw) {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			var decoded any
			if dec.Decode(&decoded) == nil {
				out, err = encodeJSON("result", decoded, "null")
				if checkEncoded(t, "decoded", "result", out, err) {
					again := json.NewDecoder(strings.NewReader(out))
					again.UseNumber()
					var back any
					if err := again.Decode(&back); err != nil || !reflect.DeepEqual(back, decoded) {
						t.Fatalf("decoded %.200q re-encodes as %.200q (%v)", raw, out, err)
					}
				}
			}
		}
	})
}

// ---------------------------------------------------------------- rows

// Columns of cairnq_tasks by the kind of value rowToTask reads from them.
var (
	textCols  = []string{"id", "name", "queue", "status", "worker_id", "parent_id", "root_id", "correlation_id", "message"}
	jsonCols  = []string{"payload", "metadata", "result", "error"}
	intCols   = []string{"attempt", "max_attempts", "priority", "lease_until_ms", "run_at_ms", "cancel_requested_at_ms", "created_at_ms", "updated_at_ms", "completed_at_ms"}
	floatCols = []string{"progress"}
)

// fuzzRow reads a row from data: for each column a shape byte, a length
// byte and that many bytes, which the shape turns into a value of one of
// the forms drivers produce (executor.Row's documentation) or a few they
// do not. Running out of data leaves the remaining columns NULL.
type fuzzRow struct{ data []byte }

func (r *fuzzRow) byte() byte {
	if len(r.data) == 0 {
		return 0
	}
	b := r.data[0]
	r.data = r.data[1:]
	return b
}

func (r *fuzzRow) chunk() []byte {
	n := min(int(r.byte()), len(r.data))
	c := append([]byte(nil), r.data[:n]...)
	r.data = r.data[n:]
	return c
}

// u64 reads a chunk's first 8 bytes as a number, zero-padded.
func u64(c []byte) uint64 {
	var b [8]byte
	copy(b[:], c)
	return binary.LittleEndian.Uint64(b[:])
}

// absent is the shape that leaves the column out of the row.
type absent struct{}

func (r *fuzzRow) value() any {
	shape := r.byte() % 20
	c := r.chunk()
	n := u64(c)
	switch shape {
	case 0:
		return nil
	case 1:
		return int64(n)
	case 2:
		return int32(n)
	case 3:
		return int(n)
	case 4:
		return string(c)
	case 5:
		return c
	case 6:
		return math.Float64frombits(n)
	case 7:
		return json.Number(c)
	case 8:
		return map[string]any{string(c): math.Float64frombits(n), "n": int64(n)}
	case 9:
		return n%2 == 1
	case 10:
		return json.RawMessage(c)
	case 11:
		return []any{string(c), int64(n)}
	case 12:
		return n
	case 13:
		return math.Float32frombits(uint32(n))
	case 14:
		return struct{ X int }{1}
	case 15:
		return strconv.FormatInt(int64(n), 10) // an int8 as text (SQLite, some drivers)
	case 16:
		return []byte(strconv.FormatInt(int64(n)>>8, 10))
	case 17:
		return float64(int64(n) >> 11) // exactly an integer, as a float
	case 18:
		return json.Number(strconv.FormatInt(int64(n), 10))
	}
	return absent{}
}

// model is what a column's value must read as, by an independent reading
// of executor.Row's contract (the readers of package executor).
type model struct {
	present bool // not SQL NULL
	valid   bool // a form the column accepts
	s       string
	n       int64
	f       float64
	j       []byte
}

func modelText(v any) model {
	switch x := v.(type) {
	case nil:
		return model{valid: true}
	case string:
		return model{present: true, valid: true, s: x}
	case []byte:
		return model{present: true, valid: true, s: string(x)}
	}
	return model{}
}

func modelInt(v any) model {
	m := model{present: true, valid: true}
	switch x := v.(type) {
	case nil:
		return model{valid: true}
	case int64:
		m.n = x
	case int32:
		m.n = int64(x)
	case int:
		m.n = int64(x)
	case float64:
		m.n, m.valid = int64(x), x == math.Trunc(x) && math.Abs(x) <= 1<<53
	case string, []byte, json.Number:
		var err error
		m.n, err = strconv.ParseInt(fmt.Sprintf("%s", x), 10, 64)
		m.valid = err == nil
	default:
		return model{}
	}
	if !m.valid {
		return model{}
	}
	return m
}

func modelFloat(v any) model {
	m := model{present: true, valid: true}
	switch x := v.(type) {
	case nil:
		return model{valid: true}
	case float64:
		m.f = x
	case int64:
		m.f = float64(x)
	case int32:
		m.f = float64(x)
	case int:
		m.f = float64(x)
	case string, []byte, json.Number:
		var err error
		m.f, err = strconv.ParseFloat(fmt.Sprintf("%s", x), 64)
		m.valid = err == nil
	default:
		return model{}
	}
	if !m.valid {
		return model{}
	}
	return m
}

func modelJSON(v any) model {
	switch x := v.(type) {
	case nil:
		return model{valid: true}
	case json.RawMessage:
		return model{present: true, valid: true, j: bytes.Clone([]byte(x))}
	case []byte:
		return model{present: true, valid: true, j: bytes.Clone(x)}
	case string:
		return model{present: true, valid: true, j: []byte(x)}
	case map[string]any, []any: // decoded by the driver; scalars are not
		b, err := json.Marshal(v)
		if err != nil {
			return model{}
		}
		return model{present: true, valid: true, j: b}
	}
	return model{}
}

func sameFloat(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

// FuzzRowToTask feeds the row normalizer rows whose columns take every
// form a driver may produce (and some none should). It never panics; it
// fails exactly when a column holds a value the column cannot take; and
// a task it returns holds exactly what the row held, in copies the driver
// may reuse its buffers under.
func FuzzRowToTask(f *testing.F) {
	// A SQLite-shaped row: int64 and string.
	f.Add([]byte{4, 5, 't', 'a', 's', 'k', '1', 4, 1, 'n', 4, 7, 'd', 'e', 'f', 'a', 'u', 'l', 't', 4, 6, 'q', 'u', 'e', 'u', 'e', 'd'})
	// A pgx-shaped row: JSON as bytes, a json.Number, a float progress.
	f.Add([]byte{5, 2, 'i', 'd', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 2, '{', '}', 5, 4, 'n', 'u', 'l', 'l', 0, 0, 5, 3, 'x', 'y', 'z', 18, 1, 3, 6, 8, 0, 0, 0, 0, 0, 0, 0xe0, 0x3f})
	f.Fuzz(func(t *testing.T, data []byte) {
		src := &fuzzRow{data: data}
		row := executor.Row{}
		cols := [][]string{textCols, jsonCols, intCols, floatCols}
		for _, group := range cols {
			for _, col := range group {
				if v := src.value(); v != (absent{}) {
					row[col] = v
				}
			}
		}
		models := map[string]model{}
		wantErr := false
		for i, group := range cols {
			for _, col := range group {
				m := [](func(any) model){modelText, modelJSON, modelInt, modelFloat}[i](row[col])
				models[col] = m
				wantErr = wantErr || !m.valid
			}
		}

		task, err := rowToTask(row)
		if (err != nil) != wantErr {
			t.Fatalf("row %#v: err %v, want an error: %v", row, err, wantErr)
		}
		if err != nil {
			if task != nil {
				t.Fatalf("an error (%v) and a task", err)
			}
			return
		}
		// The id and status alone, as the waiting loops read them.
		ref, err := rowToRef(row)
		if mi, ms := models["id"], models["status"]; err != nil || ref.ID != mi.s || string(ref.Status) != ms.s {
			t.Fatalf("rowToRef: %+v, %v; want %q %q", ref, err, mi.s, ms.s)
		}
		// A driver may reuse its buffers once the row is read.
		for _, v := range row {
			if b, ok := v.([]byte); ok {
				for i := range b {
					b[i] = 0xff
				}
			}
			if b, ok := v.(json.RawMessage); ok {
				for i := range b {
					b[i] = 0xff
				}
			}
		}

		for col, got := range map[string]string{
			"id": task.ID, "name": task.Name, "queue": task.Queue, "status": string(task.Status),
			"worker_id": task.WorkerID, "parent_id": task.ParentID, "root_id": task.RootID,
			"correlation_id": task.CorrelationID,
		} {
			if got != models[col].s {
				t.Fatalf("%s reads as %q, want %q", col, got, models[col].s)
			}
		}
		if m := models["message"]; (task.Message != nil) != m.present || (m.present && *task.Message != m.s) {
			t.Fatalf("message reads as %v, want %q (present %v)", task.Message, m.s, m.present)
		}
		for col, got := range map[string]json.RawMessage{"payload": task.Payload, "metadata": task.Metadata, "result": task.Result} {
			// An empty text is no JSON value; it may read as NULL.
			if m := models[col]; (got != nil) != m.present && len(m.j) > 0 || !bytes.Equal(got, m.j) {
				t.Fatalf("%s reads as %q, want %q (present %v)", col, got, m.j, m.present)
			}
		}
		if m := models["error"]; (task.Error != nil) != m.present && len(m.j) > 0 {
			t.Fatalf("error envelope %v, want one: %v", task.Error, m.present)
		} else if task.Error != nil {
			// Another SDK's (or a hand-written) error that is no envelope is
			// kept whole as the message.
			var env cairnqtype.ErrorEnvelope
			if json.Unmarshal(m.j, &env) != nil {
				env = cairnqtype.ErrorEnvelope{Type: "Error", Code: "unparsed_error", Message: string(m.j)}
			}
			if got := task.Error; got.Type != env.Type || got.Code != env.Code || got.Message != env.Message || got.Retryable != env.Retryable {
				t.Fatalf("error %q reads as %+v, want %+v", m.j, got, env)
			}
		}
		for col, got := range map[string]int{"attempt": task.Attempt, "max_attempts": task.MaxAttempts, "priority": task.Priority} {
			if int64(got) != models[col].n {
				t.Fatalf("%s reads as %d, want %d", col, got, models[col].n)
			}
		}
		for col, got := range map[string]time.Time{
			"lease_until_ms": task.LeaseUntil, "run_at_ms": task.RunAt, "cancel_requested_at_ms": task.CancelRequestedAt,
			"created_at_ms": task.CreatedAt, "updated_at_ms": task.UpdatedAt, "completed_at_ms": task.CompletedAt,
		} {
			want := time.Time{}
			if m := models[col]; m.present {
				want = time.UnixMilli(m.n)
			}
			if !got.Equal(want) {
				t.Fatalf("%s reads as %v, want %v", col, got, want)
			}
		}
		if m := models["progress"]; (task.Progress != nil) != m.present || (m.present && !sameFloat(*task.Progress, m.f)) {
			t.Fatalf("progress reads as %v, want %v (present %v)", task.Progress, m.f, m.present)
		}

	})
}

// ---------------------------------------------------------------- SQLite

// FuzzSubmitSQLite submits fuzzed payloads and metadata to a real SQLite
// store. Each submit either fails with a typed error and writes no row, or
// succeeds and Get reads back JSON that compacts to what was submitted; and
// it succeeds exactly when encodeJSON accepts the value, so the database
// never refuses what validation let through.
func FuzzSubmitSQLite(f *testing.F) {
	ctx := context.Background()
	st, err := OpenSQLite(ctx, filepath.Join(f.TempDir(), "fuzz.db"), SQLiteOptions{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	var n atomic.Int64 // each submit gets a queue of its own, to look for its row in

	f.Add([]byte(`{"page":1}`), "render")
	f.Add([]byte(`{"a":"\u0000"}`), "a\x00b")
	f.Add([]byte(" [1, 2.5e300, -0, \"\\u00e9\"] "), "é😀")
	f.Fuzz(func(t *testing.T, raw []byte, s string) {
		try := func(what string, p SubmitParams, sent []byte, validated error) {
			t.Helper()
			p.Name = "fuzz"
			p.Queue = fmt.Sprintf("q%d", n.Add(1))
			task, err := st.Submit(ctx, p)
			if err != nil {
				var se *cairnqtype.SerializationError
				var ae *cairnqtype.ArgumentError
				if !errors.Is(err, cairnqtype.ErrInvalidArgument) || !(errors.As(err, &se) || errors.As(err, &ae)) {
					t.Fatalf("%s %.200q: refused with %T, want a typed ErrInvalidArgument: %v", what, sent, err, err)
				}
				if validated == nil {
					t.Fatalf("%s %.200q: encodeJSON accepts it, Submit refuses it: %v", what, sent, err)
				}
				rows, lerr := st.List(ctx, cairnqtype.ListOptions{Queue: p.Queue})
				if lerr != nil {
					t.Fatal(lerr)
				}
				if len(rows) != 0 {
					t.Fatalf("%s %.200q: refused (%v), yet a row was written", what, sent, err)
				}
				return
			}
			if validated != nil {
				t.Fatalf("%s %.200q: encodeJSON refuses it (%v), Submit stored it", what, sent, validated)
			}
			got, err := st.Get(ctx, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			stored := got.Payload
			if what == "metadata" {
				stored = got.Metadata
			}
			var a, b bytes.Buffer
			if err := json.Compact(&a, stored); err != nil {
				t.Fatalf("%s: stored text is not JSON: %v: %.200q", what, err, stored)
			}
			if err := json.Compact(&b, sent); err != nil {
				t.Fatalf("%s: sent text is not JSON: %v: %.200q", what, err, sent)
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Fatalf("%s: submitted %.200q, Get reads back %.200q", what, sent, stored)
			}
		}

		sent := raw
		if raw == nil {
			sent = []byte("{}")
		}
		_, verr := encodeJSON("payload", json.RawMessage(raw), "{}")
		try("payload", SubmitParams{Payload: json.RawMessage(raw)}, sent, verr)

		text, verr := encodeJSON("payload", s, "{}")
		try("string payload", SubmitParams{Payload: s}, []byte(text), verr)

		_, verr = encodeJSON("metadata", json.RawMessage(raw), "{}")
		if verr == nil && !bytes.HasPrefix(bytes.TrimSpace(sent), []byte("{")) {
			verr = errors.New("not an object")
		}
		try("metadata", SubmitParams{SubmitOptions: cairnqtype.SubmitOptions{Metadata: json.RawMessage(raw)}}, sent, verr)
	})
}
