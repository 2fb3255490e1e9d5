package cairnq

import (
	"time"

	"github.com/cairnq/cairnq-go/internal/engine"
)

// AttemptError is one failed attempt of a task, as the task's metadata
// keeps it (AttemptErrorsOf).
type AttemptError struct {
	// Attempt is the attempt's number, from 1; At is when its failure
	// was recorded, by the database's clock.
	Attempt int
	At      time.Time
	// Type, Code and Message are its error's, the message cut to 1,000
	// bytes.
	Type    string
	Code    string
	Message string
}

// AttemptErrorsOf returns the errors of t's failed attempts, oldest
// first: the newest ten that Go workers recorded. Task.Error holds only
// the last attempt's (in full, details included); each Go worker's
// failure also appends its error to the metadata member cairnq_errors,
// in the statement that records the failure. A failure another SDK's
// worker records, or an expired lease, adds no entry. The member's
// format is in docs/operators.md.
func AttemptErrorsOf(t *Task) []AttemptError {
	if t == nil {
		return nil
	}
	es := engine.AttemptErrors(t.Metadata)
	out := make([]AttemptError, len(es))
	for i, e := range es {
		out[i] = AttemptError(e)
	}
	return out
}
