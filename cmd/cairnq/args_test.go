package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// Flags may follow the arguments, on every command: before, `cairnq get
// ID --db x` said "get: takes one task id", as the flag package stops at
// the first argument.
func TestFlagsAfterArguments(t *testing.T) {
	// Every command reads a flag after an argument as a flag: an unknown
	// one is refused by name, and -h asks for help.
	for _, c := range commands() {
		r := cli(t, c.name, "arg", "--no-such-flag")
		if r.code != exitUsage || !strings.Contains(r.stderr, "flag provided but not defined: -no-such-flag") {
			t.Errorf("cairnq %s arg --no-such-flag: want the flag refused\n%s", c.name, r)
		}
		if r := cli(t, c.name, "arg", "-h"); r.code != exitOK || !strings.HasPrefix(r.stdout, "usage: cairnq "+c.name) {
			t.Errorf("cairnq %s arg -h: want the usage\n%s", c.name, r)
		}
	}

	db := filepath.Join(t.TempDir(), "tasks.db")
	ok(t, "migrate", "--check=false", "--db", db)
	var task taskJSON
	decode(t, ok(t, "submit", "render", `{"n":1}`, "--db", db, "--queue", "q1", "--json", "--priority=3"), &task)
	if task.Name != "render" || task.Queue != "q1" || task.Priority != 3 || string(task.Payload) != `{"n":1}` {
		t.Errorf("submit with the flags last = %+v", task)
	}
	// Flags on both sides of the arguments.
	var other taskJSON
	decode(t, ok(t, "submit", "--db", db, "embed", "--json", "{}", "--queue", "q2"), &other)
	if other.Name != "embed" || other.Queue != "q2" {
		t.Errorf("submit with flags around the arguments = %+v", other)
	}
	var got taskJSON
	decode(t, ok(t, "get", task.ID, "--db", db, "--json"), &got)
	if got.ID != task.ID {
		t.Errorf("get ID --db --json = %+v", got)
	}
	if r := ok(t, "list", "--json", "--db", db, "--queue", "q2"); !strings.Contains(r.stdout, other.ID) || strings.Contains(r.stdout, task.ID) {
		t.Errorf("list with flags in any order:\n%s", r)
	}
	decode(t, ok(t, "cancel", task.ID, "--db", db, "--json"), &got)
	if got.Status != "canceled" {
		t.Errorf("cancel ID --db --json = %+v", got)
	}
	decode(t, ok(t, "retry", task.ID, "--reset-attempt", "--db", db, "--json"), &got)
	if got.Status != "queued" {
		t.Errorf("retry ID --reset-attempt --db --json = %+v", got)
	}
	if r := ok(t, "stats", "--json", "--db", db); !strings.Contains(r.stdout, `"q1"`) {
		t.Errorf("stats --json --db:\n%s", r)
	}

	// "--" ends the flags: what follows is an argument even when it
	// starts with a dash; without it, such a word is a flag.
	decode(t, ok(t, "submit", "--db", db, "--json", "count", "--", "-1"), &got)
	if string(got.Payload) != "-1" {
		t.Errorf("submit n -- -1: payload %s, want -1", got.Payload)
	}
	if r := cli(t, "submit", "--db", db, "count", "-1"); r.code != exitUsage || !strings.Contains(r.stderr, "-1") {
		t.Errorf("submit n -1: want -1 refused as a flag\n%s", r)
	}
	if r := cli(t, "get", "--db", db, "--", task.ID, "--json"); r.code != exitUsage || !strings.Contains(r.stderr, "takes one task id") {
		t.Errorf("get -- ID --json: want --json counted as a second argument\n%s", r)
	}
	// A flag's value is the next word, whatever it looks like.
	decode(t, ok(t, "submit", "--queue", "--json", "--db", db, "x", "--json"), &got)
	if got.Queue != "--json" {
		t.Errorf("submit --queue --json: queue %q, want --json", got.Queue)
	}
	if r := cli(t, "get", task.ID, "--db"); r.code != exitUsage || !strings.Contains(r.stderr, "flag needs an argument: -db") {
		t.Errorf("get ID --db: want the missing value reported\n%s", r)
	}
}

func TestSplitFlags(t *testing.T) {
	fs := (&env{cmd: &command{name: "t"}}).dbFlags()
	fs.Bool("b", false, "")
	for _, c := range []struct {
		in, flags, args string
	}{
		{"a --db x b", "--db x", "a b"},
		{"--json a -b c", "--json -b", "a c"},
		{"a --db=x --b=false", "--db=x --b=false", "a"},
		{"- a", "", "- a"},
		{"a -- --db x", "", "a --db x"},
		{"--db -- a", "--db --", "a"},
		{"--unknown a", "--unknown", "a"},
		{"a --db", "--db", "a"},
		{"---db x", "---db", "x"},
	} {
		flags, args := splitFlags(fs, strings.Fields(c.in))
		if strings.Join(flags, " ") != c.flags || strings.Join(args, " ") != c.args {
			t.Errorf("splitFlags(%q) = %q, %q; want %q, %q", c.in, flags, args, c.flags, c.args)
		}
	}
}
