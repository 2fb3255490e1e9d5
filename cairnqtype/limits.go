package cairnqtype

import (
	"errors"
	"math"
)

// The limits every backend enforces alike. A value past one is refused
// before anything is written, with an error that satisfies
// errors.Is(err, ErrInvalidArgument): an *ArgumentError for a name, key,
// number or message, a *SerializationError for a JSON value. They sit
// below what either database can hold, so SQLite and Postgres accept
// exactly the same inputs: Postgres refuses NUL in text and \u0000 in
// jsonb, and an index entry past about 2.7 KB; SQLite's JSON functions
// stop at 1,000 levels of nesting; the embedded SQLite has a bounded
// memory in which a value near 40 MB no longer fits.
const (
	// MaxNameBytes bounds a task name, a queue name, a worker id and the
	// parent, root and correlation ids.
	MaxNameBytes = 255
	// MaxKeyBytes bounds a task key.
	MaxKeyBytes = 1024
	// MaxValueBytes bounds one JSON value as encoded: a payload, the
	// metadata, a handler's result, an error envelope.
	MaxValueBytes = 16 << 20
	// MaxJSONDepth bounds how deeply arrays and objects nest in a JSON value.
	MaxJSONDepth = 512
	// MaxMessageBytes bounds a progress message.
	MaxMessageBytes = 64 << 10
	// MaxPriority and MinPriority bound a priority (a 32-bit column).
	MaxPriority = math.MaxInt32
	MinPriority = math.MinInt32
	// MaxAttemptsLimit bounds max attempts (a 32-bit column).
	MaxAttemptsLimit = math.MaxInt32
)

// ErrValueTooLarge is wrapped by the *SerializationError of a JSON value
// longer than MaxValueBytes.
var ErrValueTooLarge = errors.New("value too large")

// Conflict says what a keyed submit does when its key already points at a task.
type Conflict string

// The conflict strategies.
const (
	// ConflictReuse returns the task the key points at while it is queued or
	// running; a finished task frees the key for a new one.
	ConflictReuse Conflict = "reuse"
	// ConflictReuseSucceeded is ConflictReuse that also returns a succeeded
	// task (a cache of its result); failed and canceled ones free the key.
	ConflictReuseSucceeded Conflict = "reuse-succeeded"
	// ConflictReject fails with ErrAlreadyExists whatever the task's state.
	ConflictReject Conflict = "reject"
	// ConflictReplace cancels the task if it is still live and submits a new one.
	ConflictReplace Conflict = "replace"
)

// Valid reports whether c is a known strategy.
func (c Conflict) Valid() bool {
	switch c {
	case ConflictReuse, ConflictReuseSucceeded, ConflictReject, ConflictReplace:
		return true
	}
	return false
}

// Accepts reports whether the strategy hands back the task the key
// points at, which is in status st.
func (c Conflict) Accepts(st Status) bool {
	switch {
	case c == ConflictReplace || c == ConflictReject:
		return false
	case !st.IsTerminal():
		return true
	}
	return c == ConflictReuseSucceeded && st == StatusSucceeded
}

// DefaultQueue is the queue of a task submitted without one.
const DefaultQueue = "default"

// MaxSubmitMany bounds how many tasks one SubmitMany call takes; a
// longer batch is an *ArgumentError and nothing is written. It keeps one
// call's transaction (and, on SQLite, the single writer) short: split a
// larger load into calls of this size.
const MaxSubmitMany = 10000
