package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every command checks its arguments the same way, before anything a
// command checks of its own and before touching the database, and says
// so in the same words.
func TestArgumentMessages(t *testing.T) {
	db := filepath.Join(t.TempDir(), "x.db")
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"stats", "--db", db, "extra"}, `stats: takes no arguments, got ["extra"] (see 'cairnq stats -h')`},
		{[]string{"list", "--db", db, "a", "b"}, `list: takes no arguments, got ["a" "b"] (see 'cairnq list -h')`},
		{[]string{"purge", "--db", db, "a"}, `purge: takes no arguments, got ["a"] (see 'cairnq purge -h')`},
		{[]string{"watch", "--db", db, "a"}, `watch: takes no arguments, got ["a"] (see 'cairnq watch -h')`},
		{[]string{"migrate", "--db", db, "--check", "a"}, `migrate: takes no arguments, got ["a"] (see 'cairnq migrate -h')`},
		{[]string{"doctor", "--db", db, "--window", "0s", "a"}, `doctor: takes no arguments, got ["a"] (see 'cairnq doctor -h')`},
		{[]string{"demo", "--n", "1", "a"}, `demo: takes no arguments, got ["a"] (see 'cairnq demo -h')`},
		{[]string{"ui", "--db", db, "--allow-writes", "a"}, `ui: takes no arguments, got ["a"] (see 'cairnq ui -h')`},
		{[]string{"get", "--db", db}, `get: takes one task id (see 'cairnq get -h')`},
		{[]string{"cancel", "--db", db, "a", "b"}, `cancel: takes one task id, or none with --status, --queue or --name (see 'cairnq cancel -h')`},
		{[]string{"retry", "--db", db, "--reset-attempt"}, `retry: give a task's ID, or --status, --queue or --name for every task matching them (see 'cairnq retry -h')`},
		{[]string{"submit", "--db", db, "a", "{}", "c"}, `submit: takes NAME and an optional JSON payload (see 'cairnq submit -h')`},
		{[]string{"submit", "--db", db, "a", "{"}, `submit: the payload is not valid JSON (see 'cairnq submit -h')`},
	} {
		r := cli(t, c.args...)
		if want := "cairnq: usage: " + c.msg + "\n"; r.code != exitUsage || !errors.Is(r.err, errUsage) || r.stderr != want || r.stdout != "" {
			t.Errorf("cairnq %s: want exit 2 and stderr %q\n%s", strings.Join(c.args, " "), want, r)
		}
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a usage error created %s", db)
	}
}

// Whatever a command returns, and however (done, an error from the
// database, a task not found, a refused argument), its connections are
// closed by the time it has: a command leaves no session open on the
// server.
func TestCommandsCloseTheDatabase(t *testing.T) {
	b := postgresBackend(t)
	sessions := func() string {
		return b.text(t, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
	}
	ok(t, "migrate", "--db", b.db)
	var task taskJSON
	decode(t, ok(t, "submit", "--db", b.db, "--json", "n"), &task)
	for _, c := range []struct {
		code int
		args []string
	}{
		{exitOK, []string{"stats"}},
		{exitOK, []string{"list", "--json"}},
		{exitOK, []string{"get", task.ID}},
		{exitOK, []string{"cancel", task.ID}},
		{exitOK, []string{"retry", task.ID}},
		{exitOK, []string{"purge"}},
		{exitOK, []string{"watch", "--for", "30ms"}},
		{exitOK, []string{"migrate"}},
		{exitOK, []string{"migrate", "--check"}},
		{exitOK, []string{"doctor"}},
		{exitNotFound, []string{"get", "task_00000000000000000000000000"}},
		{exitError, []string{"retry", task.ID}},
		{exitUsage, []string{"list", "--status", "bogus"}},
		{exitUsage, []string{"submit", "--max-attempts", "-1", "n"}},
	} {
		args := withDB(c.args, "--db", b.db)
		want(t, cli(t, args...), c.code, args...)
		waitFor(t, "no session left by cairnq "+strings.Join(args, " "), func() bool { return sessions() == "0" })
	}
}
