package maintenance

import (
	"testing"
	"time"
)

// A paced sweep waits three times as long as each full batch took, so
// its deletes take a quarter of a connection's time, cut to what is left
// of the first half of its interval: past it the batches run back to
// back.
func TestSweepPauseSpacesBatchesWithinHalfTheInterval(t *testing.T) {
	for _, c := range []struct {
		took, sweptFor, interval, want time.Duration
	}{
		{20 * time.Millisecond, 0, 10 * time.Second, 60 * time.Millisecond},
		{20 * time.Millisecond, 4 * time.Second, 10 * time.Second, 60 * time.Millisecond},
		{20 * time.Millisecond, 4940 * time.Millisecond, 10 * time.Second, 60 * time.Millisecond},
		{20 * time.Millisecond, 4970 * time.Millisecond, 10 * time.Second, 30 * time.Millisecond},
		{20 * time.Millisecond, 5 * time.Second, 10 * time.Second, 0},
		{20 * time.Millisecond, 6 * time.Second, 10 * time.Second, 0},
		{2 * time.Second, 0, 10 * time.Second, 5 * time.Second}, // cut to half the interval
		{0, 0, time.Hour, 0},
	} {
		if got := sweepPause(sweepIdle, c.took, c.sweptFor, c.interval); got != c.want {
			t.Errorf("sweepPause(%v, %v, %v) = %v, want %v", c.took, c.sweptFor, c.interval, got, c.want)
		}
	}
}
