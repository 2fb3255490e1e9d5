package engine

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/protocol"
)

// A durable handler's steps (issue 48) are recorded in a member of the
// task's own metadata, in a format another SDK can read
// (docs/plans/durable-execution.md):
//
//	"cairnq_durable": {"v": 1,
//	  "steps": [{"name", "output", "at_ms", "took_ms", "attempt", "kind", "until_ms"}, ...],
//	  "events": {"<event>": {"payload", "at_ms", "timed_out"}, ...}}
//
// They live in metadata because no protocol statement writes metadata
// after the insert (only ours do, each its own member: durable_step,
// durable_event, fail_recorded's cairnq_errors): the steps survive a
// retry, a recovered lease, a cancel and the task's success alike, where
// a row per step would be deleted by another SDK's purge while its task
// still runs.

// durableMember is the member's name in a task's metadata.
const durableMember = "cairnq_durable"

// durableFormat is the member's format this SDK reads and writes.
const durableFormat = 1

// The kinds of a durable step besides a plain one ("").
const (
	// StepSleep is a durable sleep: UntilMs is when it ends.
	StepSleep = "sleep"
	// StepWait is a wait for the event its name names: UntilMs is when
	// it times out.
	StepWait = "wait"
)

// DurableStep is one step of a durable handler, as recorded: its name,
// its output as JSON, when it finished (epoch milliseconds; a sleep's or
// a wait's when it began), how long it ran and the attempt that ran it;
// a sleep or a wait has its Kind and the time it ends, UntilMs.
type DurableStep struct {
	Name    string          `json:"name"`
	Output  json.RawMessage `json:"output"`
	AtMs    int64           `json:"at_ms"`
	TookMs  int64           `json:"took_ms"`
	Attempt int             `json:"attempt"`
	Kind    string          `json:"kind,omitempty"`
	UntilMs int64           `json:"until_ms,omitempty"`
}

// DurableEvent is an event delivered to a task, as recorded: its payload
// as JSON and when it arrived (epoch milliseconds); or, TimedOut, the
// mark a wait for it that ran out left in its place.
type DurableEvent struct {
	Payload  json.RawMessage `json:"payload,omitempty"`
	AtMs     int64           `json:"at_ms"`
	TimedOut bool            `json:"timed_out,omitempty"`
}

// Durable is what a task's member records: its steps in the order they
// ran, and the events delivered to it by name.
type Durable struct {
	Steps  []DurableStep
	Events map[string]DurableEvent
}

// DurableFormatError reports metadata a durable step cannot be read
// from or appended to: metadata that is not a JSON object, or a
// cairnq_durable member that is not format 1's object with an array of
// steps and an object of events (another SDK's, a newer format, a
// hand-made one). Running the steps again could repeat their side
// effects, so it is not retryable.
type DurableFormatError struct {
	TaskID string
	Reason string
}

func (e *DurableFormatError) Error() string {
	return fmt.Sprintf("cairnq: task %s: its durable steps cannot be kept: %s", e.TaskID, e.Reason)
}

// DurableSteps returns the steps recorded on t, in the order they ran,
// and none when t has no member. Metadata whose member this SDK cannot
// read or append to is a *DurableFormatError, not an empty record.
func DurableSteps(t *cairnqtype.Task) ([]DurableStep, error) {
	d, err := ReadDurable(t)
	return d.Steps, err
}

// ReadDurable returns what t's member records, and nothing when t has
// none. Metadata whose member this SDK cannot read or append to is a
// *DurableFormatError, not an empty record.
func ReadDurable(t *cairnqtype.Task) (Durable, error) {
	if !bytes.Contains(t.Metadata, []byte(`"`+durableMember+`"`)) {
		return Durable{}, nil // most tasks: no decoding
	}
	bad := func(reason string, args ...any) (Durable, error) {
		return Durable{}, &DurableFormatError{TaskID: t.ID, Reason: fmt.Sprintf(reason, args...)}
	}
	var md map[string]json.RawMessage
	if err := json.Unmarshal(t.Metadata, &md); err != nil || md == nil {
		return bad("its metadata is not a JSON object")
	}
	raw, ok := md[durableMember]
	if !ok {
		return Durable{}, nil
	}
	var member map[string]json.RawMessage
	if err := json.Unmarshal(raw, &member); err != nil || member == nil {
		return bad("its cairnq_durable member is not a JSON object")
	}
	var v int
	if err := json.Unmarshal(member["v"], &v); err != nil {
		return bad("its cairnq_durable member has no format number; this SDK reads format %d", durableFormat) // its value may be anybody's data
	}
	if v != durableFormat {
		return bad("its cairnq_durable member is format %d; this SDK reads format %d", v, durableFormat)
	}
	var d Durable
	if raw, ok := member["steps"]; ok {
		if err := json.Unmarshal(raw, &d.Steps); err != nil || d.Steps == nil {
			return bad("its cairnq_durable steps are not an array of steps")
		}
	}
	if raw, ok := member["events"]; ok {
		if err := json.Unmarshal(raw, &d.Events); err != nil || d.Events == nil {
			return bad("its cairnq_durable events are not an object of events")
		}
	}
	return d, nil
}

// ValidateStepName checks a durable step's name (a sleep's, a wait's):
// not empty, valid UTF-8 without NUL, within MaxNameBytes.
func ValidateStepName(op, name string) error {
	return ValidateName(op, "name", name)
}

// RecordStep records step as the position-th (0-based) of task id's
// durable steps, while workerID's attempt (the task's attempt count when
// it was claimed, which the step records) holds the task: the attempt check keeps an attempt
// abandoned and re-claimed under the same worker id from writing. A try
// whose first write committed but whose answer was lost finds the step
// recorded by the same attempt and returns nil. A lease gone (or another
// attempt holding the task) is a *LostLeaseError; a position already
// holding another step, or past the steps recorded, an error naming it;
// metadata the step cannot be appended to a *DurableFormatError. Nothing
// is written then. A write that failed is checked against the row: one
// that committed is nil; otherwise the write's error returns.
//
// rows, when set, is the worker's lock on its statements that write many
// of its rows (its heartbeat's): on Postgres the step's record shares a
// statement with other tasks' and is written under it.
func (s *Store) RecordStep(ctx context.Context, id, workerID string, attempt, position int, step DurableStep, rows sync.Locker) error {
	if err := ValidateStepName("durable step", step.Name); err != nil {
		return err
	}
	if position < 0 {
		return argError("durable step", "position", "must be >= 0, got %d", position)
	}
	if step.Output == nil {
		step.Output = json.RawMessage("null")
	}
	step.Attempt = attempt
	entry, err := encodeJSON("result", step, "null")
	if err != nil {
		return err
	}
	var written bool
	if be, ok := s.be.(*pgBackend); ok {
		written, err = be.stepGrouped(ctx, &stepWrite{id: id, workerID: workerID, attempt: attempt, position: position, entry: entry, rows: rows})
	} else {
		var rows []executor.Row
		rows, err = s.writeOne(ctx, stmtDurableStep, protocol.Args{
			"id": id, "worker_id": workerID, "attempt": attempt, "position": position, "entry": entry,
		})
		written = len(rows) > 0
	}
	if written {
		return nil
	}
	if err != nil {
		// The write failed without saying whether it committed (its
		// answer lost): the row tells, if it can be read.
		if s.unrecorded(ctx, id, workerID, attempt, position, step.Name) == nil {
			return nil
		}
		return err
	}
	return s.unrecorded(ctx, id, workerID, attempt, position, step.Name)
}

// unrecorded tells why a step's write wrote nothing: the step was
// already recorded by this attempt (nil), the task is another attempt's
// or gone, the metadata cannot take the step, or the position is taken
// or past the end. A failed read is returned as it is.
func (s *Store) unrecorded(ctx context.Context, id, workerID string, attempt, position int, name string) error {
	t, err := s.Get(ctx, id)
	if errors.Is(err, cairnqtype.ErrNotFound) {
		return &cairnqtype.LostLeaseError{ID: id}
	}
	if err != nil {
		return err
	}
	if t.Status != cairnqtype.StatusRunning || t.WorkerID != workerID || t.Attempt != attempt {
		return &cairnqtype.LostLeaseError{ID: id}
	}
	if !bytes.HasPrefix(bytes.TrimLeft(t.Metadata, " \t\r\n"), []byte("{")) {
		return &DurableFormatError{TaskID: id, Reason: "its metadata is not a JSON object"}
	}
	steps, err := DurableSteps(t)
	switch {
	case err != nil:
		return err
	case position < len(steps) && steps[position].Name == name && steps[position].Attempt == attempt:
		return nil
	case position < len(steps):
		return fmt.Errorf("cairnq: task %s: durable step %d is %q, recorded by attempt %d, not %q",
			id, position, steps[position].Name, steps[position].Attempt, name)
	case position > len(steps):
		return argError("durable step", "position", "is %d, but task %s records %d steps", position, id, len(steps))
	}
	return &cairnqtype.LostLeaseError{ID: id} // the lease ran out between the write and this read
}

// UserMetadata is md without the members this SDK keeps in a task's
// metadata (a workflow step's mark, a durable handler's steps), for a
// new task made from an old one: copied, the old one's durable steps
// would be replayed instead of run, and a step's mark would sit on a
// task that is no step.
// Metadata that is not a JSON object is returned as it is.
func UserMetadata(md json.RawMessage) json.RawMessage {
	if !bytes.Contains(md, []byte(`"`+durableMember+`"`)) && !bytes.Contains(md, []byte(`"`+workflowMember+`"`)) &&
		!bytes.Contains(md, []byte(`"`+AttemptErrorsMember+`"`)) {
		return md
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(md, &m) != nil || m == nil {
		return md
	}
	delete(m, durableMember)
	delete(m, workflowMember)
	delete(m, AttemptErrorsMember)
	out, err := json.Marshal(m)
	if err != nil {
		return md
	}
	return out
}

// EventNames are the names of d's events in the order they arrived
// (by name where they arrived in the same millisecond).
func (d Durable) EventNames() []string {
	names := slices.Collect(maps.Keys(d.Events))
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(d.Events[a].AtMs, d.Events[b].AtMs), strings.Compare(a, b))
	})
	return names
}

// Parked is the position of the sleep or wait a task is parked in: its
// last step, when the task is queued and that step is a sleep, or a wait
// whose event has not arrived.
func (d Durable) Parked(queued bool) (int, bool) {
	last := len(d.Steps) - 1
	if !queued || last < 0 {
		return 0, false
	}
	switch s := d.Steps[last]; s.Kind {
	case StepSleep:
		return last, true
	case StepWait:
		_, arrived := d.Events[s.Name]
		return last, !arrived
	}
	return 0, false
}
