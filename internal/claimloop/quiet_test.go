package claimloop

import (
	"testing"
	"time"
)

// A worker defers notified wakeups only once it has lost a race, backs
// off by doubling to its poll interval (never past maxQuiet), and is
// prompt again the moment it claims anything.
func TestNextQuietBacksOffOnlyAfterALostRace(t *testing.T) {
	w := &Loop{Poll: 500 * time.Millisecond}
	steps := []struct {
		name                  string
		quiet                 time.Duration
		drew, notified, opens bool
		want                  time.Duration
	}{
		{"an empty probe alone, a lone process's own retries", 0, false, true, false, 0},
		{"a timer's poll that found nothing", 0, false, false, true, 0},
		{"a lost race", 0, false, true, true, firstQuiet},
		{"another lost race", firstQuiet, false, true, true, 2 * firstQuiet},
		{"an empty probe after a lost race", 2 * firstQuiet, false, true, false, 4 * firstQuiet},
		{"a timer's poll holds the deferral", 4 * firstQuiet, false, false, false, 4 * firstQuiet},
		{"capped at the poll interval", 400 * time.Millisecond, false, true, false, 500 * time.Millisecond},
		{"a draw that claims", 500 * time.Millisecond, true, true, true, 0},
	}
	for _, s := range steps {
		if got := w.nextQuiet(s.quiet, s.drew, s.notified, s.opens); got != s.want {
			t.Errorf("%s: nextQuiet(%v) = %v, want %v", s.name, s.quiet, got, s.want)
		}
	}
	long := &Loop{Poll: time.Hour}
	if got := long.nextQuiet(800*time.Millisecond, false, true, true); got != maxQuiet {
		t.Errorf("poll of an hour: nextQuiet = %v, want maxQuiet %v", got, maxQuiet)
	}
}
