package storeaccess

import "time"

// The value types of the web console's queries (package console), which
// package store runs.

// ConsoleQuery filters and pages ConsoleTasks. Empty fields do not filter.
type ConsoleQuery struct {
	Status        string
	Queue         string
	Name          string
	Key           string // the task the key points at now
	CorrelationID string
	RootID        string
	// ParentID matches tasks naming it as parent. The protocol has no index
	// on parent_id, so this filter alone walks the id index.
	ParentID string
	IDPrefix string // ids starting with it, e.g. "task_01J8"
	// Before returns the page after a cursor (tasks with smaller ids);
	// After the page before it (larger ids). Both are task ids; at most one
	// may be set.
	Before, After string
	// Limit caps the page; default 50, at most 1000.
	Limit int
}

// ConsoleWorker is one worker holding leases now.
type ConsoleWorker struct {
	ID      string `json:"id"`
	Running int    `json:"running"`
	// LeaseUntil is the soonest expiry among its leases.
	LeaseUntil time.Time `json:"lease_until"`
}

// ConsoleMinute is how many tasks settled in one minute.
type ConsoleMinute struct {
	Minute    time.Time `json:"minute"`
	Succeeded int       `json:"succeeded"`
	Failed    int       `json:"failed"`
}
