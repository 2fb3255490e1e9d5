package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/outage"
	"github.com/cairnq/cairnq-go/protocol"
)

// copyMinRows is the fewest rows a write sends by COPY: a SubmitMany
// batch's or a workflow step write's new tasks, or the keys of such a
// write its look found free (copyKeys). Below it insert_many's one round
// trip is cheaper than COPY's two (the clock, then the rows); the figure
// is chosen, not measured at 256 (docs/benchmarks.md, "Bulk submit",
// measured 1,000 and 5,000).
const copyMinRows = 256

// copyPrintBytes bounds the JSON jsonbText prints for a COPY: the server
// reads a longer document back to the store faster than jsonbText would
// print it (about 100 MB/s).
const copyPrintBytes = 16 << 10

// copyRows yields n rows of a COPY, each filled by fill into one reused
// slice as the executor asks for it (the pgx adapter's writer goroutine,
// while the server writes the ones before).
type copyRows struct {
	n, next int
	row     []any
	fill    func(i int, row []any)
}

func (c *copyRows) Next() bool {
	c.next++
	return c.next <= c.n
}

func (c *copyRows) Values() ([]any, error) {
	c.fill(c.next-1, c.row)
	return c.row, nil
}

func (c *copyRows) Err() error { return nil }

// taskRows is the COPY rows of the items at of b, created at nowMS. The
// JSON goes as given: the server keeps its own text of it, which
// jsonbText predicts or task_json reads back (writeManyPG).
func taskRows(b *manyBatch, at []int, nowMS int64) *copyRows {
	var now any = nowMS // boxed once for every row
	return &copyRows{n: len(at), row: make([]any, len(copyColumns)), fill: func(i int, row []any) {
		b.ins[at[i]].copyRow(row, now, nowMS)
	}}
}

// copyFailed is the error of a COPY that failed for err (what names the
// rows), marked as a statement's failure is.
func copyFailed(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil { // the driver's words for it may not say so
		return fmt.Errorf("cairnq: COPY of %s ended with its context: %w: %w", what, ctx.Err(), err)
	}
	return outage.Mark(ctx, err)
}

// writeManyPG writes the tasks of b's items at, each into out at its
// item's index: by COPY where the session can (executor.Copier) and the
// batch is large enough, by insert_many otherwise.
//
// COPY returns no rows, so what insert_many returns is had otherwise:
// the time from clock_ms, read just before (the database's clock, one
// moment for the whole batch, as insert_many reads it), and the JSON as
// jsonb prints it from jsonbText, or, for the documents jsonbText leaves
// to the server or that are long, read back after the COPY (task_json).
func (s *Store) writeManyPG(ctx context.Context, q querier, b *manyBatch, at []int, out []*cairnqtype.Task) error {
	pq, ok := q.(pgQuerier)
	if !ok || len(at) < copyMinRows {
		return s.insertManyPG(ctx, q, b, at, out)
	}
	cp, ok := pq.s.(executor.Copier)
	if !ok {
		return s.insertManyPG(ctx, q, b, at, out)
	}
	printed := make([][2]string, len(b.ins)) // by item: payload, metadata as jsonb prints them
	var unread map[string]int                // by id, the items whose JSON is read back
	for k, i := range at {
		if err := batchCtx(ctx, k); err != nil {
			return err
		}
		p, ok1 := printJSONB(b.ins[i].payload)
		m, ok2 := printJSONB(b.ins[i].metadata)
		if ok1 && ok2 {
			printed[i] = [2]string{p, m}
		} else {
			if unread == nil {
				unread = map[string]int{}
			}
			unread[b.ins[i].id] = i
		}
	}
	now, err := s.clockMS(ctx, q)
	if err != nil {
		return err
	}
	// The tasks are known before the server has them (the time is read,
	// most JSON printed): they are built while the COPY runs, and kept
	// only if it succeeds.
	built := make(chan struct{})
	go func() {
		defer close(built)
		for _, i := range at {
			out[i] = b.ins[i].task(now, json.RawMessage(printed[i][0]), json.RawMessage(printed[i][1]))
		}
	}()
	n, err := cp.CopyFrom(ctx, "cairnq_tasks", copyColumns, taskRows(b, at, now))
	<-built
	if err != nil {
		return copyFailed(ctx, "a batch", err)
	}
	b.copiedAt = now
	if n != int64(len(at)) {
		return fmt.Errorf("cairnq: COPY wrote %d of %d tasks", n, len(at))
	}
	if len(unread) == 0 {
		return nil
	}
	return s.readBackJSON(ctx, q, unread, out)
}

// printJSONB is jsonbText for a document short enough to print.
func printJSONB(doc string) (string, bool) {
	if len(doc) > copyPrintBytes {
		return "", false
	}
	return jsonbText(doc)
}

// clockMS reads the database's clock (clock_ms).
func (s *Store) clockMS(ctx context.Context, q querier) (int64, error) {
	rows, err := s.exec(ctx, q, stmtClockMS, protocol.Args{})
	if err != nil {
		return 0, err
	}
	if len(rows) != 1 {
		return 0, fmt.Errorf("cairnq: clock_ms returned %d rows", len(rows))
	}
	now, ok, err := asInt64("now_ms", rows[0]["now_ms"])
	if err == nil && !ok {
		err = errors.New("now_ms is NULL")
	}
	if err != nil {
		return 0, fmt.Errorf("cairnq: reading the clock: %w", err)
	}
	return now, nil
}

// readBackJSON sets the JSON of the tasks unread names (by id, each its
// item's index in out) to what the server keeps (task_json).
func (s *Store) readBackJSON(ctx context.Context, q querier, unread map[string]int, out []*cairnqtype.Task) error {
	ids := make([]string, 0, len(unread))
	for id := range unread {
		ids = append(ids, id)
	}
	rows, err := s.exec(ctx, q, stmtTaskJSON, protocol.Args{"ids": pgArray(ids)})
	if err != nil {
		return err
	}
	for _, r := range rows {
		id, _, err := asString("id", r["id"])
		if err != nil {
			return err
		}
		i, ok := unread[id]
		if !ok {
			continue
		}
		var e1, e2 error
		out[i].Payload, e1 = asJSON("payload", r["payload"])
		out[i].Metadata, e2 = asJSON("metadata", r["metadata"])
		if err := errors.Join(e1, e2); err != nil {
			return fmt.Errorf("cairnq: reading back task %q: %w", id, err)
		}
	}
	if len(rows) != len(ids) {
		return fmt.Errorf("cairnq: task_json read %d of %d tasks the COPY wrote", len(rows), len(ids))
	}
	return nil
}

// copyKeys writes keys, none of which exists, each pointing at the task
// of the same index in to, by COPY: an upsert of a wide fan's 20,000
// keys took 330 ms in the server, where COPY writes them in a fraction
// of that (docs/benchmarks.md, "Workflows at scale"). They are created
// at nowMS, the moment their tasks' COPY read, or at a moment read now
// when nowMS is 0. It reports false, having written nothing, where COPY
// is not to be had (SQLite, a session without executor.Copier) or would
// not pay (fewer than copyMinRows); the caller then upserts them.
func (s *Store) copyKeys(ctx context.Context, q querier, keys, to []string, nowMS int64) (bool, error) {
	pq, ok := q.(pgQuerier)
	if !ok || len(keys) < copyMinRows {
		return false, nil
	}
	cp, ok := pq.s.(executor.Copier)
	if !ok {
		return false, nil
	}
	if nowMS == 0 {
		var err error
		if nowMS, err = s.clockMS(ctx, q); err != nil {
			return false, err
		}
	}
	row := make([]any, len(keyColumns))
	row[2], row[3] = nowMS, nowMS // created and updated, the same for every key
	n, err := cp.CopyFrom(ctx, "cairnq_task_keys", keyColumns, &copyRows{n: len(keys), row: row, fill: func(i int, row []any) {
		row[0], row[1] = keys[i], to[i]
	}})
	switch {
	case err == nil:
	case ctx.Err() == nil && isSQLState(err, "23505"):
		// A key the look found free was taken after all: by a writer
		// that does not take the workflow's lock, or seen too early by a
		// look whose snapshot predates the lock (a transaction at
		// REPEATABLE READ). Run again, the write looks again and upserts
		// what it then finds, as it did before COPY.
		return false, &keyTakenError{err}
	default:
		return false, copyFailed(ctx, "a step write's keys", err)
	}
	if n != int64(len(keys)) {
		return false, fmt.Errorf("cairnq: COPY wrote %d of %d keys", n, len(keys))
	}
	return true, nil
}

// keyColumns are the columns copyKeys writes.
var keyColumns = []string{"key", "task_id", "created_at_ms", "updated_at_ms"}

// keyTakenError is a step write's COPY of keys meeting a key its look
// found free (copyKeys): the transaction is lost, and another run of it
// looks again.
type keyTakenError struct{ err error }

func (e *keyTakenError) Error() string {
	return "cairnq: a workflow step's key was taken while its write ran (it is written again): " + e.err.Error()
}

func (e *keyTakenError) Unwrap() error { return e.err }

// Conflicted reports whether err is a write that lost a race another run
// of the same write settles (keyTakenError): worth retrying, whatever
// the SQLSTATE it carries says.
func Conflicted(err error) bool {
	var k *keyTakenError
	return errors.As(err, &k)
}
