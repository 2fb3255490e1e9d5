package main

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// printable returns s as a terminal shows it safely: every character that
// is not printable (control characters such as the newline and the escape
// that starts a terminal's control sequences, format characters such as
// the ones that reverse the direction of text) is written as its Go
// escape, \n or \x1b or \u202e, and so is a byte of invalid UTF-8. A task's
// name or queue is anybody's text: printed raw it could forge a row of a
// table or take over the terminal. JSON output needs none of this; every
// table and line of text goes through it.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) && r != ' ' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i]), 16))
		case unicode.IsPrint(r) || r == ' ':
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}
