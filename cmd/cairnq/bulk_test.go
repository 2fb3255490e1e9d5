package main

import (
	"strings"
	"testing"
)

// cancel, retry and delete by filter act on every matching task and say
// how many; delete of one id deletes it; an ID with a filter, neither,
// or a mistyped status is a usage error that changes nothing.
func TestByFilterCommands(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		db := []string{"--db", b.db}
		run := func(args ...string) result { t.Helper(); return ok(t, append(args, db...)...) }
		run("migrate")
		var first struct{ ID string }
		decode(t, run("submit", "--json", "--queue", "mail", "email"), &first)
		for range 4 {
			run("submit", "--queue", "mail", "email")
		}
		run("submit", "--queue", "mail", "sms")
		run("submit", "--queue", "other", "email")

		if r := run("cancel", "--queue", "mail", "--name", "email"); r.stdout != "canceled 5 tasks\n" {
			t.Errorf("cancel by filter printed %q", r.stdout)
		}
		var n map[string]int
		decode(t, run("retry", "--status", "canceled", "--json"), &n)
		if n["retried"] != 5 {
			t.Errorf("retry by filter --json = %v, want retried 5", n)
		}
		for _, bad := range [][]string{
			{"cancel", first.ID, "--queue", "mail"},
			{"delete"},
			{"retry", "--status", "faild"},
		} {
			r := cli(t, append(bad, db...)...)
			want(t, r, exitUsage, bad...)
		}
		if r := cli(t, append([]string{"retry", "--status", "faild"}, db...)...); !strings.Contains(r.stderr, "did you mean failed?") {
			t.Errorf("a mistyped status: %q", r.stderr)
		}
		if got := b.text(t, "SELECT count(*) FROM cairnq_tasks WHERE status = 'queued'"); got != "7" {
			t.Errorf("queued tasks after the refusals: %s, want 7", got)
		}

		if r := run("delete", first.ID); r.stdout != first.ID+" deleted (was queued)\n" {
			t.Errorf("delete ID printed %q", r.stdout)
		}
		want(t, cli(t, append([]string{"delete", first.ID}, db...)...), exitNotFound, "delete", first.ID)
		if r := run("delete", "--queue", "mail"); r.stdout != "deleted 5 tasks\n" {
			t.Errorf("delete by filter printed %q", r.stdout)
		}
		if got := b.text(t, "SELECT count(*) FROM cairnq_tasks"); got != "1" {
			t.Errorf("tasks left: %s, want the one on other", got)
		}
	})
}
