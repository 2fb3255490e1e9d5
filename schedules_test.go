package cairnq_test

import (
	"context"
	"slices"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// A running Scheduler's entries are listed by Client.Schedules from
// another client on the database, with their spec, task, next slot and
// newest slot submitted; the rows stay when it stops, and show silent
// once three beats have passed.
func TestSchedulesListed(t *testing.T) {
	onBothBackendsTwice(t, func(t *testing.T, a, b *cairnq.Client) {
		ctx := context.Background()
		s := cairnq.NewScheduler(a, nil)
		if _, err := s.Add("@every 1s", "tick", nil, &cairnq.ScheduleOptions{ID: "ticker", Submit: &cairnq.SubmitOptions{Queue: "clock"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Add("0 3 * * *", "report", nil, &cairnq.ScheduleOptions{ID: "nightly", Missed: cairnq.MissedRunOnce}); err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- s.Run(runCtx) }()
		defer func() { stop(); <-done }()

		var got []cairnq.ScheduleInfo
		waitFor(t, "both entries' rows, the ticker's with a slot submitted", func() bool {
			// The rows are written at start and every 30 s: the slot
			// shows once a row was written after the first submit.
			var err error
			if got, err = b.Schedules(ctx); err != nil {
				t.Fatal(err)
			}
			return len(got) == 2 && !got[1].LastSlot.IsZero()
		})
		now := time.Now()
		n, tick := got[0], got[1] // by id
		if n.ID != "nightly" || n.Spec != "0 3 * * *" || n.Name != "report" || n.Queue != "default" || n.Missed != "run-once" ||
			n.Next.Hour() != 3 || n.Next.Minute() != 0 || !n.Next.After(now) || n.Every != 30*time.Second || n.Silent(now) {
			t.Errorf("the nightly entry: %+v", n)
		}
		if tick.ID != "ticker" || tick.Queue != "clock" || tick.Next.Sub(now) > 2*time.Second || tick.BeatAt.IsZero() {
			t.Errorf("the ticker entry: %+v", tick)
		}
		if slot, err := b.GetByKey(ctx, cairnq.SlotKey("ticker", tick.LastSlot)); err != nil || slot.Name != "tick" {
			t.Errorf("the ticker's last slot %v: its task %v, %v", tick.LastSlot, slot, err)
		}
		if !n.Silent(n.BeatAt.Add(91 * time.Second)) {
			t.Error("an entry 91 s past its last beat, of 30 s, is not silent")
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		done <- nil // for the deferred wait
		after, err := b.Schedules(ctx)
		if err != nil || !slices.EqualFunc(after, got, func(x, y cairnq.ScheduleInfo) bool { return x.ID == y.ID }) {
			t.Errorf("Schedules after the scheduler stopped = %+v, %v; want the rows kept", after, err)
		}
	})
}
