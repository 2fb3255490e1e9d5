package engine

import (
	"encoding/json"
	"strconv"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/protocol"
)

// insertRow is a new task as insert_task writes it: what submitArgs
// validated and stampID stamped. It is a struct, not insert_task's
// argument map, because a batch of SubmitMany builds one per item and
// reads each field several times (its column of insert_many, its weight,
// the task it returns): as maps, those lookups were a third of the
// client's time in a batch of 5,000 (docs/benchmarks.md, "Bulk submit").
type insertRow struct {
	id, name, queue   string
	payload, metadata string // encoded JSON
	maxAttempts       int64
	priority          int64
	delayMS           int64
	// "" is NULL.
	parentID, rootID, correlationID string
}

// insertColumns are insert_task's parameters, in insert_many's order:
// each one's value as insert_task binds it, and as an element of
// insert_many's text[] of it (ok false: NULL).
var insertColumns = [...]struct {
	name  string
	value func(r *insertRow) any
	text  func(r *insertRow) (s string, ok bool)
}{
	{"id", func(r *insertRow) any { return r.id }, func(r *insertRow) (string, bool) { return r.id, true }},
	{"name", func(r *insertRow) any { return r.name }, func(r *insertRow) (string, bool) { return r.name, true }},
	{"queue", func(r *insertRow) any { return r.queue }, func(r *insertRow) (string, bool) { return r.queue, true }},
	{"payload", func(r *insertRow) any { return r.payload }, func(r *insertRow) (string, bool) { return r.payload, true }},
	{"metadata", func(r *insertRow) any { return r.metadata }, func(r *insertRow) (string, bool) { return r.metadata, true }},
	{"max_attempts", func(r *insertRow) any { return r.maxAttempts }, func(r *insertRow) (string, bool) { return strconv.FormatInt(r.maxAttempts, 10), true }},
	{"priority", func(r *insertRow) any { return r.priority }, func(r *insertRow) (string, bool) { return strconv.FormatInt(r.priority, 10), true }},
	{"delay_ms", func(r *insertRow) any { return r.delayMS }, func(r *insertRow) (string, bool) { return strconv.FormatInt(r.delayMS, 10), true }},
	{"parent_id", func(r *insertRow) any { return nullable(r.parentID) }, func(r *insertRow) (string, bool) { return r.parentID, r.parentID != "" }},
	{"root_id", func(r *insertRow) any { return nullable(r.rootID) }, func(r *insertRow) (string, bool) { return r.rootID, r.rootID != "" }},
	{"correlation_id", func(r *insertRow) any { return nullable(r.correlationID) }, func(r *insertRow) (string, bool) { return r.correlationID, r.correlationID != "" }},
}

// args are insert_task's arguments for r.
func (r *insertRow) args() protocol.Args {
	a := make(protocol.Args, len(insertColumns))
	for _, c := range insertColumns {
		a[c.name] = c.value(r)
	}
	return a
}

// copyColumns are the columns of cairnq_tasks a new task's COPY row
// fills (submit_copy.go), in copyRow's order: insert_task's, with the
// status and the clock's columns written out; the rest take their
// defaults, as insert_task leaves them.
var copyColumns = []string{
	"id", "name", "queue", "status", "payload", "metadata", "max_attempts", "priority",
	"run_at_ms", "parent_id", "root_id", "correlation_id", "created_at_ms", "updated_at_ms",
}

// copyRow fills row (len(copyColumns) long) with r's COPY row, created
// at nowMS (now is nowMS boxed, shared by the rows of a batch).
func (r *insertRow) copyRow(row []any, now any, nowMS int64) {
	due := now
	if r.delayMS != 0 {
		due = nowMS + r.delayMS
	}
	row[0], row[1], row[2], row[3] = r.id, r.name, r.queue, string(cairnqtype.StatusQueued)
	row[4], row[5], row[6], row[7] = r.payload, r.metadata, int32(r.maxAttempts), int32(r.priority)
	row[8], row[9], row[10], row[11] = due, nullable(r.parentID), nullable(r.rootID), nullable(r.correlationID)
	row[12], row[13] = now, now
}

// task is the task r stored, created at createdMS (its update time too,
// and due delayMS after it), its JSON as the server printed it: every
// other column is what r sent or the column's default (attempt 0, the
// rest NULL), as the whole row would read.
func (r *insertRow) task(createdMS int64, payload, metadata json.RawMessage) *cairnqtype.Task {
	return &cairnqtype.Task{ID: r.id, Name: r.name, Queue: r.queue, Status: cairnqtype.StatusQueued,
		Payload: payload, Metadata: metadata,
		ParentID: r.parentID, RootID: r.rootID, CorrelationID: r.correlationID,
		MaxAttempts: int(r.maxAttempts), Priority: int(r.priority),
		CreatedAt: msTime(createdMS, true), UpdatedAt: msTime(createdMS, true), RunAt: msTime(createdMS+r.delayMS, true)}
}

// weight is how many bytes of JSON r carries.
func (r *insertRow) weight() int { return len(r.payload) + len(r.metadata) }

// insertManyArgs are insert_many's arguments for the rows all, and their
// ids in order: insert_many takes each of insert_task's parameters X as
// each_X, the text[] of its values across all.
func insertManyArgs(all []*insertRow) (protocol.Args, []string) {
	args := make(protocol.Args, len(insertColumns))
	for _, c := range insertColumns {
		args["each_"+c.name] = writePGArray(len(all), func(i int) (string, bool) { return c.text(all[i]) })
	}
	ids := make([]string, len(all))
	for i, r := range all {
		ids[i] = r.id
	}
	return args, ids
}
