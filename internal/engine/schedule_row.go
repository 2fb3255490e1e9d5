package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
)

// A Scheduler's entry is one row of cairnq_meta while a scheduler runs
// it, as a worker is (worker_beat.go): its key SchedulePrefix followed by
// the entry's id, its value the entry as JSON,
//
//	{"v":1,"id":"nightly-report","spec":"0 3 * * *","name":"report","queue":"default",
//	 "missed":"skip","next_at_ms":1767322800000,"last_slot_ms":1767236400000,
//	 "beat_at_ms":1767312060000,"every_ms":30000}
//
// next_at_ms is the next slot, last_slot_ms the newest slot a scheduler
// submitted or found submitted (0: none yet), times by the writing
// scheduler's clock. Every scheduler running the entry rewrites the row
// every every_ms; none deletes it as it stops (another may run the same
// entry), so a row whose beat is older than three beats has no scheduler
// running it, and one older than WorkerForgetAfter is deleted by the next
// scheduler to start.

// SchedulePrefix starts the cairnq_meta key of every schedule's row.
const SchedulePrefix = "cairnq:schedule:"

// scheduleValue is a schedule row's value.
type scheduleValue struct {
	V          int    `json:"v"`
	ID         string `json:"id"`
	Spec       string `json:"spec"`
	Name       string `json:"name"`
	Queue      string `json:"queue"`
	Missed     string `json:"missed"`
	NextMS     int64  `json:"next_at_ms"`
	LastSlotMS int64  `json:"last_slot_ms"`
	BeatMS     int64  `json:"beat_at_ms"`
	EveryMS    int64  `json:"every_ms"`
}

// ScheduleBeat writes e's row, over its last beat.
func (s *Store) ScheduleBeat(ctx context.Context, e cairnqtype.ScheduleInfo) error {
	ms := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixMilli()
	}
	return s.metaPut(ctx, SchedulePrefix+e.ID, scheduleValue{V: 1, ID: e.ID, Spec: e.Spec, Name: e.Name, Queue: e.Queue,
		Missed: e.Missed, NextMS: ms(e.Next), LastSlotMS: ms(e.LastSlot), BeatMS: ms(e.BeatAt), EveryMS: e.Every.Milliseconds()})
}

// ScheduleForget deletes entry id's row.
func (s *Store) ScheduleForget(ctx context.Context, id string) error {
	return s.metaDelete(ctx, SchedulePrefix+id)
}

// Schedules returns every schedule row, by entry id. A row whose value
// does not read as a schedule has only its id.
func (s *Store) Schedules(ctx context.Context) ([]cairnqtype.ScheduleInfo, error) {
	rows, err := s.metaRows(ctx, SchedulePrefix)
	if err != nil {
		return nil, err
	}
	out := make([]cairnqtype.ScheduleInfo, 0, len(rows))
	for _, r := range rows {
		e := cairnqtype.ScheduleInfo{ID: r.name}
		var v scheduleValue
		if json.Unmarshal([]byte(r.value), &v) == nil && v.V == 1 {
			e.Spec, e.Name, e.Queue, e.Missed = v.Spec, v.Name, v.Queue, v.Missed
			e.Next, e.LastSlot = msTime(v.NextMS, v.NextMS != 0), msTime(v.LastSlotMS, v.LastSlotMS != 0)
			e.BeatAt, e.Every = msTime(v.BeatMS, v.BeatMS != 0), time.Duration(v.EveryMS)*time.Millisecond
		}
		out = append(out, e)
	}
	return out, nil
}
