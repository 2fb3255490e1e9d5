package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// list --limit below 1 is a usage error: --limit 0 silently listed 100
// rows (the library's default). A list the limit cut short says so on
// stderr, leaving stdout the list alone.
func TestListLimit(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	for _, n := range []string{"0", "-1"} {
		r := cli(t, "list", "--db", missing, "--limit", n)
		want := "cairnq: usage: list: --limit must be at least 1, got " + n + " (see 'cairnq list -h')\n"
		if r.code != exitUsage || !errors.Is(r.err, errUsage) || r.stderr != want || r.stdout != "" {
			t.Errorf("list --limit %s: want exit 2 and %q\n%s", n, want, r)
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused --limit touched %s", missing)
	}

	db := filepath.Join(dir, "tasks.db")
	ok(t, "migrate", "--db", db)
	for range 3 {
		ok(t, "submit", "--db", db, "n")
	}
	rows := func(r result) int { return strings.Count(r.stdout, "task_") }
	r := ok(t, "list", "--db", db, "--limit", "2")
	if rows(r) != 2 || r.stderr != "cairnq: showing 2 of at least 3 tasks; use --limit for more\n" {
		t.Errorf("list --limit 2 of 3: want 2 rows and the note on stderr\n%s", r)
	}
	for _, limit := range []string{"3", "4"} {
		if r := ok(t, "list", "--db", db, "--limit", limit); rows(r) != 3 || r.stderr != "" {
			t.Errorf("list --limit %s of 3: want every row and no note\n%s", limit, r)
		}
	}
	if r := ok(t, "list", "--db", db); rows(r) != 3 || r.stderr != "" {
		t.Errorf("list of 3 under the default limit:\n%s", r)
	}
	var list struct {
		Tasks []taskJSON `json:"tasks"`
	}
	r = ok(t, "list", "--db", db, "--json", "--limit", "1")
	decode(t, r, &list)
	if len(list.Tasks) != 1 || r.stderr != "cairnq: showing 1 of at least 2 tasks; use --limit for more\n" {
		t.Errorf("list --json --limit 1 of 3: want one task on stdout, the note on stderr\n%s", r)
	}
}
