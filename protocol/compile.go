package protocol

import (
	"fmt"
	"strconv"
	"strings"
)

// maxFilters bounds the optional filters one statement may carry: the
// specialization memo holds one slot per subset of them.
const maxFilters = 8

// Compile turns the :name placeholders of src into dialect d's positional form
// (SQLite ?1..?N, Postgres $1..$N; a name used twice reuses its number).
//
// It tokenizes rather than pattern-matches, so nothing inside a string literal
// (including Postgres E'...'), a quoted identifier, a comment or a Postgres
// dollar-quoted body is ever taken for a parameter, and :p::text is parameter p
// followed by a cast. Comments are dropped and each run of whitespace becomes a
// single space, or a single newline when it spanned a line break (Postgres
// gives a newline between two string literals a meaning).
//
// src must hold exactly one statement; trailing semicolons are dropped. The
// error names the statement for unterminated literals, comments and
// dollar-quoted bodies, for an interior semicolon, and for a placeholder in the
// driver's own syntax (SQLite ?, ?N, $x, @x, #x, :N; Postgres $N), which would
// silently mix two numbering schemes.
func Compile(name, src string, d Dialect) (*Statement, error) {
	if d != SQLite && d != Postgres {
		return nil, fmt.Errorf("protocol: statement %q: unknown dialect %q", name, d)
	}
	fail := func(format string, a ...any) error {
		return fmt.Errorf("protocol: statement %q (%s): %s", name, d, fmt.Sprintf(format, a...))
	}
	toks, err := lex(src, d)
	if err != nil {
		return nil, fail("%v", err)
	}

	// Find the last token that is not space, comment or a trailing ';'.
	last := -1
	for i, t := range toks {
		if t.kind == tokSpace || t.kind == tokComment {
			continue
		}
		if t.kind == tokPunct && src[t.start] == ';' {
			continue
		}
		last = i
	}
	if last < 0 {
		return nil, fail("empty statement")
	}
	for _, t := range toks {
		switch {
		case t.kind == tokNative:
			return nil, fail("driver placeholder %q at byte %d; write :name instead", src[t.start:t.end], t.start)
		case t.kind == tokPunct && src[t.start] == ';' && t.start < toks[last].start:
			return nil, fail("more than one statement (';' at byte %d)", t.start)
		}
	}

	st := &Statement{Name: name, Dialect: d, src: src}
	index := make(map[string]int)
	var out strings.Builder
	out.Grow(len(src))
	// outAt[i] is where meaningful token i starts and ends in the output.
	outAt := make([]span, last+1)
	var sep byte
	for i, t := range toks[:last+1] {
		if t.kind == tokSpace || t.kind == tokComment {
			if strings.IndexByte(src[t.start:t.end], '\n') >= 0 {
				sep = '\n'
			} else if sep == 0 {
				sep = ' '
			}
			continue
		}
		if sep != 0 && out.Len() > 0 {
			out.WriteByte(sep)
		}
		sep = 0
		if t.kind == tokParam {
			p := src[t.start+1 : t.end]
			n, ok := index[p]
			if !ok {
				st.Params = append(st.Params, p)
				n = len(st.Params)
				index[p] = n
			}
			// Keep the placeholder from fusing with a preceding identifier
			// (Postgres would read x$1 as one name).
			if s := out.String(); len(s) > 0 && isIdentCont(s[len(s)-1]) {
				out.WriteByte(' ')
			}
			outAt[i].start = out.Len()
			out.WriteString(placeholder(d, n))
		} else {
			outAt[i].start = out.Len()
			out.WriteString(src[t.start:t.end])
		}
		outAt[i].end = out.Len()
	}
	st.SQL = out.String()

	// Meaningful tokens, for keyword and shape matching.
	var code []int
	for i, t := range toks[:last+1] {
		if t.kind != tokSpace && t.kind != tokComment {
			code = append(code, i)
		}
	}
	st.Write = true
	for _, i := range code {
		t := toks[i]
		if t.kind == tokPunct && src[t.start] == '(' {
			continue
		}
		if t.kind == tokWord {
			w := src[t.start:t.end]
			st.Write = !strings.EqualFold(w, "select") && !strings.EqualFold(w, "values")
		}
		break
	}

	st.filters = findFilters(src, toks, code, st.SQL, outAt, index, d)
	if len(st.filters) > maxFilters {
		return nil, fail("%d filters to specialize; at most %d are supported", len(st.filters), maxFilters)
	}
	st.memo = make([]memoSlot, 1<<len(st.filters))
	return st, nil
}

// placeholder is the positional marker for parameter number n (1-based).
func placeholder(d Dialect, n int) string {
	if d == Postgres {
		return "$" + strconv.Itoa(n)
	}
	return "?" + strconv.Itoa(n)
}

// span is a half-open byte range of the compiled text.
type span struct{ start, end int }
