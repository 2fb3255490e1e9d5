package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/protocol"
)

// A queue paused for every Go worker on the database is one row of
// cairnq_meta, beside the protocol's protocol_version and schema_version
// (which every SDK reads by key, and so never sees these): its key
// PausePrefix followed by the queue's name, its value the pause as JSON,
//
//	{"v":1,"queue":"emails","at_ms":1767312000000,"by":"ops@host","reason":"provider down"}
//
// at_ms by the pausing process's clock. The row's presence is the pause:
// a worker reads every such row once a poll interval and claims nothing
// from the queues they name; deleting the row resumes the queue. A value
// another writer left unreadable still pauses its queue. No table or
// column is added; the TypeScript and Python SDKs' workers do not read
// these rows, and go on claiming from a paused queue.

// PausePrefix starts the cairnq_meta key of every paused queue.
const PausePrefix = "cairnq:paused:"

// MaxPauseReasonBytes bounds a pause's reason.
const MaxPauseReasonBytes = 1000

// pauseValue is a pause row's value.
type pauseValue struct {
	V      int    `json:"v"`
	Queue  string `json:"queue"`
	AtMS   int64  `json:"at_ms"`
	By     string `json:"by"`
	Reason string `json:"reason"`
}

// PauseQueue pauses queue for every Go worker on the database and
// returns the pause in force: this one, or the earlier pause of a queue
// paused already (already true), which it leaves as it was.
func (s *Store) PauseQueue(ctx context.Context, queue, by, reason string) (p cairnqtype.QueuePause, already bool, err error) {
	const op = "pause queue"
	if err := checkPauseQueue(op, queue); err != nil {
		return p, false, err
	}
	if err := checkText(op, "by", by, cairnqtype.MaxNameBytes); err != nil {
		return p, false, err
	}
	if err := checkText(op, "reason", reason, MaxPauseReasonBytes); err != nil {
		return p, false, err
	}
	value, err := json.Marshal(pauseValue{V: 1, Queue: queue, AtMS: s.now().UnixMilli(), By: by, Reason: reason})
	if err != nil {
		return p, false, err
	}
	rows, err := s.writeOne(ctx, stmtQueuePause, protocol.Args{"key": PausePrefix + queue, "value": string(value)})
	if err != nil {
		return p, false, err
	}
	if len(rows) != 1 {
		return p, false, fmt.Errorf("cairnq: pause queue: the upsert returned %d rows, want 1", len(rows))
	}
	inForce, _, err := asString("value", rows[0]["value"])
	if err != nil {
		return p, false, err
	}
	return pauseOf(queue, inForce), inForce != string(value), nil
}

// ResumeQueue lifts queue's pause and returns it, or nil when the queue
// was not paused.
func (s *Store) ResumeQueue(ctx context.Context, queue string) (*cairnqtype.QueuePause, error) {
	const op = "resume queue"
	if err := checkPauseQueue(op, queue); err != nil {
		return nil, err
	}
	rows, err := s.writeOne(ctx, stmtQueueResume, protocol.Args{"key": PausePrefix + queue})
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	value, _, err := asString("value", rows[0]["value"])
	if err != nil {
		return nil, err
	}
	p := pauseOf(queue, value)
	return &p, nil
}

// PausedQueues returns every queue paused for the fleet, by name.
func (s *Store) PausedQueues(ctx context.Context) ([]cairnqtype.QueuePause, error) {
	rows, err := s.readOne(ctx, stmtMetaRows, protocol.Args{"prefix": PausePrefix})
	if err != nil {
		return nil, err
	}
	return pausesOf(rows)
}

// checkPauseQueue checks a queue's name as a submit's, which may not be
// empty here: a submit's "" is the default queue, a pause names one.
func checkPauseQueue(op, queue string) error {
	if queue == "" {
		return argError(op, "queue", "is empty")
	}
	return checkOptionalName(op, "queue", queue)
}

// pausesOf reads pause rows (key, value), sorted by queue: the key names
// the queue (pauseOf reads the value).
func pausesOf(rows []executor.Row) ([]cairnqtype.QueuePause, error) {
	out := make([]cairnqtype.QueuePause, 0, len(rows))
	for _, r := range rows {
		key, _, err := asString("key", r["key"])
		if err != nil {
			return nil, err
		}
		queue, ok := strings.CutPrefix(key, PausePrefix)
		if !ok {
			continue
		}
		value, _, err := asString("value", r["value"])
		if err != nil {
			return nil, err
		}
		out = append(out, pauseOf(queue, value))
	}
	slices.SortFunc(out, func(a, b cairnqtype.QueuePause) int { return cmp.Compare(a.Queue, b.Queue) })
	return out, nil
}

// pauseOf is queue's pause whose row holds value; a value that does not
// read as a pause leaves all but the queue zero.
func pauseOf(queue, value string) cairnqtype.QueuePause {
	p := cairnqtype.QueuePause{Queue: queue}
	var v pauseValue
	if json.Unmarshal([]byte(value), &v) == nil {
		p.By, p.Reason = v.By, v.Reason
		if v.AtMS != 0 {
			p.At = time.UnixMilli(v.AtMS)
		}
	}
	return p
}
