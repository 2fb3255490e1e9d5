package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// encodeJSON turns a caller's value into the text of a protocol JSON column.
// A json.RawMessage passes through after a validity check; everything else
// goes through encoding/json, which already refuses NaN, ±Inf, channels,
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
		if len(x) > MaxValueBytes { // refused before json.Valid reads it all
			return "", &SerializationError{Field: field,
				Err: fmt.Errorf("%w: %d bytes, the limit is %d", ErrValueTooLarge, len(x), MaxValueBytes)}
		}
		return validJSON(field, x)
	case string:
		b, err := json.Marshal(x)
		if err != nil {
			return "", &SerializationError{Field: field, Err: err}
		}
		return string(b), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", &SerializationError{Field: field, Err: err}
	}
	return string(b), nil
}

func validJSON(field string, b []byte) (string, error) {
	if !json.Valid(b) {
		return "", &SerializationError{Field: field, Err: errors.New("json.RawMessage is not valid JSON")}
	}
	return string(bytes.TrimSpace(b)), nil
}
