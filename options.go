package cairnq

import (
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
)

// DefaultQueue is the queue of a task submitted without one.
const DefaultQueue = cairnqtype.DefaultQueue

// SubmitOptions are the optional parts of a submit: queue, key and its
// conflict strategy, attempts, priority, delay, metadata and the ids that
// link tasks into chains. The zero value (or nil) submits to DefaultQueue
// with priority 0, three attempts and no key.
type SubmitOptions struct {
	Queue string
	// Key names the task for deduplication: a second submit with the same
	// key follows Conflict instead of blindly inserting.
	Key string
	// Conflict is what a keyed submit does when the key is taken. Default
	// ConflictReuse.
	Conflict Conflict
	// MaxAttempts bounds how many times the task is tried. Default 3.
	MaxAttempts int
	// Priority: higher is claimed first.
	Priority int
	// Delay defers the task's first claim.
	Delay time.Duration
	// Metadata is any JSON object stored beside the payload.
	Metadata any
	// ParentID, RootID and CorrelationID link tasks into chains. RootID
	// defaults to the task's own id.
	ParentID      string
	RootID        string
	CorrelationID string
}

// ListOptions filters List by status, queue, name, root or correlation
// id, with a limit and an offset. Empty fields do not filter.
type ListOptions struct {
	Status        Status
	Queue         string
	Name          string
	RootID        string
	CorrelationID string
	// Search, when set, keeps the tasks whose payload or error, as JSON
	// text, holds it: ASCII letters in either case (on Postgres others
	// too, where the collation folds them). Search for values rather than
	// JSON syntax, which each database prints its own way (Postgres puts
	// a space after ':' and ','). No index serves it: the list reads
	// every task the other filters leave.
	Search string
	// Limit caps the result; default 100.
	Limit  int
	Offset int
}

// PurgeOptions chooses what Purge deletes: finished tasks older than
// OlderThan, optionally of one queue, status or name, at most Limit rows
// per call. Empty filters do not filter.
type PurgeOptions struct {
	// OlderThan keeps tasks that finished less than this long ago.
	OlderThan time.Duration
	Queue     string
	// Status limits the purge to one terminal status.
	Status Status
	Name   string
	// Limit caps the rows one call deletes; default 1000.
	Limit int
}

// Conflict is a keyed submit's conflict strategy: what it does when its
// key already names a task.
type Conflict string

// The conflict strategies: reuse a live task (ConflictReuse), also a
// succeeded one (ConflictReuseSucceeded), refuse (ConflictReject), or
// cancel the live one and submit anew (ConflictReplace).
const (
	ConflictReuse          Conflict = "reuse"
	ConflictReuseSucceeded Conflict = "reuse-succeeded"
	ConflictReject         Conflict = "reject"
	ConflictReplace        Conflict = "replace"
)

// Valid reports whether c is one of the four strategies.
func (c Conflict) Valid() bool { return cairnqtype.Conflict(c).Valid() }

// Accepts reports whether the strategy hands back the task the key
// points at, which is in status st.
func (c Conflict) Accepts(st Status) bool {
	return cairnqtype.Conflict(c).Accepts(cairnqtype.Status(st))
}
