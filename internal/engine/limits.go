package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/protocol"
)

// ValidateName checks a name-like argument of op (a task or queue name, a
// worker id, a parent, root or correlation id): non-empty, valid UTF-8,
// no NUL, at most MaxNameBytes.
func ValidateName(op, arg, s string) error {
	if s == "" {
		return argError(op, arg, "must not be empty")
	}
	return checkText(op, arg, s, cairnqtype.MaxNameBytes)
}

// checkText checks a text argument that may be empty: valid UTF-8, no NUL
// (neither database stores both alike), at most max bytes.
func checkText(op, arg, s string, max int) error {
	if len(s) > max {
		return argError(op, arg, "is %d bytes, the limit is %d", len(s), max)
	}
	if !utf8.ValidString(s) {
		return argError(op, arg, "is not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return argError(op, arg, "contains a NUL character")
	}
	return nil
}

// checkOptionalName is validateName for an argument where "" means absent.
func checkOptionalName(op, arg, s string) error {
	if s == "" {
		return nil
	}
	return checkText(op, arg, s, cairnqtype.MaxNameBytes)
}

// checkJSONText checks the encoded text of a JSON value against the limits
// both backends share, so that SQLite and Postgres store exactly the same
// values: its length; valid UTF-8; its nesting depth; no \u0000 escape and
// no lone surrogate escape (jsonb refuses both); numbers within
// maxNumberChars characters and an exponent of at most maxNumberExponent
// (jsonb's numeric refuses what overflows it, SQLite keeps the text). An
// escaped U+FFFD written in lower case, as encoding/json writes it for a
// byte that is not UTF-8, is refused too: encoding/json replaces invalid
// UTF-8 in a Go string that way, and storing the replacement would
// silently change the caller's value. text is valid JSON already; one
// pass over it suffices.
func checkJSONText(field, text string) error {
	fail := func(format string, a ...any) error {
		return &cairnqtype.SerializationError{Field: field, Err: fmt.Errorf(format, a...)}
	}
	if len(text) > cairnqtype.MaxValueBytes {
		return &cairnqtype.SerializationError{Field: field,
			Err: fmt.Errorf("%w: %d bytes encoded, the limit is %d", cairnqtype.ErrValueTooLarge, len(text), cairnqtype.MaxValueBytes)}
	}
	if !utf8.ValidString(text) {
		return fail("not valid UTF-8")
	}
	depth := 0
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '"':
			end, err := checkJSONString(text, i+1)
			if err != nil {
				return &cairnqtype.SerializationError{Field: field, Err: err}
			}
			i = end
		case c == '[' || c == '{':
			depth++
			if depth > cairnqtype.MaxJSONDepth {
				return fail("nested more than %d levels deep", cairnqtype.MaxJSONDepth)
			}
		case c == ']' || c == '}':
			depth--
		case c == '-' || (c >= '0' && c <= '9'):
			end, err := checkJSONNumber(text, i)
			if err != nil {
				return &cairnqtype.SerializationError{Field: field, Err: err}
			}
			i = end - 1
		}
	}
	return nil
}

// Bounds on a JSON number, far beyond float64 and well inside what
// Postgres's numeric holds.
const (
	maxNumberChars    = 1000
	maxNumberExponent = 1000
)

// checkJSONNumber checks the number starting at i and returns the index
// just past it.
func checkJSONNumber(text string, i int) (int, error) {
	start, exp := i, -1
	for ; i < len(text); i++ {
		c := text[i]
		if c == 'e' || c == 'E' {
			exp = i + 1
			continue
		}
		if !(c >= '0' && c <= '9') && c != '-' && c != '+' && c != '.' {
			break
		}
	}
	if i-start > maxNumberChars {
		return 0, fmt.Errorf("has a number of %d characters, the limit is %d", i-start, maxNumberChars)
	}
	if exp > 0 {
		digits := strings.TrimLeft(strings.TrimLeft(text[exp:i], "+-"), "0")
		if len(digits) > 4 || (digits != "" && atoiSmall(digits) > maxNumberExponent) {
			return 0, fmt.Errorf("has a number with an exponent beyond ±%d: %.40s", maxNumberExponent, text[start:i])
		}
	}
	return i, nil
}

// atoiSmall parses up to four decimal digits.
func atoiSmall(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// checkJSONString scans the body of a JSON string starting at i (just past
// its opening quote) and returns the index of its closing quote.
func checkJSONString(text string, i int) (int, error) {
	for {
		j := strings.IndexAny(text[i:], `"\`)
		if j < 0 {
			return len(text), nil // unreachable for valid JSON
		}
		i += j
		if text[i] == '"' {
			return i, nil
		}
		// A backslash: look at what it escapes, then step past it.
		if text[i+1] != 'u' {
			i += 2
			continue
		}
		r := hex4(text[i+2 : i+6])
		switch {
		case r == 0:
			return 0, errors.New(`contains a NUL character (\u0000), which Postgres cannot store in JSON`)
		case text[i+2:i+6] == "fffd":
			return 0, errors.New("contains a string that is not valid UTF-8")
		case r >= 0xD800 && r <= 0xDBFF: // must pair with a low surrogate
			if i+12 > len(text) || text[i+6] != '\\' || text[i+7] != 'u' {
				return 0, errors.New("contains a lone surrogate escape (not valid UTF-16)")
			}
			if lo := hex4(text[i+8 : i+12]); lo < 0xDC00 || lo > 0xDFFF {
				return 0, errors.New("contains a lone surrogate escape (not valid UTF-16)")
			}
			i += 12
			continue
		case r >= 0xDC00 && r <= 0xDFFF:
			return 0, errors.New("contains a lone surrogate escape (not valid UTF-16)")
		}
		i += 6
	}
}

// hex4 parses the four hex digits of a \u escape (valid JSON already).
func hex4(s string) rune {
	var r rune
	for _, c := range s {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= c - '0'
		case c >= 'a' && c <= 'f':
			r |= c - 'a' + 10
		case c >= 'A' && c <= 'F':
			r |= c - 'A' + 10
		}
	}
	return r
}

// checkID checks a task id a caller looks up: a text the databases can
// compare (any string of the right kind that names no task is simply not
// found).
func checkID(op, id string) error { return ValidateName(op, "id", id) }

// checkKey checks a key a caller looks up.
func checkKey(op, key string) error {
	if key == "" {
		return argError(op, "key", "must not be empty")
	}
	return checkText(op, "key", key, cairnqtype.MaxKeyBytes)
}

// checkCtx refuses a nil context, which would otherwise panic deep in a
// driver or in context.AfterFunc. Every backend entry point calls it.
func checkCtx(ctx context.Context) error {
	if ctx == nil {
		return argError("call", "context", "is nil")
	}
	return nil
}

// schemaVersionSQL reads the schema version the newest migration applied
// to a database set; the same text on both dialects.
const schemaVersionSQL = "SELECT value FROM cairnq_meta WHERE key = 'schema_version'"

// warnNewerSchema logs, once per open, a database whose schema_version is
// newer than this SDK's: a newer SDK of the same protocol major migrated
// it. It stays usable (a minor migration only adds), but an operator
// should know this process is the older one.
func warnNewerSchema(log *slog.Logger, rows []executor.Row, where string) {
	if len(rows) == 0 {
		return
	}
	v, ok, err := asInt64("value", rows[0]["value"])
	if err != nil || !ok || v <= protocol.SchemaVersion {
		return
	}
	log.Warn("cairnq: the database's schema is newer than this SDK's; upgrade this process's cairnq",
		"database", where, "schema_version", v, "sdk_schema_version", protocol.SchemaVersion)
}

// argError is an *ArgumentError with a formatted reason.
func argError(op, arg, format string, a ...any) error {
	return &cairnqtype.ArgumentError{Op: op, Arg: arg, Reason: fmt.Sprintf(format, a...)}
}
