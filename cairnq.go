package cairnq

import (
	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// The limits every backend enforces alike. A value past one is refused
// before anything is written, with an error satisfying
// errors.Is(err, ErrInvalidArgument).
const (
	// MaxNameBytes bounds a task name, a queue name, a worker id and the
	// parent, root and correlation ids.
	MaxNameBytes = cairnqtype.MaxNameBytes
	// MaxKeyBytes bounds a task key.
	MaxKeyBytes = cairnqtype.MaxKeyBytes
	// MaxValueBytes bounds one JSON value as encoded: a payload, the
	// metadata, a handler's result, an error envelope.
	MaxValueBytes = cairnqtype.MaxValueBytes
	// MaxJSONDepth bounds how deeply arrays and objects nest in a JSON value.
	MaxJSONDepth = cairnqtype.MaxJSONDepth
	// MaxMessageBytes bounds a progress message.
	MaxMessageBytes = cairnqtype.MaxMessageBytes
)

// NewTaskID returns a fresh task id: "task_" and a 26-character ULID.
func NewTaskID() string { return engine.NewTaskID() }
