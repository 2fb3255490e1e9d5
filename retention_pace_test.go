package cairnq

import (
	"testing"
	"time"
)

// A paced sweep waits three times as long as each full batch took, so
// its deletes take a quarter of a connection's time, until the pause
// would carry it past half its interval: from then on the batches run
// back to back and the sweep ends before the next is due.
func TestSweepPauseSpacesBatchesWithinHalfTheInterval(t *testing.T) {
	for _, c := range []struct {
		took, sweptFor, interval, want time.Duration
	}{
		{20 * time.Millisecond, 0, 10 * time.Second, 60 * time.Millisecond},
		{20 * time.Millisecond, 4 * time.Second, 10 * time.Second, 60 * time.Millisecond},
		{20 * time.Millisecond, 4940 * time.Millisecond, 10 * time.Second, 60 * time.Millisecond},
		{20 * time.Millisecond, 4941 * time.Millisecond, 10 * time.Second, 0},
		{20 * time.Millisecond, 6 * time.Second, 10 * time.Second, 0},
		{2 * time.Second, 0, 10 * time.Second, 0}, // one batch's pause alone is past half
		{0, 0, time.Hour, 0},
	} {
		if got := sweepPause(c.took, c.sweptFor, c.interval); got != c.want {
			t.Errorf("sweepPause(%v, %v, %v) = %v, want %v", c.took, c.sweptFor, c.interval, got, c.want)
		}
	}
}
