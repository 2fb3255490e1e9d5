package cairnqtype

import (
	"encoding/json"
	"time"
)

// Status is where a task is in its life. The set is the status CHECK
// constraint of the protocol's schema.
type Status string

// The five task statuses.
const (
	StatusQueued    Status = "queued"
	StatusRunning   Status = "running"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusCanceled  Status = "canceled"
)

// Statuses returns every status, in the order the schema declares them.
func Statuses() []Status {
	return []Status{StatusQueued, StatusRunning, StatusSucceeded, StatusFailed, StatusCanceled}
}

// Valid reports whether s is one of the five statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusQueued, StatusRunning, StatusSucceeded, StatusFailed, StatusCanceled:
		return true
	}
	return false
}

// IsTerminal reports whether s is final: succeeded, failed or canceled.
// Only retry moves a task out of failed or canceled again.
func (s Status) IsTerminal() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCanceled
}

// Task is one execution of a named unit of work, as stored.
//
// JSON columns keep their encoded form (json.RawMessage) so a value written
// by another SDK reads back byte-for-byte and the caller decides the Go type.
// Absent values are zero: an empty string for ids that are null, a zero
// time.Time for timestamps that are null, nil for progress, message, result
// and error. MarshalJSON writes the protocol's wire shape (snake_case names,
// epoch milliseconds, nulls).
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
// decodes as JSON null, leaving v unchanged.
func (t *Task) DecodeResult(v any) error {
	if t.Result == nil {
		return nil
	}
	return json.Unmarshal(t.Result, v)
}

// TaskRef is the id and status of a task: what the wait loop polls, without
// reading the payload.
type TaskRef struct {
	ID     string `json:"id"`
	Status Status `json:"status"`
}

// ErrorEnvelope is the protocol's error record, the same JSON in every SDK.
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

// wireTask is Task in the protocol's JSON shape.
type wireTask struct {
	ID                  string          `json:"id"`
	Name                string          `json:"name"`
	Queue               string          `json:"queue"`
	Status              Status          `json:"status"`
	Payload             json.RawMessage `json:"payload"`
	Metadata            json.RawMessage `json:"metadata"`
	Result              json.RawMessage `json:"result"`
	Error               *ErrorEnvelope  `json:"error"`
	Progress            *float64        `json:"progress"`
	Message             *string         `json:"message"`
	Attempt             int             `json:"attempt"`
	MaxAttempts         int             `json:"max_attempts"`
	Priority            int             `json:"priority"`
	WorkerID            *string         `json:"worker_id"`
	LeaseUntilMs        *int64          `json:"lease_until_ms"`
	RunAtMs             int64           `json:"run_at_ms"`
	CancelRequestedAtMs *int64          `json:"cancel_requested_at_ms"`
	ParentID            *string         `json:"parent_id"`
	RootID              *string         `json:"root_id"`
	CorrelationID       *string         `json:"correlation_id"`
	CreatedAtMs         int64           `json:"created_at_ms"`
	UpdatedAtMs         int64           `json:"updated_at_ms"`
	CompletedAtMs       *int64          `json:"completed_at_ms"`
}

// MarshalJSON writes the task in the protocol's wire shape.
func (t *Task) MarshalJSON() ([]byte, error) {
	payload := t.Payload
	if payload == nil {
		payload = json.RawMessage("null")
	}
	metadata := t.Metadata
	if metadata == nil {
		metadata = json.RawMessage("{}")
	}
	return json.Marshal(wireTask{
		ID: t.ID, Name: t.Name, Queue: t.Queue, Status: t.Status,
		Payload: payload, Metadata: metadata, Result: t.Result, Error: t.Error,
		Progress: t.Progress, Message: t.Message,
		Attempt: t.Attempt, MaxAttempts: t.MaxAttempts, Priority: t.Priority,
		WorkerID:            optString(t.WorkerID),
		LeaseUntilMs:        optMs(t.LeaseUntil),
		RunAtMs:             t.RunAt.UnixMilli(),
		CancelRequestedAtMs: optMs(t.CancelRequestedAt),
		ParentID:            optString(t.ParentID),
		RootID:              optString(t.RootID),
		CorrelationID:       optString(t.CorrelationID),
		CreatedAtMs:         t.CreatedAt.UnixMilli(),
		UpdatedAtMs:         t.UpdatedAt.UnixMilli(),
		CompletedAtMs:       optMs(t.CompletedAt),
	})
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optMs(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	ms := t.UnixMilli()
	return &ms
}
