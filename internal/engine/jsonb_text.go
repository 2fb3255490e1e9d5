package engine

import (
	"bytes"
	"cmp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// jsonbText is the text Postgres prints for the JSON document b once it
// is stored as jsonb (jsonb_out), computed here so that a task written by
// COPY, which returns no rows, can be returned as the server keeps it:
// object keys shorter first and then bytewise, the last of a duplicated
// key kept, ", " and ": " between items, numbers as numeric prints them,
// strings re-escaped as escape_json does. ok is false wherever the result
// is not certain to match the server's: input Postgres would refuse or
// read otherwise (\u0000, a non-ASCII \u escape, whose reading depends on
// the database's encoding), a number too large to reason about, or nesting
// deeper than jsonbTextDepth. The caller then lets the server print it.
// TestJSONBTextMatchesPostgres holds it to a real server's output.
func jsonbText(b string) (out string, ok bool) {
	if b == "{}" { // the payload and metadata of most tasks
		return b, true
	}
	p := jsonbPrinter{in: b}
	p.skipSpace()
	if !p.value(0) {
		return "", false
	}
	p.skipSpace()
	if p.pos != len(p.in) {
		return "", false
	}
	return string(p.out), true
}

// jsonbTextDepth bounds the nesting jsonbText follows.
const jsonbTextDepth = 64

// jsonbPrinter reads in from pos and appends the jsonb text to out.
type jsonbPrinter struct {
	in  string
	pos int
	out []byte
}

func (p *jsonbPrinter) skipSpace() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value prints the value at pos, at nesting depth.
func (p *jsonbPrinter) value(depth int) bool {
	if p.pos >= len(p.in) || depth > jsonbTextDepth {
		return false
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, ok := p.str()
		if ok {
			p.out = appendJSONBString(p.out, s)
		}
		return ok
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if strings.HasPrefix(p.in[p.pos:], lit) {
				p.pos += len(lit)
				p.out = append(p.out, lit...)
				return true
			}
		}
		return false
	}
}

func (p *jsonbPrinter) array(depth int) bool {
	p.pos++ // [
	p.out = append(p.out, '[')
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		p.out = append(p.out, ']')
		return true
	}
	for first := true; ; first = false {
		if !first {
			p.out = append(p.out, ", "...)
		}
		p.skipSpace()
		if !p.value(depth + 1) {
			return false
		}
		p.skipSpace()
		if p.pos >= len(p.in) {
			return false
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			p.out = append(p.out, ']')
			return true
		default:
			return false
		}
	}
}

// jsonbMember is one key of an object and its value's printed text.
type jsonbMember struct {
	key   string
	value []byte
}

// object prints an object's members in jsonb's order: by key length,
// then bytewise; of duplicated keys the last one given stays.
func (p *jsonbPrinter) object(depth int) bool {
	p.pos++ // {
	var members []jsonbMember
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		p.out = append(p.out, "{}"...)
		return true
	}
	outer := p.out
	for {
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return false
		}
		key, ok := p.str()
		if !ok {
			return false
		}
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return false
		}
		p.pos++
		p.skipSpace()
		p.out = nil
		if !p.value(depth + 1) {
			return false
		}
		members = append(members, jsonbMember{key, p.out})
		p.skipSpace()
		if p.pos >= len(p.in) {
			return false
		}
		if p.in[p.pos] == '}' {
			p.pos++
			break
		}
		if p.in[p.pos] != ',' {
			return false
		}
		p.pos++
	}
	// Stable, so among equal keys the given order stays and the last of
	// each run is the one kept.
	slices.SortStableFunc(members, func(a, b jsonbMember) int {
		return cmp.Or(cmp.Compare(len(a.key), len(b.key)), cmp.Compare(a.key, b.key))
	})
	p.out = append(outer, '{')
	n := 0
	for i, m := range members {
		if i+1 < len(members) && members[i+1].key == m.key {
			continue
		}
		if n > 0 {
			p.out = append(p.out, ", "...)
		}
		n++
		p.out = appendJSONBString(p.out, m.key)
		p.out = append(p.out, ": "...)
		p.out = append(p.out, m.value...)
	}
	p.out = append(p.out, '}')
	return true
}

// str reads the string at pos (its opening quote) and returns its value.
func (p *jsonbPrinter) str() (string, bool) {
	p.pos++ // "
	var s []byte
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			if !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		case c < 0x20:
			return "", false
		case c != '\\':
			s = append(s, c)
			p.pos++
			continue
		}
		if p.pos+1 >= len(p.in) {
			return "", false
		}
		e := p.in[p.pos+1]
		p.pos += 2
		switch e {
		case '"', '\\', '/':
			s = append(s, e)
		case 'b':
			s = append(s, '\b')
		case 'f':
			s = append(s, '\f')
		case 'n':
			s = append(s, '\n')
		case 'r':
			s = append(s, '\r')
		case 't':
			s = append(s, '\t')
		case 'u':
			if p.pos+4 > len(p.in) {
				return "", false
			}
			r, err := strconv.ParseUint(p.in[p.pos:p.pos+4], 16, 16)
			// Only ASCII: beyond it the server's reading depends on the
			// database's encoding, and \u0000 it refuses.
			if err != nil || r == 0 || r >= 0x80 {
				return "", false
			}
			p.pos += 4
			s = append(s, byte(r))
		default:
			return "", false
		}
	}
	return "", false
}

// appendJSONBString appends s quoted as escape_json quotes it.
func appendJSONBString(out []byte, s string) []byte {
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\b':
			out = append(out, `\b`...)
		case '\f':
			out = append(out, `\f`...)
		case '\n':
			out = append(out, `\n`...)
		case '\r':
			out = append(out, `\r`...)
		case '\t':
			out = append(out, `\t`...)
		case '"':
			out = append(out, `\"`...)
		case '\\':
			out = append(out, `\\`...)
		default:
			if c < 0x20 {
				const hex = "0123456789abcdef"
				out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			} else {
				out = append(out, c)
			}
		}
	}
	return append(out, '"')
}

// jsonbNumberExp bounds the exponents jsonbText prints itself.
const jsonbNumberExp = 100

// number prints the number at pos as numeric_out prints what numeric_in
// read: the digits exactly, as many after the point as the text had less
// its exponent (none below zero), no sign on a zero.
func (p *jsonbPrinter) number() bool {
	start := p.pos
	neg := p.in[p.pos] == '-'
	if neg {
		p.pos++
	}
	intStart := p.pos
	if !p.digits() {
		return false
	}
	intPart := p.in[intStart:p.pos]
	if len(intPart) > 1 && intPart[0] == '0' {
		return false
	}
	var frac string
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		p.pos++
		fs := p.pos
		if !p.digits() {
			return false
		}
		frac = p.in[fs:p.pos]
	}
	exp := 0
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		p.pos++
		es := p.pos
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if !p.digits() {
			return false
		}
		e, err := strconv.Atoi(p.in[es:p.pos])
		if err != nil || e > jsonbNumberExp || e < -jsonbNumberExp {
			return false
		}
		exp = e
	}
	if p.pos-start > 1000 {
		return false
	}
	digits := []byte(intPart + frac)
	shift := exp - len(frac) // the value is digits × 10^shift
	var whole, after []byte
	if shift >= 0 {
		whole = append(digits, bytes.Repeat([]byte{'0'}, shift)...)
	} else {
		k := -shift // digits after the point
		if len(digits) <= k {
			digits = append(bytes.Repeat([]byte{'0'}, k-len(digits)+1), digits...)
		}
		whole, after = digits[:len(digits)-k], digits[len(digits)-k:]
	}
	whole = bytes.TrimLeft(whole, "0")
	if len(whole) == 0 {
		whole = []byte{'0'}
	}
	zero := string(whole) == "0" && len(bytes.Trim(after, "0")) == 0
	if neg && !zero {
		p.out = append(p.out, '-')
	}
	p.out = append(p.out, whole...)
	if len(after) > 0 {
		p.out = append(p.out, '.')
		p.out = append(p.out, after...)
	}
	return true
}

// digits reads one or more decimal digits at pos.
func (p *jsonbPrinter) digits() bool {
	start := p.pos
	for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
		p.pos++
	}
	return p.pos > start
}
