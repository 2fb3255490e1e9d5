package executor_test

import (
	"encoding/json"
	"testing"

	"github.com/cairnq/cairnq-go/executor"
)

// The forms the readers accept are exactly the documented ones: each
// listed form reads, and the forms drivers might also produce but the
// contract leaves out (narrow and unsigned integers, float32, decoded JSON
// scalars) are refused, so an adapter returning them fails certification
// instead of half-working.
func TestReadersAcceptTheDocumentedFormsOnly(t *testing.T) {
	for _, v := range []any{int64(7), int32(7), 7, 7.0, json.Number("7"), "7", []byte("7")} {
		if n, ok, err := executor.Int64(v); err != nil || !ok || n != 7 {
			t.Errorf("Int64(%T %v) = %d, %v, %v; want 7", v, v, n, ok, err)
		}
	}
	for _, v := range []any{int8(7), int16(7), uint32(7), uint64(7), float32(7), true, 7.5, "7.5"} {
		if _, _, err := executor.Int64(v); err == nil {
			t.Errorf("Int64(%T %v) accepted a form the contract leaves out", v, v)
		}
	}
	if _, ok, err := executor.Int64(nil); ok || err != nil {
		t.Errorf("Int64(nil): ok %v, err %v; want SQL NULL", ok, err)
	}
	for _, v := range []any{0.5, json.Number("0.5"), "0.5", []byte("0.5")} {
		if f, ok, err := executor.Float64(v); err != nil || !ok || f != 0.5 {
			t.Errorf("Float64(%T %v) = %v, %v, %v; want 0.5", v, v, f, ok, err)
		}
	}
	if _, _, err := executor.Float64(float32(0.5)); err == nil {
		t.Error("Float64(float32) accepted")
	}
	for _, v := range []any{`{"a":1}`, []byte(`{"a":1}`), json.RawMessage(`{"a":1}`), map[string]any{"a": 1}} {
		if got, err := executor.JSONText(v); err != nil || string(got) != `{"a":1}` {
			t.Errorf("JSONText(%T) = %s, %v", v, got, err)
		}
	}
	for _, v := range []any{1.5, true, json.Number("1")} {
		if _, err := executor.JSONText(v); err == nil {
			t.Errorf("JSONText(%T %v) accepted a decoded scalar", v, v)
		}
	}
	for _, v := range []any{true, int64(1), "1"} {
		if b, err := executor.Bool(v); err != nil || !b {
			t.Errorf("Bool(%T %v) = %v, %v; want true", v, v, b, err)
		}
	}
	if s, ok, err := executor.Text([]byte("x")); err != nil || !ok || s != "x" {
		t.Errorf("Text([]byte) = %q, %v, %v", s, ok, err)
	}
	if _, _, err := executor.Text(1); err == nil {
		t.Error("Text(int) accepted")
	}
}
