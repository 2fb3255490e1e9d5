package engine

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
)

// This file is the one place rows become values. Drivers disagree about
// wire forms (int8 as int64, string or json.Number; jsonb as bytes, string
// or decoded maps), and normalizing here rather than asking each adapter to
// reconfigure its driver is what keeps an application's own type mapping
// untouched.

// rowSet is a statement's rows as the store reads them: each column's
// value by name, in the forms the executor package defines. Maps from the
// executor seam are one; a SQLite statement's rows are read by position
// (table), which spares every row a map of its own on the paths that run
// once per task.
type rowSet interface {
	len() int
	value(i int, col string) any
}

// mapRows is the rows of the executor seam.
type mapRows []executor.Row

func (m mapRows) len() int                    { return len(m) }
func (m mapRows) value(i int, col string) any { return m[i][col] }

// mapRow is one row of the executor seam as a rowSet: a map fits in an
// interface as it is, where a one-row mapRows would be allocated on
// every submit's read-back.
type mapRow executor.Row

func (m mapRow) len() int                    { return 1 }
func (m mapRow) value(_ int, col string) any { return m[col] }

// table is a statement's rows read by position: each row's values in the
// statement's column order, and the statement's (shared) position of
// each column name.
type table struct {
	index map[string]int
	rows  [][]any
}

func (t *table) len() int { return len(t.rows) }

func (t *table) value(i int, col string) any {
	j, ok := t.index[col]
	if !ok {
		return nil // as a map row answers for a column it lacks
	}
	return t.rows[i][j]
}

// tableOf reads an executor's rows by position as a table, refusing a
// row whose values do not match the columns.
func tableOf(r *executor.Rows) (*table, error) {
	for i, row := range r.Values {
		if len(row) != len(r.Columns) {
			return nil, fmt.Errorf("cairnq: the executor returned %d values in row %d for %d columns", len(row), i, len(r.Columns))
		}
	}
	return &table{index: columnIndex(r.Columns), rows: r.Values}, nil
}

// columnIndex maps each column name to its position: the last one for a
// name repeated, whose value a map row keeps.
func columnIndex(cols []string) map[string]int {
	index := make(map[string]int, len(cols))
	for i, c := range cols {
		index[c] = i
	}
	return index
}

// rowToTask turns a row of cairnq_tasks into a Task.
func rowToTask(r executor.Row) (*cairnqtype.Task, error) { return taskAt(mapRow(r), 0) }

// taskAt turns row i of rs, a row of cairnq_tasks, into a Task.
func taskAt(rs rowSet, i int) (*cairnqtype.Task, error) {
	var t cairnqtype.Task
	var err error
	get := func(col string) any { return rs.value(i, col) }
	str := func(col string) string {
		if err != nil {
			return ""
		}
		var s string
		s, _, err = asString(col, get(col))
		return s
	}
	i64 := func(col string) (int64, bool) {
		if err != nil {
			return 0, false
		}
		var n int64
		var ok bool
		n, ok, err = asInt64(col, get(col))
		return n, ok
	}
	raw := func(col string) json.RawMessage {
		if err != nil {
			return nil
		}
		var m json.RawMessage
		m, err = asJSON(col, get(col))
		return m
	}
	t.ID = str("id")
	t.Name = str("name")
	t.Queue = str("queue")
	t.Status = cairnqtype.Status(str("status"))
	t.Payload = raw("payload")
	t.Metadata = raw("metadata")
	t.Result = raw("result")
	if e := raw("error"); e != nil {
		env, perr := parseEnvelope(e)
		if perr != nil && err == nil {
			err = perr
		}
		t.Error = env
	}
	if err == nil {
		var f float64
		var ok bool
		f, ok, err = asFloat("progress", get("progress"))
		if ok {
			t.Progress = &f
		}
	}
	if err == nil {
		var s string
		var ok bool
		s, ok, err = asString("message", get("message"))
		if ok {
			t.Message = &s
		}
	}
	n, _ := i64("attempt")
	t.Attempt = int(n)
	n, _ = i64("max_attempts")
	t.MaxAttempts = int(n)
	n, _ = i64("priority")
	t.Priority = int(n)
	t.WorkerID = str("worker_id")
	t.LeaseUntil = msTime(i64("lease_until_ms"))
	t.RunAt = msTime(i64("run_at_ms"))
	t.CancelRequestedAt = msTime(i64("cancel_requested_at_ms"))
	t.ParentID = str("parent_id")
	t.RootID = str("root_id")
	t.CorrelationID = str("correlation_id")
	t.CreatedAt = msTime(i64("created_at_ms"))
	t.UpdatedAt = msTime(i64("updated_at_ms"))
	t.CompletedAt = msTime(i64("completed_at_ms"))
	if err != nil {
		return nil, fmt.Errorf("cairnq: reading task row %q: %w", t.ID, err)
	}
	return &t, nil
}

func rowsToTasks(rows []executor.Row) ([]*cairnqtype.Task, error) { return tasksOf(mapRows(rows)) }

// tasksOf turns every row of rs, rows of cairnq_tasks, into a Task.
func tasksOf(rs rowSet) ([]*cairnqtype.Task, error) {
	n := rs.len()
	out := make([]*cairnqtype.Task, 0, n)
	for i := range n {
		t, err := taskAt(rs, i)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func rowToRef(r executor.Row) (cairnqtype.TaskRef, error) { return refAt(mapRow(r), 0) }

// refAt reads row i of rs, an id and a status, as a TaskRef.
func refAt(rs rowSet, i int) (cairnqtype.TaskRef, error) {
	id, _, err := asString("id", rs.value(i, "id"))
	if err != nil {
		return cairnqtype.TaskRef{}, err
	}
	st, _, err := asString("status", rs.value(i, "status"))
	return cairnqtype.TaskRef{ID: id, Status: cairnqtype.Status(st)}, err
}

// parseEnvelope reads a stored error. Another SDK (or a hand-written row)
// may have stored something that is not an envelope; it is kept as the
// message rather than failing the whole read.
func parseEnvelope(b json.RawMessage) (*cairnqtype.ErrorEnvelope, error) {
	var env cairnqtype.ErrorEnvelope
	if err := json.Unmarshal(b, &env); err != nil {
		return &cairnqtype.ErrorEnvelope{Type: "Error", Code: "unparsed_error", Message: string(b)}, nil
	}
	if env.Details == nil {
		env.Details = map[string]any{}
	}
	return &env, nil
}

// The as* readers read one column through the executor package's
// normalizers, the one definition of the forms a driver's values may
// take, and name the column in their errors. ok is false for SQL NULL.

func asInt64(col string, v any) (int64, bool, error) {
	n, ok, err := executor.Int64(v)
	return n, ok, columnError(col, err)
}

func asFloat(col string, v any) (float64, bool, error) {
	f, ok, err := executor.Float64(v)
	return f, ok, columnError(col, err)
}

func asString(col string, v any) (string, bool, error) {
	s, ok, err := executor.Text(v)
	return s, ok, columnError(col, err)
}

// asJSON reads a JSON column (SQLite text, Postgres jsonb) as encoded JSON.
func asJSON(col string, v any) (json.RawMessage, error) {
	m, err := executor.JSONText(v)
	return m, columnError(col, err)
}

// asBool reads a boolean the dialect's way (SQLite 0/1, Postgres bool).
func asBool(col string, v any) (bool, error) {
	b, err := executor.Bool(v)
	return b, columnError(col, err)
}

func columnError(col string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("column %s: %w", col, err)
}

// msTime turns an epoch-ms column into a time; a null column is the zero time.
func msTime(ms int64, ok bool) time.Time {
	if !ok {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func addCount(c *cairnqtype.StatusCounts, s cairnqtype.Status, n int) {
	switch s {
	case cairnqtype.StatusQueued:
		c.Queued += n
	case cairnqtype.StatusRunning:
		c.Running += n
	case cairnqtype.StatusSucceeded:
		c.Succeeded += n
	case cairnqtype.StatusFailed:
		c.Failed += n
	case cairnqtype.StatusCanceled:
		c.Canceled += n
	}
}
