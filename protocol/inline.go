package protocol

import (
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// InlineError reports an argument Inline cannot write as a literal, or
// placeholders and arguments that do not match.
type InlineError struct {
	// Arg is the 1-based argument concerned, 0 when the mismatch is not one
	// argument's.
	Arg    int
	Reason string
}

// Error names the argument concerned, as $N, when there is one.
func (e *InlineError) Error() string {
	if e.Arg == 0 {
		return "protocol: inline: " + e.Reason
	}
	return fmt.Sprintf("protocol: inline: argument $%d: %s", e.Arg, e.Reason)
}

// Inline returns a Postgres statement with its placeholders $1..$N
// replaced by args written as literals, for a driver that must send it
// with no arguments at all: one message of the simple query protocol,
// which leaves nothing behind on the server connection. Placeholders
// inside literals, quoted identifiers, dollar-quoted bodies and comments
// are left alone.
//
// Every value becomes a quoted literal of unknown type (NULL for nil), as
// a text-format argument with no declared type is, so the server resolves
// its type from where it stands, exactly as it resolves an unnamed
// argument's. Strings are written in the escape-string form (E'...'),
// whose meaning does not depend on standard_conforming_strings. Values
// are converted as database/sql converts arguments for a driver, then
// written as lib/pq writes its text-format arguments: numbers and
// booleans in Go's text form, []byte as bytea hex, times to the second of
// their offset, BC where they are.
//
// A string holding a NUL byte cannot be sent in a query's text (Postgres
// rejects it in any text value too), nor can a value of any other type;
// both are an *InlineError, as are placeholders and arguments that do
// not pair up.
func Inline(sql string, args []any) (string, error) {
	toks, err := lex(sql, Postgres)
	if err != nil {
		return "", &InlineError{Reason: err.Error()}
	}
	lits := make([]string, len(args))
	for i, a := range args {
		lit, err := literal(a)
		if err != nil {
			return "", &InlineError{Arg: i + 1, Reason: err.Error()}
		}
		lits[i] = lit
	}
	used := make([]bool, len(args))
	var b strings.Builder
	b.Grow(len(sql) + 16*len(args))
	for _, t := range toks {
		text := sql[t.start:t.end]
		if t.kind != tokNative {
			b.WriteString(text)
			continue
		}
		n, err := strconv.Atoi(text[1:])
		if err != nil || n < 1 || n > len(args) {
			return "", &InlineError{Reason: fmt.Sprintf("placeholder %s with %d arguments", text, len(args))}
		}
		// A literal placed right after a word or another literal would
		// merge with it ('a''b' is one literal); placeholders never sit
		// there in valid SQL, but the text stays unambiguous regardless.
		if b.Len() > 0 && !separates(b.String()[b.Len()-1]) {
			b.WriteByte(' ')
		}
		b.WriteString(lits[n-1])
		used[n-1] = true
	}
	for i, u := range used {
		if !u {
			return "", &InlineError{Arg: i + 1, Reason: fmt.Sprintf("no placeholder $%d in the statement", i+1)}
		}
	}
	return b.String(), nil
}

// separates reports whether a literal may follow c directly.
func separates(c byte) bool {
	return !isIdentCont(c) && c != '\'' && c != '"'
}

// literal writes one argument as a Postgres literal. It first converts v
// as database/sql would before handing it to a driver (a driver.Valuer
// asked for its value, a pointer followed, a named type turned into its
// kind: a string, an int64, a float64, a bool, a []byte or a time).
func literal(v any) (string, error) {
	if _, ok := v.(driver.Valuer); ok {
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
			return "NULL", nil
		}
	}
	v, err := driver.DefaultParameterConverter.ConvertValue(v)
	if err != nil {
		return "", err
	}
	switch v := v.(type) {
	case nil:
		return "NULL", nil
	case string:
		return quote(v)
	case []byte:
		if v == nil {
			return "NULL", nil
		}
		return `E'\\x` + hex.EncodeToString(v) + `'`, nil
	case bool:
		return "'" + strconv.FormatBool(v) + "'", nil
	case int64:
		return "'" + strconv.FormatInt(v, 10) + "'", nil
	case float64:
		return floatLiteral(v), nil
	case time.Time:
		return "'" + timeText(v) + "'", nil
	}
	return "", fmt.Errorf("a %T cannot be written as a literal", v)
}

// timeText is t as Postgres reads a timestamp with time zone back exactly:
// the offset to the second (local mean times have seconds), and a year
// before 1 AD as a year BC (Go's year 0 is 1 BC).
func timeText(t time.Time) string {
	bc := t.Year() <= 0
	if bc {
		t = t.AddDate(-2*t.Year()+1, 0, 0)
	}
	s := t.Format("2006-01-02 15:04:05.999999999Z07:00:00")
	if bc {
		s += " BC"
	}
	return s
}

// floatLiteral is f in the text form Postgres's float input reads back
// exactly.
func floatLiteral(f float64) string {
	switch {
	case math.IsNaN(f):
		return "'NaN'"
	case math.IsInf(f, 1):
		return "'Infinity'"
	case math.IsInf(f, -1):
		return "'-Infinity'"
	}
	return "'" + strconv.FormatFloat(f, 'g', -1, 64) + "'"
}

// quote writes s as an escape-string literal: a backslash and a quote are
// doubled, and nothing else is special there.
func quote(s string) (string, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return "", fmt.Errorf("a string holding a NUL byte cannot be sent to Postgres")
	}
	var b strings.Builder
	b.Grow(len(s) + 3)
	b.WriteString("E'")
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', '\'':
			b.WriteByte(c)
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String(), nil
}
