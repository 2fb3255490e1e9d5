package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
)

// A durable handler's steps are recorded in order in the task's own
// metadata, beside the user's members; survive a retry of the write that
// committed; and are refused to another worker, at a taken position or
// past the end, and once the task has been given up.
func TestRecordStepKeepsTheStepsInTheTasksMetadata(t *testing.T) {
	bothStores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		if _, err := s.Submit(ctx, SubmitParams{Name: "saga", SubmitOptions: cairnqtype.SubmitOptions{
			Metadata: map[string]string{"tenant": "acme"}}}); err != nil {
			t.Fatal(err)
		}
		task := claimOne(t, s, "w1", time.Minute)
		charge := DurableStep{Name: "charge", Output: json.RawMessage(`{"receipt":"r1"}`), AtMs: 5, TookMs: 2, Attempt: 1}
		if err := s.RecordStep(ctx, task.ID, "w1", 0, charge); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordStep(ctx, task.ID, "w1", 0, charge); err != nil {
			t.Errorf("the same step again (a retried write that had committed): %v, want nil", err)
		}
		if err := s.RecordStep(ctx, task.ID, "w1", 0, DurableStep{Name: "refund"}); err == nil || !strings.Contains(err.Error(), `is "charge", not "refund"`) {
			t.Errorf("another step at a taken position: %v", err)
		}
		if err := s.RecordStep(ctx, task.ID, "w1", 3, DurableStep{Name: "ship"}); !errors.Is(err, cairnqtype.ErrInvalidArgument) {
			t.Errorf("a position past the end: %v, want ErrInvalidArgument", err)
		}
		if err := s.RecordStep(ctx, task.ID, "w2", 1, DurableStep{Name: "ship"}); !errors.Is(err, cairnqtype.ErrLostLease) {
			t.Errorf("another worker's step: %v, want ErrLostLease", err)
		}
		if err := s.RecordStep(ctx, task.ID, "w1", 1, DurableStep{Name: "ship"}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		steps, err := DurableSteps(got)
		if err != nil || len(steps) != 2 || steps[0].Name != "charge" || compact(steps[0].Output) != `{"receipt":"r1"}` ||
			steps[0].TookMs != 2 || steps[1].Name != "ship" || string(steps[1].Output) != "null" {
			t.Fatalf("steps %+v, %v", steps, err)
		}
		var md map[string]json.RawMessage
		if err := json.Unmarshal(got.Metadata, &md); err != nil || string(md["tenant"]) != `"acme"` {
			t.Errorf("the user's metadata after two steps: %s", got.Metadata)
		}
		if _, err := s.Settle(ctx, Settlement{Task: task, WorkerID: "w1", Outcome: Failed, Retryable: true,
			Error: cairnqtype.ErrorEnvelope{Message: "later"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordStep(ctx, task.ID, "w1", 2, DurableStep{Name: "late"}); !errors.Is(err, cairnqtype.ErrLostLease) {
			t.Errorf("a step after the attempt failed: %v, want ErrLostLease", err)
		}
		retried := claimOne(t, s, "w3", time.Minute)
		if steps, err := DurableSteps(retried); err != nil || len(steps) != 2 {
			t.Errorf("the next attempt claims %d steps, %v; want the 2 recorded", len(steps), err)
		}
	})
}

// Bad input is refused before anything is written; a member in a format
// this SDK does not read is an error, not an empty record.
func TestRecordStepRefusesBadInput(t *testing.T) {
	bothStores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		if _, err := s.Submit(ctx, SubmitParams{Name: "saga"}); err != nil {
			t.Fatal(err)
		}
		task := claimOne(t, s, "w1", time.Minute)
		for _, bad := range []struct {
			position int
			step     DurableStep
		}{
			{0, DurableStep{}},
			{0, DurableStep{Name: strings.Repeat("n", cairnqtype.MaxNameBytes+1)}},
			{-1, DurableStep{Name: "x"}},
			{0, DurableStep{Name: "x", Output: json.RawMessage(`{not json`)}},
		} {
			if err := s.RecordStep(ctx, task.ID, "w1", bad.position, bad.step); !errors.Is(err, cairnqtype.ErrInvalidArgument) {
				t.Errorf("RecordStep(%d, %.20q): %v, want ErrInvalidArgument", bad.position, bad.step.Name, err)
			}
		}
		if got, err := s.Get(ctx, task.ID); err != nil || strings.Contains(string(got.Metadata), durableMember) {
			t.Errorf("metadata after refused steps: %s, %v", got.Metadata, err)
		}
	})
	future := &cairnqtype.Task{ID: "t", Metadata: json.RawMessage(`{"cairnq_durable":{"v":2,"steps":[]}}`)}
	if _, err := DurableSteps(future); err == nil || !strings.Contains(err.Error(), "format 2") {
		t.Errorf("a member of format 2: %v", err)
	}
}

// compact is v without insignificant space (Postgres's jsonb adds some).
func compact(v json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return string(v)
	}
	return b.String()
}
