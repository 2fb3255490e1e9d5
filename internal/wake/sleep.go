package wake

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends (then it reports false): the wait of
// every poll and back-off in the runtime, which a shutdown must end.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
