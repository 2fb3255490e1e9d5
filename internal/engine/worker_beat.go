package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/protocol"
)

// A running Go worker is one row of cairnq_meta, as a paused queue is
// (pause.go): its key WorkerPrefix followed by the worker's id, its value
// the worker as JSON,
//
//	{"v":1,"id":"worker_01J...","host":"web-1","pid":4242,"queues":["default"],
//	 "names":["email"],"concurrency":8,"running":3,"started_at_ms":1767312000000,
//	 "beat_at_ms":1767312060000,"every_ms":10000}
//
// times by the worker's clock. The worker writes it as it starts and
// every every_ms after, and deletes it as it stops; a row whose beat is
// older than three beats is a worker that stopped without saying so
// (killed, or cut off from the database), and one older than
// WorkerForgetAfter is deleted by the next worker to start. Other SDKs'
// workers write no such row.

// WorkerPrefix starts the cairnq_meta key of every worker's beat.
const WorkerPrefix = "cairnq:worker:"

// WorkerForgetAfter is how long after its last beat a worker's row is
// deleted by the next worker to start.
const WorkerForgetAfter = 24 * time.Hour

// workerValue is a worker row's value.
type workerValue struct {
	V           int      `json:"v"`
	ID          string   `json:"id"`
	Host        string   `json:"host"`
	PID         int      `json:"pid"`
	Queues      []string `json:"queues"`
	Names       []string `json:"names"`
	Concurrency int      `json:"concurrency"`
	Running     int      `json:"running"`
	StartedMS   int64    `json:"started_at_ms"`
	BeatMS      int64    `json:"beat_at_ms"`
	EveryMS     int64    `json:"every_ms"`
}

// WorkerBeat writes w's row, over its last beat.
func (s *Store) WorkerBeat(ctx context.Context, w cairnqtype.WorkerInfo) error {
	return s.metaPut(ctx, WorkerPrefix+w.ID, workerValue{V: 1, ID: w.ID, Host: w.Host, PID: w.PID, Queues: w.Queues,
		Names: w.Names, Concurrency: w.Concurrency, Running: w.Running, StartedMS: w.StartedAt.UnixMilli(),
		BeatMS: w.BeatAt.UnixMilli(), EveryMS: w.Every.Milliseconds()})
}

// WorkerForget deletes worker id's row.
func (s *Store) WorkerForget(ctx context.Context, id string) error {
	return s.metaDelete(ctx, WorkerPrefix+id)
}

// Workers returns every worker row, by id. A row whose value does not
// read as a worker has only its id.
func (s *Store) Workers(ctx context.Context) ([]cairnqtype.WorkerInfo, error) {
	rows, err := s.metaRows(ctx, WorkerPrefix)
	if err != nil {
		return nil, err
	}
	out := make([]cairnqtype.WorkerInfo, 0, len(rows))
	for _, r := range rows {
		w := cairnqtype.WorkerInfo{ID: r.name}
		var v workerValue
		if json.Unmarshal([]byte(r.value), &v) == nil && v.V == 1 {
			w.Host, w.PID, w.Queues, w.Names = v.Host, v.PID, v.Queues, v.Names
			w.Concurrency, w.Running, w.Every = v.Concurrency, v.Running, time.Duration(v.EveryMS)*time.Millisecond
			w.StartedAt, w.BeatAt = msTime(v.StartedMS, v.StartedMS != 0), msTime(v.BeatMS, v.BeatMS != 0)
		}
		out = append(out, w)
	}
	return out, nil
}

// metaRow is a cairnq_meta row of ours: its key past the prefix, and its
// value.
type metaRow struct{ name, value string }

// metaRows returns the cairnq_meta rows whose key starts with prefix, by
// key.
func (s *Store) metaRows(ctx context.Context, prefix string) ([]metaRow, error) {
	rows, err := s.readOne(ctx, stmtMetaRows, protocol.Args{"prefix": prefix})
	if err != nil {
		return nil, err
	}
	out := make([]metaRow, 0, len(rows))
	for _, r := range rows {
		key, _, err := asString("key", r["key"])
		if err != nil {
			return nil, err
		}
		name, ok := strings.CutPrefix(key, prefix)
		if !ok {
			continue
		}
		value, _, err := asString("value", r["value"])
		if err != nil {
			return nil, err
		}
		out = append(out, metaRow{name, value})
	}
	slices.SortFunc(out, func(a, b metaRow) int { return cmp.Compare(a.name, b.name) })
	return out, nil
}

// metaPut writes the row key with value as JSON, over what it held.
func (s *Store) metaPut(ctx context.Context, key string, value any) error {
	b, err := json.Marshal(value)
	if err != nil {
		return err
	}
	_, err = s.writeOne(ctx, stmtMetaPut, protocol.Args{"key": key, "value": string(b)})
	return err
}

// metaDelete deletes the row key.
func (s *Store) metaDelete(ctx context.Context, key string) error {
	_, err := s.writeOne(ctx, stmtMetaDelete, protocol.Args{"key": key})
	return err
}
