package engine

import (
	"encoding/json"
	"testing"

	"github.com/cairnq/cairnq-go/executor"
)

// Every wire form a driver may produce for int8 and jsonb reads back the
// same, and a NULL stays a NULL.
func TestRowNormalizationAcceptsEveryDriverForm(t *testing.T) {
	t.Parallel()
	ms := int64(1795992839449)
	for _, v := range []any{ms, int32(1795), "1795992839449", []byte("1795992839449"), float64(ms), json.Number("1795992839449"), int(ms)} {
		n, ok, err := asInt64("created_at_ms", v)
		want := ms
		if _, small := v.(int32); small {
			want = 1795
		}
		if err != nil || !ok || n != want {
			t.Errorf("int8 as %T: %d %v %v", v, n, ok, err)
		}
	}
	if _, ok, err := asInt64("completed_at_ms", nil); ok || err != nil {
		t.Errorf("NULL int8: ok=%v err=%v", ok, err)
	}
	for _, bad := range []any{1.5, "12x", struct{}{}} {
		if _, _, err := asInt64("x", bad); err == nil {
			t.Errorf("int8 as %T %v accepted", bad, bad)
		}
	}
	wantJSON := map[string]any{"page": 2.0, "tags": []any{"a"}}
	for _, v := range []any{
		[]byte(`{"page":2,"tags":["a"]}`), `{"page": 2, "tags": ["a"]}`, json.RawMessage(`{"page":2,"tags":["a"]}`),
		map[string]any{"page": 2, "tags": []any{"a"}}, map[string]any{"page": json.Number("2"), "tags": []string{"a"}},
	} {
		raw, err := asJSON("payload", v)
		var got map[string]any
		if err == nil {
			err = json.Unmarshal(raw, &got)
		}
		if err != nil || got["page"] != wantJSON["page"] || len(got["tags"].([]any)) != 1 {
			t.Errorf("jsonb as %T: %s %v", v, raw, err)
		}
	}
	for _, v := range []any{[]any{1.0, "x"}, []byte(`[1,"x"]`)} {
		if raw, err := asJSON("result", v); err != nil || string(raw) != `[1,"x"]` {
			t.Errorf("jsonb array as %T: %s %v", v, raw, err)
		}
	}
	if raw, err := asJSON("result", nil); raw != nil || err != nil {
		t.Errorf("NULL jsonb: %s %v", raw, err)
	}
	// A whole row as pgx gives it (decoded jsonb, int64) and as lib/pq does
	// (bytes): the same task.
	base := executor.Row{
		"id": "task_01M8MR7S8RZRZV9ENPWTS3JPW0", "name": "n", "queue": "q", "status": "queued",
		"attempt": int32(0), "max_attempts": int32(3), "priority": int32(0), "run_at_ms": ms,
		"created_at_ms": ms, "updated_at_ms": ms, "progress": nil, "error": nil, "result": nil,
	}
	pgxRow, pqRow := executor.Row{}, executor.Row{}
	for k, v := range base {
		pgxRow[k], pqRow[k] = v, v
	}
	pgxRow["payload"], pgxRow["metadata"] = map[string]any{"a": 1.0}, map[string]any{}
	pqRow["payload"], pqRow["metadata"], pqRow["run_at_ms"] = []byte(`{"a": 1}`), []byte(`{}`), []byte("1795992839449")
	a, err1 := rowToTask(pgxRow)
	b, err2 := rowToTask(pqRow)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	ja, _ := a.MarshalJSON()
	jb, _ := b.MarshalJSON()
	var ma, mb map[string]any
	json.Unmarshal(ja, &ma)
	json.Unmarshal(jb, &mb)
	if len(ma) != len(mb) || ma["run_at_ms"] != mb["run_at_ms"] || ma["progress"] != nil || mb["completed_at_ms"] != nil {
		t.Errorf("pgx row %s\nlib/pq row %s", ja, jb)
	}
}

func TestPostgresArrayLiteral(t *testing.T) {
	t.Parallel()
	got := pgArray([]string{"a", `b"c`, `d\e`, "", "f,g"})
	want := `{"a","b\"c","d\\e","","f,g"}`
	if got != want {
		t.Errorf("pgArray = %s, want %s", got, want)
	}
	if got, want := pgArray([]string{"naïve 🚀", `\"`, `{x}`}), `{"naïve 🚀","\\\"","{x}"}`; got != want {
		t.Errorf("pgArray = %s, want %s", got, want)
	}
	if pgArray(nil) != "{}" {
		t.Errorf("empty array = %s", pgArray(nil))
	}
	if got, want := pgArrayNullable([]any{`{"n":1}`, nil, `"x"`}), `{"{\"n\":1}",NULL,"\"x\""}`; got != want {
		t.Errorf("pgArrayNullable = %s, want %s", got, want)
	}
}
