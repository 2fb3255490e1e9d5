package main

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// printable returns s as a terminal shows it safely: every character that
// is not printable (control characters such as the newline and the escape
// that starts a terminal's control sequences, format characters such as
// the ones that reverse the direction of text) is written as its Go
// escape, \n or \x1b or \u202e, and so is a byte of invalid UTF-8. A task's
// name or queue is anybody's text: printed raw it could forge a row of a
// table or take over the terminal. --json output needs none of this; every
// table and line of text goes through it, and get's indented JSON, which
// a person reads on a terminal, through printableJSON.
func printable(s string) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !shown(r, n) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case shown(r, n):
			b.WriteString(s[i : i+n])
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i]), 16))
		default:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

// printableJSON returns the JSON document doc with every character that
// printable escapes written as a JSON escape (\u202e; a surrogate pair
// beyond U+FFFF) instead, and the newlines of its indentation as they
// are: the same document to a parser, and nothing a terminal acts on.
// encoding/json escapes the C0 controls in strings, but leaves DEL, the
// C1 controls and the bidi controls raw, and get prints its JSON to a
// terminal.
func printableJSON(doc []byte) []byte {
	var b bytes.Buffer
	for i := 0; i < len(doc); {
		r, n := utf8.DecodeRune(doc[i:])
		switch {
		case r == '\n' || shown(r, n):
			b.Write(doc[i : i+n])
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		default:
			// A byte of invalid UTF-8, which no JSON string can hold,
			// reads as U+FFFD, as encoding/json decodes it.
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += n
	}
	return b.Bytes()
}

// shown reports whether the rune r, decoded from n bytes, reaches a
// terminal as itself: a printable character or the space, and not a byte
// of invalid UTF-8 (which decodes as U+FFFD, itself printable).
func shown(r rune, n int) bool {
	return unicode.IsPrint(r) && (r != utf8.RuneError || n > 1)
}
