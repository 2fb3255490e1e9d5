package protocol

import (
	"fmt"
	"strings"
)

// tokKind classifies one lexeme of statement source. The lexer only knows as
// much SQL as it takes to find parameters safely: what is quoted, what is a
// comment, and what is code.
type tokKind uint8

const (
	tokSpace   tokKind = iota // a run of whitespace
	tokComment                // -- line comment (without its newline) or /* block */
	tokWord                   // identifier, keyword or number
	tokString                 // '...' literal; on Postgres also E'...' (the E included)
	tokQuoted                 // "..." identifier; on SQLite also `...` and [...]
	tokDollar                 // $tag$...$tag$ body (Postgres)
	tokParam                  // :name
	tokCast                   // :: (Postgres cast operator)
	tokNative                 // a driver-native placeholder: ?, ?N, $N, @x, #x, :N
	tokPunct                  // any other single byte
)

// token is a lexeme as a half-open byte range of the source.
type token struct {
	kind       tokKind
	start, end int
}

// lexError is a lexing failure at a byte offset of the source.
type lexError struct {
	msg    string
	offset int
}

func (e *lexError) Error() string { return fmt.Sprintf("%s at byte %d", e.msg, e.offset) }

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isASCIILetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// isIdentStart reports whether c can begin an identifier in either dialect
// (both treat every non-ASCII byte as a letter).
func isIdentStart(c byte) bool { return isASCIILetter(c) || c == '_' || c >= 0x80 }

// isIdentCont reports whether c can continue an identifier; both dialects
// accept '$' after the first character.
func isIdentCont(c byte) bool { return isIdentStart(c) || isDigit(c) || c == '$' }

func isParamStart(c byte) bool { return isASCIILetter(c) || c == '_' }

func isParamCont(c byte) bool { return isParamStart(c) || isDigit(c) }

// lex splits src into tokens under dialect d. It fails only on input whose
// extent it cannot know: an unterminated literal, identifier, comment or
// dollar-quoted body, or a parameter name that runs into identifier bytes.
func lex(src string, d Dialect) ([]token, error) {
	pg := d == Postgres
	toks := make([]token, 0, len(src)/3)
	n := len(src)
	at := func(i int) byte {
		if i < n {
			return src[i]
		}
		return 0
	}
	i := 0
	for i < n {
		start := i
		c := src[i]
		var kind tokKind
		switch {
		case isSpace(c):
			for i < n && isSpace(src[i]) {
				i++
			}
			kind = tokSpace

		case c == '-' && at(i+1) == '-':
			for i < n && src[i] != '\n' {
				i++
			}
			kind = tokComment

		case c == '/' && at(i+1) == '*':
			end, ok := blockCommentEnd(src, i, pg)
			if !ok {
				return nil, &lexError{"unterminated block comment", start}
			}
			i, kind = end, tokComment

		case c == '\'':
			end, ok := quotedEnd(src, i, '\'')
			if !ok {
				return nil, &lexError{"unterminated string literal", start}
			}
			i, kind = end, tokString

		case c == '"':
			end, ok := quotedEnd(src, i, '"')
			if !ok {
				return nil, &lexError{"unterminated quoted identifier", start}
			}
			i, kind = end, tokQuoted

		case !pg && c == '`':
			end, ok := quotedEnd(src, i, '`')
			if !ok {
				return nil, &lexError{"unterminated quoted identifier", start}
			}
			i, kind = end, tokQuoted

		case !pg && c == '[':
			for i++; i < n && src[i] != ']'; i++ {
			}
			if i >= n {
				return nil, &lexError{"unterminated quoted identifier", start}
			}
			i, kind = i+1, tokQuoted

		case isIdentStart(c) || isDigit(c):
			for i < n && isIdentCont(src[i]) {
				i++
			}
			kind = tokWord
			if pg && i == start+1 && (c == 'E' || c == 'e') && at(i) == '\'' {
				end, ok := escapeStringEnd(src, i)
				if !ok {
					return nil, &lexError{"unterminated string literal", start}
				}
				i, kind = end, tokString
			}

		case c == ':':
			next := at(i + 1)
			switch {
			case next == ':':
				i, kind = i+2, tokCast
			case isParamStart(next):
				for i++; i < n && isParamCont(src[i]); i++ {
				}
				if i < n && isIdentCont(src[i]) {
					return nil, &lexError{"malformed parameter name", start}
				}
				kind = tokParam
			case next == '$' || next >= 0x80:
				return nil, &lexError{"malformed parameter name", start}
			case !pg && isDigit(next):
				for i++; i < n && isDigit(src[i]); i++ {
				}
				kind = tokNative
			default:
				i, kind = i+1, tokPunct
			}

		case c == '$' && pg:
			next := at(i + 1)
			switch {
			case isDigit(next):
				for i++; i < n && isDigit(src[i]); i++ {
				}
				kind = tokNative
			case next == '$' || isParamStart(next) || next >= 0x80:
				end, tagged := dollarTagEnd(src, i)
				if !tagged {
					i, kind = i+1, tokPunct
					break
				}
				end, ok := dollarBodyEnd(src, i, end)
				if !ok {
					return nil, &lexError{"unterminated dollar-quoted string", start}
				}
				i, kind = end, tokDollar
			default:
				i, kind = i+1, tokPunct
			}

		case !pg && (c == '?' || c == '$' || c == '@' || c == '#'):
			for i++; i < n && isIdentCont(src[i]); i++ {
			}
			kind = tokNative

		default:
			i, kind = i+1, tokPunct
		}
		toks = append(toks, token{kind, start, i})
	}
	return toks, nil
}

// quotedEnd returns the offset just past the literal or identifier opened by
// the quote byte q at src[i], where a doubled q stands for itself.
func quotedEnd(src string, i int, q byte) (int, bool) {
	for i++; i < len(src); i++ {
		if src[i] != q {
			continue
		}
		if i+1 < len(src) && src[i+1] == q {
			i++
			continue
		}
		return i + 1, true
	}
	return 0, false
}

// escapeStringEnd scans a Postgres E'...' body opened at src[i], where a
// backslash escapes the next byte and a doubled quote stands for one.
func escapeStringEnd(src string, i int) (int, bool) {
	for i++; i < len(src); i++ {
		switch src[i] {
		case '\\':
			i++
		case '\'':
			if i+1 < len(src) && src[i+1] == '\'' {
				i++
				continue
			}
			return i + 1, true
		}
	}
	return 0, false
}

// blockCommentEnd returns the offset past the comment opened at src[i].
// Postgres nests block comments; SQLite ends at the first */.
func blockCommentEnd(src string, i int, nested bool) (int, bool) {
	depth := 1
	for i += 2; i+1 < len(src); {
		switch {
		case src[i] == '*' && src[i+1] == '/':
			depth--
			i += 2
			if depth == 0 || !nested {
				return i, true
			}
		case nested && src[i] == '/' && src[i+1] == '*':
			depth++
			i += 2
		default:
			i++
		}
	}
	return 0, false
}

// dollarTagEnd reports whether src[i:] opens a dollar quote ($$ or $tag$) and
// returns the offset just past its opening delimiter.
func dollarTagEnd(src string, i int) (int, bool) {
	j := i + 1
	if j < len(src) && src[j] != '$' {
		if !isIdentStart(src[j]) {
			return 0, false
		}
		for j < len(src) && (isIdentStart(src[j]) || isDigit(src[j])) {
			j++
		}
	}
	if j < len(src) && src[j] == '$' {
		return j + 1, true
	}
	return 0, false
}

// dollarBodyEnd finds the closing delimiter matching the opening one at
// src[open:bodyStart] and returns the offset just past it.
func dollarBodyEnd(src string, open, bodyStart int) (int, bool) {
	delim := src[open:bodyStart]
	k := strings.Index(src[bodyStart:], delim)
	if k < 0 {
		return 0, false
	}
	return bodyStart + k + len(delim), true
}
