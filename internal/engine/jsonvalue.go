package engine

import (
	"github.com/cairnq/cairnq-go/cairnqtype"

	"bytes"
	"encoding/json"
	"fmt"
)

// encodeJSON turns a caller's value into the text of a protocol JSON column.
// A json.RawMessage or a []byte is taken as JSON text and passes through
// after a validity check: a []byte holding JSON is what a caller who
// already encoded the value hands over, and encoding/json's base64 string
// of it would reach every other SDK as a string. (Binary data must be
// encoded by the caller, e.g. as a base64 string.) Everything else goes
// through encoding/json, which already refuses NaN, ±Inf, channels,
// functions, complex numbers and cyclic values. The text must then keep
// within the limits both backends share (checkJSONText). Each refusal
// becomes a *SerializationError so the caller can tell bad input from a
// database fault. A nil value encodes as def.
func encodeJSON(field string, v any, def string) (string, error) {
	s, err := marshalJSON(field, v, def)
	if err != nil {
		return "", err
	}
	if err := checkJSONText(field, s); err != nil {
		return "", err
	}
	return s, nil
}

func marshalJSON(field string, v any, def string) (string, error) {
	switch x := v.(type) {
	case nil:
		return def, nil
	case json.RawMessage:
		if x == nil {
			return def, nil
		}
		return validJSON(field, x, "json.RawMessage")
	case []byte:
		if x == nil {
			return def, nil
		}
		return validJSON(field, x, "[]byte")
	case string:
		b, err := json.Marshal(x)
		if err != nil {
			return "", &cairnqtype.SerializationError{Field: field, Err: err}
		}
		return string(b), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", &cairnqtype.SerializationError{Field: field, Err: err}
	}
	return string(b), nil
}

// validJSON checks JSON text a caller passed as bytes (kind names how).
func validJSON(field string, b []byte, kind string) (string, error) {
	if len(b) > cairnqtype.MaxValueBytes { // refused before json.Valid reads it all
		return "", &cairnqtype.SerializationError{Field: field,
			Err: fmt.Errorf("%w: %d bytes, the limit is %d", cairnqtype.ErrValueTooLarge, len(b), cairnqtype.MaxValueBytes)}
	}
	if !json.Valid(b) {
		return "", &cairnqtype.SerializationError{Field: field, Err: fmt.Errorf(
			"a %s value is taken as JSON text, and this is not valid JSON (encode binary data yourself, e.g. as a base64 string)", kind)}
	}
	return string(bytes.TrimSpace(b)), nil
}
