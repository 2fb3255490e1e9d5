package cairnq

import (
	"context"
	"time"
)

// ScheduleInfo is a Scheduler's entry as the schedulers running it last
// wrote it (Client.Schedules): each running Scheduler rewrites its
// entries' rows every 30 seconds.
type ScheduleInfo struct {
	// ID is the entry's id (ScheduleOptions.ID), Spec its schedule.
	ID   string
	Spec string
	// Name and Queue are the task it submits at each slot.
	Name  string
	Queue string
	// Missed is its MissedPolicy's name.
	Missed string
	// Next is its next slot; LastSlot the newest slot submitted (by any
	// scheduler) when the row was written, zero when none was yet.
	Next     time.Time
	LastSlot time.Time
	// BeatAt is when a scheduler last wrote the row, by its clock; Every
	// is how often one does.
	BeatAt time.Time
	Every  time.Duration
}

// Silent reports whether no scheduler has written the entry's row for
// three beats by now: none runs it, and its next slot will not be
// submitted until one does. A silent entry's row is deleted by the next
// scheduler to start a day after its last beat.
func (e ScheduleInfo) Silent(now time.Time) bool {
	return e.BeatAt.IsZero() || e.Every > 0 && now.Sub(e.BeatAt) > 3*e.Every
}

// Schedules returns the entries of the Schedulers running on the
// database, or run there within the last day, by id. Other SDKs'
// schedulers write no row.
func (c *Client) Schedules(ctx context.Context) ([]ScheduleInfo, error) {
	es, err := c.store.Schedules(ctx)
	if err != nil {
		return nil, userErr(err)
	}
	out := make([]ScheduleInfo, len(es))
	for i, e := range es {
		out[i] = ScheduleInfo(e)
	}
	return out, nil
}
