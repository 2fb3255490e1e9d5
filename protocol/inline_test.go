package protocol

import (
	"database/sql/driver"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// unquote reads back the escape-string literal at the start of s and
// returns its value and what follows it.
func unquote(t *testing.T, s string) (string, string) {
	t.Helper()
	if !strings.HasPrefix(s, "E'") {
		t.Fatalf("%q does not start an escape-string literal", s)
	}
	var b strings.Builder
	for i := 2; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
			if i == len(s) || s[i] != '\\' {
				t.Fatalf("a backslash escapes something other than a backslash in %q", s)
			}
			b.WriteByte('\\')
		case '\'':
			if i+1 < len(s) && s[i+1] == '\'' {
				b.WriteByte('\'')
				i++
				continue
			}
			return b.String(), s[i+1:]
		default:
			b.WriteByte(s[i])
		}
	}
	t.Fatalf("unterminated literal in %q", s)
	return "", ""
}

func TestInlineWritesLiterals(t *testing.T) {
	got, err := Inline("SELECT $1::text, $2, $3, $4, $5, $1, $6", []any{"it's", int64(-7), nil, true, 1.5, []byte{0xde, 0xad}})
	if err != nil {
		t.Fatal(err)
	}
	want := `SELECT E'it''s'::text, '-7', NULL, 'true', '1.5', E'it''s', E'\\xdead'`
	if got != want {
		t.Errorf("Inline =\n%s\nwant\n%s", got, want)
	}
}

// Placeholders inside literals, quoted identifiers, dollar-quoted bodies
// and comments are text, not placeholders.
func TestInlineLeavesQuotedTextAlone(t *testing.T) {
	src := `SELECT '$1', "$1", $q$ $1 $q$, E'\'$1', $1 -- $1
/* $1 */`
	got, err := Inline(src, []any{"x"})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(src, ", $1 --", ", E'x' --", 1)
	if got != want {
		t.Errorf("Inline =\n%s\nwant\n%s", got, want)
	}
}

// Whatever a string holds, it comes back as one literal with exactly that
// value: quotes, backslashes, would-be escapes, comments and statement
// ends included.
func TestInlineStringsRoundTrip(t *testing.T) {
	for _, v := range []string{
		"", "'", "''", `\`, `\'`, `'\`, `\\'`, "'; DROP TABLE cairnq_tasks; --", `x"; drop table cairnq_tasks; --`,
		`E'`, "$1", "$$", "/*", "*/", "--", "\n\r\t", "ü€𝄞", "\x7f", `\x00`, `\u0000`, strings.Repeat(`\'`, 100),
	} {
		got, err := Inline("SELECT $1", []any{v})
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		value, rest := unquote(t, strings.TrimPrefix(got, "SELECT "))
		if value != v || rest != "" {
			t.Errorf("%q came back as %q, then %q", v, value, rest)
		}
	}
}

func FuzzInlineString(f *testing.F) {
	for _, s := range []string{"", "'", `\`, "'; --", "E'\\'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, err := Inline("SELECT $1 AS v", []any{v})
		if strings.IndexByte(v, 0) >= 0 {
			if err == nil {
				t.Fatalf("%q: a NUL byte was written into the text", v)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		value, rest := unquote(t, strings.TrimPrefix(got, "SELECT "))
		if value != v || rest != " AS v" {
			t.Fatalf("%q came back as %q, then %q", v, value, rest)
		}
		if utf8.ValidString(v) {
			if _, err := lex(got, Postgres); err != nil {
				t.Fatalf("the inlined text does not lex: %v", err)
			}
		}
	})
}

func TestInlineValueForms(t *testing.T) {
	ts := time.Date(2026, 12, 2, 3, 4, 5, 600, time.UTC)
	for _, c := range []struct {
		v    any
		want string
	}{
		{int(3), "'3'"}, {int32(-3), "'-3'"}, {uint64(math.MaxInt64), "'9223372036854775807'"}, {named("id"), "E'id'"},
		{float32(0.25), "'0.25'"}, {math.Inf(1), "'Infinity'"}, {math.Inf(-1), "'-Infinity'"}, {math.NaN(), "'NaN'"},
		{false, "'false'"}, {ts, "'2026-12-02 03:04:05.0000006Z'"}, {[]byte(nil), "NULL"}, {(*valuer)(nil), "NULL"},
		{time.Date(1900, 1, 1, 12, 0, 0, 0, time.FixedZone("LMT", 19*60+32)), "'1900-01-01 12:00:00+00:19:32'"},
		{time.Date(-43, 3, 15, 0, 0, 0, 0, time.UTC), "'0044-03-15 00:00:00Z BC'"},
		{valuer("v"), "E'v'"},
	} {
		got, err := Inline("SELECT $1", []any{c.v})
		if err != nil {
			t.Errorf("%T %v: %v", c.v, c.v, err)
			continue
		}
		if got != "SELECT "+c.want {
			t.Errorf("%T %v: %s, want %s", c.v, c.v, got, c.want)
		}
	}
}

type named string

type valuer string

func (v valuer) Value() (driver.Value, error) { return string(v), nil }

func TestInlineRefuses(t *testing.T) {
	for _, c := range []struct {
		sql  string
		args []any
		arg  int
	}{
		{"SELECT $1", []any{"a\x00b"}, 1},
		{"SELECT $1", []any{struct{}{}}, 1},
		{"SELECT $1", []any{uint64(math.MaxUint64)}, 1},
		{"SELECT $2", []any{"a"}, 0},
		{"SELECT $1", []any{"a", "b"}, 2},
		{"SELECT $0", []any{}, 0},
		{"SELECT 'unterminated", nil, 0},
	} {
		_, err := Inline(c.sql, c.args)
		var ie *InlineError
		if !errors.As(err, &ie) || ie.Arg != c.arg {
			t.Errorf("Inline(%q, %v) = %v, want an *InlineError for argument %d", c.sql, c.args, err, c.arg)
		}
	}
}
