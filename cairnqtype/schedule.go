package cairnqtype

import "time"

// ScheduleInfo is a Scheduler's entry as the schedulers running it last
// wrote it.
type ScheduleInfo struct {
	ID       string
	Spec     string
	Name     string
	Queue    string
	Missed   string
	Next     time.Time
	LastSlot time.Time
	BeatAt   time.Time
	Every    time.Duration
}
