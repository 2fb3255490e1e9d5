package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/protocol"
)

// A durable handler's steps (issue 48) are recorded in a member of the
// task's own metadata, in a format another SDK can read
// (docs/plans/durable-execution.md):
//
//	"cairnq_durable": {"v": 1, "steps": [{"name", "output", "at_ms", "took_ms", "attempt"}, ...]}
//
// They live in metadata because no statement of any SDK writes metadata
// after the insert: the steps survive a retry, a recovered lease, a
// cancel and the task's success alike, where a row per step would be
// deleted by another SDK's purge while its task still runs.

// durableMember is the member's name in a task's metadata.
const durableMember = "cairnq_durable"

// durableFormat is the member's format this SDK reads and writes.
const durableFormat = 1

// DurableStep is one finished step of a durable handler, as recorded:
// its name, its output as JSON, when it finished (epoch milliseconds),
// how long it ran and the attempt that ran it.
type DurableStep struct {
	Name    string          `json:"name"`
	Output  json.RawMessage `json:"output"`
	AtMs    int64           `json:"at_ms"`
	TookMs  int64           `json:"took_ms"`
	Attempt int             `json:"attempt"`
}

// DurableSteps returns the steps recorded on t, in the order they ran,
// and none when t has no member. A member in a format this SDK does not
// read is an error, not an empty record: running the steps again could
// repeat their side effects.
func DurableSteps(t *cairnqtype.Task) ([]DurableStep, error) {
	if !bytes.Contains(t.Metadata, []byte(`"`+durableMember+`"`)) {
		return nil, nil // most tasks: no decoding
	}
	var md struct {
		Member *struct {
			V     int           `json:"v"`
			Steps []DurableStep `json:"steps"`
		} `json:"cairnq_durable"`
	}
	if err := json.Unmarshal(t.Metadata, &md); err != nil {
		return nil, fmt.Errorf("cairnq: task %s: reading its durable steps: %w", t.ID, err)
	}
	if md.Member == nil {
		return nil, nil
	}
	if md.Member.V != durableFormat {
		return nil, fmt.Errorf("cairnq: task %s records its durable steps in format %d; this SDK reads format %d",
			t.ID, md.Member.V, durableFormat)
	}
	return md.Member.Steps, nil
}

// RecordStep records step as the position-th (0-based) of task id's
// durable steps, while workerID holds the task. A try whose first write
// committed but whose answer was lost finds the step recorded and
// returns nil. A lease gone is a *LostLeaseError; a position already
// holding another step, or past the steps recorded, is an error naming
// it, and nothing is written.
func (s *Store) RecordStep(ctx context.Context, id, workerID string, position int, step DurableStep) error {
	if err := checkText("durable step", "name", step.Name, cairnqtype.MaxNameBytes); err != nil {
		return err
	}
	if step.Name == "" {
		return argError("durable step", "name", "is empty")
	}
	if position < 0 {
		return argError("durable step", "position", "must be >= 0, got %d", position)
	}
	if step.Output == nil {
		step.Output = json.RawMessage("null")
	}
	entry, err := encodeJSON("result", step, "null")
	if err != nil {
		return err
	}
	rows, err := s.writeOne(ctx, stmtDurableStep, protocol.Args{
		"id": id, "worker_id": workerID, "position": position, "entry": entry,
	})
	if err != nil || len(rows) > 0 {
		return err
	}
	return s.unrecorded(ctx, id, workerID, position, step.Name)
}

// unrecorded tells why a step's write wrote nothing: the step was
// already recorded (nil), its position is taken or past the end, or the
// lease is gone.
func (s *Store) unrecorded(ctx context.Context, id, workerID string, position int, name string) error {
	t, err := s.Get(ctx, id)
	if err != nil || t.Status != cairnqtype.StatusRunning || t.WorkerID != workerID {
		return &cairnqtype.LostLeaseError{ID: id}
	}
	steps, err := DurableSteps(t)
	switch {
	case err != nil:
		return err
	case position < len(steps) && steps[position].Name == name:
		return nil
	case position < len(steps):
		return fmt.Errorf("cairnq: task %s: durable step %d is %q, not %q", id, position, steps[position].Name, name)
	case position > len(steps):
		return argError("durable step", "position", "is %d, but task %s records %d steps", position, id, len(steps))
	}
	return &cairnqtype.LostLeaseError{ID: id} // the lease ran out between the write and this read
}
