package cairnqtype

import "time"

// SubmitOptions are the optional parts of a submit. The zero value (or nil)
// submits to DefaultQueue with priority 0, three attempts and no key.
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

// ListOptions filters List. Empty fields do not filter.
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

// PurgeOptions bounds a purge. Empty filters do not filter.
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

// ClaimParams describes a claim.
type ClaimParams struct {
	Queues   []string // at least one
	Names    []string // task names the caller can run; nil: any name; empty non-nil: none
	WorkerID string   // required
	Lease    time.Duration
	Limit    int // tasks to take; default 1
}

// SubmitItem is one task of a SubmitMany batch: the arguments Submit
// takes, as a value. The zero Options are Submit's nil options.
type SubmitItem struct {
	// Name is the task's name. Required.
	Name string
	// Payload is any JSON-encodable value; nil is JSON {}.
	Payload any
	// Options are the task's own options: queue, key and conflict
	// strategy, attempts, priority, delay, metadata, links.
	Options SubmitOptions
}
