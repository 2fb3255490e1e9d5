package cairnq

import (
	"encoding/json"
	"time"

	"github.com/cairnq/cairnq-go/internal/engine"
)

// DurableRecord is what a durable handler recorded on its task (Once,
// Sleep, WaitEvent): the steps in the order they ran, the events
// delivered to it, and the sleep or wait it is parked in, if it is.
type DurableRecord struct {
	Steps  []DurableStep
	Events []DeliveredEvent // in the order they arrived
	// Parked is the sleep or wait the task is parked in: it is queued,
	// and its last step is a sleep, or a wait whose event has not
	// arrived. Nil otherwise.
	Parked *DurableStep
}

// The kinds of a DurableStep besides a step of Once ("").
const (
	DurableSleep = engine.StepSleep // Sleep, SleepUntil
	DurableWait  = engine.StepWait  // WaitEvent
)

// DurableStep is one recorded step of a durable handler.
type DurableStep struct {
	Name string
	// Kind is "" for a step of Once, DurableSleep or DurableWait.
	Kind string
	// Output is a step's output as JSON (null for a sleep or a wait).
	Output json.RawMessage
	// At is when a step finished, or when a sleep or a wait began.
	At time.Time
	// Took is how long a step's function ran.
	Took time.Duration
	// Attempt is the attempt that ran it.
	Attempt int
	// Until is when a sleep ends, or a wait times out.
	Until time.Time
}

// DeliveredEvent is an event delivered to a task (Client.SendEvent), or
// the mark a wait that timed out left in its place.
type DeliveredEvent struct {
	Name     string
	Payload  json.RawMessage
	At       time.Time
	TimedOut bool
}

// DurableOf reads what a durable handler recorded on t, from its
// metadata's cairnq_durable member (docs/plans/durable-execution.md); a
// task without one has an empty record. Metadata whose member this SDK
// cannot read is an error.
func DurableOf(t *Task) (*DurableRecord, error) {
	d, err := engine.ReadDurable(t.row())
	if err != nil {
		return nil, userErr(err)
	}
	rec := &DurableRecord{}
	for _, s := range d.Steps {
		rec.Steps = append(rec.Steps, DurableStep{Name: s.Name, Kind: s.Kind, Output: s.Output, At: time.UnixMilli(s.AtMs),
			Took: time.Duration(s.TookMs) * time.Millisecond, Attempt: s.Attempt, Until: msTime(s.UntilMs)})
	}
	for _, name := range d.EventNames() {
		ev := d.Events[name]
		rec.Events = append(rec.Events, DeliveredEvent{Name: name, Payload: ev.Payload, At: time.UnixMilli(ev.AtMs), TimedOut: ev.TimedOut})
	}
	if p, ok := d.Parked(t.Status == StatusQueued); ok {
		rec.Parked = &rec.Steps[p]
	}
	return rec, nil
}

// msTime is epoch milliseconds as a time, zero for 0.
func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
