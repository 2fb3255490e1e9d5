package main

import (
	"errors"
	"testing"
)

// An unknown command is one line on stderr, exit 2, with a suggestion
// only when a command is close. Before, it printed 25 lines of usage with
// the error last.
func TestUnknownCommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		line string
	}{
		{[]string{"lsit"}, "unknown command lsit; did you mean list?"},
		{[]string{"lst", "--db", "x.db"}, "unknown command lst; did you mean list?"},
		{[]string{"LIST"}, "unknown command LIST; did you mean list?"},
		{[]string{"sumbit", "n"}, "unknown command sumbit; did you mean submit?"},
		{[]string{"stat"}, "unknown command stat; did you mean stats?"},
		{[]string{"verison"}, "unknown command verison; did you mean version?"},
		{[]string{"docter"}, "unknown command docter; did you mean doctor?"},
		{[]string{"mirgate"}, "unknown command mirgate; did you mean migrate?"},
		{[]string{"help", "gte"}, "unknown command gte; did you mean get?"},
		{[]string{"frobnicate"}, "unknown command frobnicate; run cairnq help"},
		{[]string{"xy"}, "unknown command xy; run cairnq help"},
		{[]string{"lis-t-s"}, "unknown command lis-t-s; run cairnq help"},
		{[]string{"q\x1b[2J"}, `unknown command q\x1b[2J; run cairnq help`},
		// --db, --schema and --json may come first (TestNewcomerMistakes);
		// a command's own flags may not.
		{[]string{"--queue", "q", "stats"}, "unknown flag --queue; a command comes first (cairnq <command> [flags]); run cairnq help"},
		{[]string{"--db", "x.db"}, "no command after --db x.db; run cairnq help"},
		{[]string{"--json"}, "no command after --json; run cairnq help"},
		{[]string{"--db", "x.db", "lsit"}, "unknown command lsit; did you mean list?"},
	} {
		r := cli(t, c.args...)
		if r.code != exitUsage || !errors.Is(r.err, errUsage) || r.stderr != "cairnq: "+c.line+"\n" || r.stdout != "" {
			t.Errorf("cairnq %q: want exit 2 and the one line %q\n%s", c.args, c.line, r)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{
		{"list", "list", 0}, {"lsit", "list", 1}, {"lst", "list", 1}, {"lists", "list", 1},
		{"lits", "list", 1}, {"ilst", "list", 1}, {"", "ui", 2}, {"xy", "ui", 2}, {"slit", "list", 2},
	} {
		if got := editDistance(c.a, c.b); got != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}
