package main

import (
	"slices"
	"strings"
	"testing"
)

// pause and resume a queue for the fleet: the row they write, what each
// prints (text and --json), what a second pause or resume says, and
// stats and doctor listing the pause; bad input writes nothing.
func TestFleetPauseCommands(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		db := []string{"--db", b.db}
		ok(t, append([]string{"migrate"}, db...)...)
		ok(t, append([]string{"submit"}, append(db, "--queue", "emails", "send")...)...)

		r := ok(t, append([]string{"pause", "--by", "ops", "--reason", "provider down"}, append(db, "emails")...)...)
		if !strings.HasPrefix(r.stdout, "queue emails paused for every Go worker: since ") || !strings.Contains(r.stdout, "by ops: provider down") {
			t.Errorf("pause printed %q", r.stdout)
		}
		if got := b.text(t, "SELECT value FROM cairnq_meta WHERE key = 'cairnq:paused:emails'"); !strings.Contains(got, `"by":"ops"`) {
			t.Errorf("the pause row's value = %s", got)
		}
		var again struct {
			Queue    string `json:"queue"`
			PausedAt int64  `json:"paused_at_ms"`
			By       string `json:"by"`
			Reason   string `json:"reason"`
			Already  bool   `json:"already"`
		}
		decode(t, ok(t, append([]string{"pause", "--json", "--by", "someone else"}, append(db, "emails")...)...), &again)
		if again.Queue != "emails" || !again.Already || again.By != "ops" || again.Reason != "provider down" || again.PausedAt == 0 {
			t.Errorf("a second pause --json = %+v, want the first pause, already", again)
		}

		var stats struct {
			Paused []struct {
				Queue string `json:"queue"`
				By    string `json:"by"`
			} `json:"paused"`
		}
		decode(t, ok(t, append([]string{"stats", "--json"}, db...)...), &stats)
		if len(stats.Paused) != 1 || stats.Paused[0].Queue != "emails" || stats.Paused[0].By != "ops" {
			t.Errorf("stats --json paused = %+v", stats.Paused)
		}
		if r := ok(t, append([]string{"stats"}, db...)...); !strings.Contains(r.stdout, "paused: emails, since ") {
			t.Errorf("stats printed no pause:\n%s", r.stdout)
		}
		decode(t, ok(t, append([]string{"stats", "--json", "--queue", "default"}, db...)...), &stats)
		if len(stats.Paused) != 0 {
			t.Errorf("stats --queue default --json paused = %+v, want none", stats.Paused)
		}
		if r := ok(t, append([]string{"doctor"}, db...)...); !strings.Contains(r.stdout, "emails: 1 due") || !strings.Contains(r.stdout, "(paused)") ||
			!hasLine(r.stdout, "paused", "ok", "emails,", "since") {
			t.Errorf("doctor did not show the pause:\n%s", r.stdout)
		}

		if r := ok(t, append([]string{"resume"}, append(db, "emails")...)...); !strings.HasPrefix(r.stdout, "queue emails resumed (it was paused since ") {
			t.Errorf("resume printed %q", r.stdout)
		}
		if r := ok(t, append([]string{"resume"}, append(db, "emails")...)...); r.stdout != "queue emails was not paused\n" {
			t.Errorf("a second resume printed %q", r.stdout)
		}
		var resumed struct {
			Queue   string `json:"queue"`
			Resumed bool   `json:"resumed"`
		}
		decode(t, ok(t, append([]string{"resume", "--json"}, append(db, "emails")...)...), &resumed)
		if resumed.Queue != "emails" || resumed.Resumed {
			t.Errorf("resume --json of a queue not paused = %+v", resumed)
		}

		for _, args := range [][]string{
			{"pause", ""}, {"pause", strings.Repeat("q", 256)}, {"pause", "--reason", strings.Repeat("r", 1001), "emails"},
			{"resume", ""},
		} {
			args = withDB(args, db...)
			r := cli(t, args...)
			want(t, r, exitUsage, args...)
			if !strings.Contains(r.stderr, "invalid") {
				t.Errorf("cairnq %s: no clear message\n%s", strings.Join(args, " "), r)
			}
		}
		if got := b.text(t, "SELECT count(*) FROM cairnq_meta WHERE key LIKE 'cairnq:paused:%'"); got != "0" {
			t.Errorf("%s pause rows after bad input, want none", got)
		}
	})
}

// hasLine reports whether a line of out starts with the fields given.
func hasLine(out string, fields ...string) bool {
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) >= len(fields) && slices.Equal(f[:len(fields)], fields) {
			return true
		}
	}
	return false
}
