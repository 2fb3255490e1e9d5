package cairnq

import (
	"encoding/json"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
)

// Status is where a task is in its life: one of the five statuses below,
// the set the protocol's schema allows.
type Status string

// The task statuses.
const (
	StatusQueued    Status = "queued"
	StatusRunning   Status = "running"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusCanceled  Status = "canceled"
)

// Valid reports whether s is one of the five statuses.
func (s Status) Valid() bool { return cairnqtype.Status(s).Valid() }

// IsTerminal reports whether s is final: succeeded, failed or canceled.
// Only a retry moves a task out of failed or canceled again.
func (s Status) IsTerminal() bool { return cairnqtype.Status(s).IsTerminal() }

// Task is one task as stored: its id, name, queue, status, payload and
// metadata, its result or last error, progress, attempts, lease and
// links.
//
// JSON columns keep their encoded form (json.RawMessage), so a value
// another SDK wrote reads back byte for byte and the caller picks the Go
// type: decode them with DecodePayload and DecodeResult. Absent values
// are zero: an empty string for a null id, a zero time.Time for a null
// timestamp, nil for progress, message, result and error. MarshalJSON
// writes the protocol's wire shape (snake_case names, epoch
// milliseconds, nulls).
type Task struct {
	ID          string
	Name        string
	Queue       string
	Status      Status
	Payload     json.RawMessage
	Metadata    json.RawMessage
	Result      json.RawMessage // nil until the task succeeds with a result
	Error       *ErrorEnvelope  // the last attempt's failure, if any
	Progress    *float64        // set by the handler; 1.0 once succeeded
	Message     *string         // set by the handler
	Attempt     int             // attempts started so far (claims)
	MaxAttempts int
	Priority    int
	WorkerID    string // who holds, or last held, the lease
	// LeaseUntil is set exactly while the task is running.
	LeaseUntil time.Time
	// RunAt is when the task becomes (or became) claimable.
	RunAt             time.Time
	CancelRequestedAt time.Time
	ParentID          string
	RootID            string
	CorrelationID     string
	CreatedAt         time.Time
	UpdatedAt         time.Time
	CompletedAt       time.Time
}

// IsTerminal reports whether the task has reached a final status.
func (t *Task) IsTerminal() bool { return t.Status.IsTerminal() }

// IsQueued reports whether the task waits to be claimed.
func (t *Task) IsQueued() bool { return t.Status == StatusQueued }

// IsRunning reports whether a worker holds the task's lease.
func (t *Task) IsRunning() bool { return t.Status == StatusRunning }

// IsSucceeded reports whether the task succeeded.
func (t *Task) IsSucceeded() bool { return t.Status == StatusSucceeded }

// IsFailed reports whether the task failed for good.
func (t *Task) IsFailed() bool { return t.Status == StatusFailed }

// IsCanceled reports whether the task was canceled.
func (t *Task) IsCanceled() bool { return t.Status == StatusCanceled }

// CancelRequested reports whether a cancel was asked for while the task ran.
func (t *Task) CancelRequested() bool { return !t.CancelRequestedAt.IsZero() }

// DecodePayload unmarshals the payload into v.
func (t *Task) DecodePayload(v any) error { return json.Unmarshal(t.Payload, v) }

// DecodeResult unmarshals the result into v. A task without a result
// leaves v unchanged.
func (t *Task) DecodeResult(v any) error { return t.row().DecodeResult(v) }

// MarshalJSON writes the task in the protocol's wire shape, the JSON the
// other SDKs and cairnq's CLI print.
func (t *Task) MarshalJSON() ([]byte, error) { return t.row().MarshalJSON() }

// TaskRef is a task's id and status: what a wait polls, without reading
// the payload.
type TaskRef struct {
	ID     string `json:"id"`
	Status Status `json:"status"`
}

// ErrorEnvelope is the protocol's error record: the same JSON in every
// SDK, stored as a failed attempt's error.
type ErrorEnvelope struct {
	Type      string         `json:"type"`
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	Retryable bool           `json:"retryable"`
	Details   map[string]any `json:"details"`
}

// StatusCounts is the number of tasks in each status on one queue.
type StatusCounts struct {
	Queued    int `json:"queued"`
	Running   int `json:"running"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Canceled  int `json:"canceled"`
}
