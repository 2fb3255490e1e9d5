package executor

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// The functions below are the one definition of the forms a Row's values
// may take. The store reads every row through them, the Row doc lists
// them, and the conformance suite certifies an executor against them, so
// an adapter author, the store and the certification cannot disagree.

// Int64 reads an integer column's value (bigint, integer) in a form a Row
// may carry: int64, int32, int, a float64 holding an exact integer,
// json.Number, or its decimal text as string or []byte. ok is false for
// SQL NULL (nil).
func Int64(v any) (n int64, ok bool, err error) {
	switch x := v.(type) {
	case nil:
		return 0, false, nil
	case int64:
		return x, true, nil
	case int32:
		return int64(x), true, nil
	case int:
		return int64(x), true, nil
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, false, fmt.Errorf("float64 %v is not an exact integer", x)
		}
		return int64(x), true, nil
	case json.Number:
		n, err = strconv.ParseInt(string(x), 10, 64)
	case string:
		n, err = strconv.ParseInt(x, 10, 64)
	case []byte:
		n, err = strconv.ParseInt(string(x), 10, 64)
	default:
		return 0, false, fmt.Errorf("%T is not a form an integer column may take (int64, int32, int, an exact float64, json.Number, decimal text)", v)
	}
	if err != nil {
		return 0, false, err
	}
	return n, true, nil
}

// Float64 reads a double precision column's value: float64, json.Number,
// its decimal text as string or []byte, or any form Int64 reads. ok is
// false for SQL NULL (nil).
func Float64(v any) (f float64, ok bool, err error) {
	switch x := v.(type) {
	case nil:
		return 0, false, nil
	case float64:
		return x, true, nil
	case json.Number:
		f, err = x.Float64()
	case string:
		f, err = strconv.ParseFloat(x, 64)
	case []byte:
		f, err = strconv.ParseFloat(string(x), 64)
	default:
		n, ok, err := Int64(v)
		if err != nil {
			return 0, false, fmt.Errorf("%T is not a form a double precision column may take (float64, json.Number, decimal text, an integer)", v)
		}
		return float64(n), ok, nil
	}
	if err != nil {
		return 0, false, err
	}
	return f, true, nil
}

// Text reads a text column's value: string or []byte. ok is false for SQL
// NULL (nil).
func Text(v any) (s string, ok bool, err error) {
	switch x := v.(type) {
	case nil:
		return "", false, nil
	case string:
		return x, true, nil
	case []byte:
		return string(x), true, nil
	}
	return "", false, fmt.Errorf("%T is not a form a text column may take (string, []byte)", v)
}

// Bool reads a boolean column's value: bool, or an integer in a form Int64
// reads, nonzero meaning true (SQLite stores booleans as 0 and 1). SQL
// NULL (nil) is false.
func Bool(v any) (bool, error) {
	if b, ok := v.(bool); ok {
		return b, nil
	}
	n, ok, err := Int64(v)
	if err != nil {
		return false, fmt.Errorf("%T is not a form a boolean column may take (bool, an integer)", v)
	}
	return ok && n != 0, nil
}

// JSONText reads a json or jsonb column's value as JSON text: the text
// itself as []byte, string or json.RawMessage, or a value the driver
// decoded, which must be a map[string]any or a []any (re-encoded here).
// A decoded scalar is refused: a decoded JSON string is a Go string that
// cannot be told from JSON text, so an executor whose driver decodes JSON
// must return the column's text instead. nil is SQL NULL; a JSON null in
// the column is the text "null".
func JSONText(v any) (json.RawMessage, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return append(json.RawMessage(nil), x...), nil
	case []byte:
		return append(json.RawMessage(nil), x...), nil
	case string:
		return json.RawMessage(x), nil
	case map[string]any, []any:
		b, err := json.Marshal(x)
		if err != nil {
			return nil, fmt.Errorf("re-encoding a decoded %T: %w", v, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("%T is not a form a JSON column may take (its text as []byte, string or json.RawMessage, or a decoded map[string]any or []any)", v)
}
