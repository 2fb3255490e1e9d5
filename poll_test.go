package cairnq

import (
	"testing"
	"time"
)

// A poll never comes later than its interval says, and from four slots of
// pollGrid up it lands on the grid, at most one slot early, so that the
// polls of waits started apart coincide.
func TestPollDelayAlignsToTheGrid(t *testing.T) {
	base := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, interval := range []time.Duration{
		time.Millisecond, 50 * time.Millisecond, 4*pollGrid - 1,
		4 * pollGrid, 150 * time.Millisecond, 337 * time.Millisecond, DefaultMaxPollInterval,
	} {
		for _, offset := range []time.Duration{0, time.Microsecond, 7 * time.Millisecond, pollGrid - 1} {
			now := base.Add(offset)
			d := pollDelay(now, interval)
			if d > interval || d <= 0 {
				t.Errorf("pollDelay(+%v, %v) = %v: not in (0, interval]", offset, interval, d)
			}
			if interval < 4*pollGrid {
				if d != interval {
					t.Errorf("pollDelay(+%v, %v) = %v: a short interval must stay exact", offset, interval, d)
				}
				continue
			}
			if at := now.Add(d); at.Truncate(pollGrid) != at || d <= interval-pollGrid {
				t.Errorf("pollDelay(+%v, %v) = %v: off the grid or more than a slot early", offset, interval, d)
			}
		}
	}
}
