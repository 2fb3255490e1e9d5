package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
		if err := s.RecordStep(ctx, task.ID, "w1", task.Attempt, 0, charge, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordStep(ctx, task.ID, "w1", task.Attempt, 0, charge, nil); err != nil {
			t.Errorf("the same step again (a retried write that had committed): %v, want nil", err)
		}
		if err := s.RecordStep(ctx, task.ID, "w1", task.Attempt, 0, DurableStep{Name: "refund"}, nil); err == nil || !strings.Contains(err.Error(), `is "charge", recorded by attempt 1, not "refund"`) {
			t.Errorf("another step at a taken position: %v", err)
		}
		if err := s.RecordStep(ctx, task.ID, "w1", task.Attempt, 3, DurableStep{Name: "ship"}, nil); !errors.Is(err, cairnqtype.ErrInvalidArgument) {
			t.Errorf("a position past the end: %v, want ErrInvalidArgument", err)
		}
		if err := s.RecordStep(ctx, task.ID, "w2", task.Attempt, 1, DurableStep{Name: "ship"}, nil); !errors.Is(err, cairnqtype.ErrLostLease) {
			t.Errorf("another worker's step: %v, want ErrLostLease", err)
		}
		if err := s.RecordStep(ctx, task.ID, "w1", task.Attempt+1, 1, DurableStep{Name: "ship"}, nil); !errors.Is(err, cairnqtype.ErrLostLease) {
			t.Errorf("another attempt's step under the same worker id: %v, want ErrLostLease", err)
		}
		if err := s.RecordStep(ctx, task.ID, "w1", task.Attempt, 1, DurableStep{Name: "ship"}, nil); err != nil {
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
		if err := s.RecordStep(ctx, task.ID, "w1", task.Attempt, 2, DurableStep{Name: "late"}, nil); !errors.Is(err, cairnqtype.ErrLostLease) {
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
			if err := s.RecordStep(ctx, task.ID, "w1", task.Attempt, bad.position, bad.step, nil); !errors.Is(err, cairnqtype.ErrInvalidArgument) {
				t.Errorf("RecordStep(%d, %.20q): %v, want ErrInvalidArgument", bad.position, bad.step.Name, err)
			}
		}
		if got, err := s.Get(ctx, task.ID); err != nil || strings.Contains(string(got.Metadata), durableMember) {
			t.Errorf("metadata after refused steps: %s, %v", got.Metadata, err)
		}
	})
	for _, md := range []string{`{"cairnq_durable":{"v":2,"steps":[]}}`, `{"cairnq_durable":null}`, `{"cairnq_durable":"x"}`,
		`{"cairnq_durable":{"v":1,"steps":null}}`, `["cairnq_durable"]`} {
		var fe *DurableFormatError
		if _, err := DurableSteps(&cairnqtype.Task{ID: "t", Metadata: json.RawMessage(md)}); !errors.As(err, &fe) {
			t.Errorf("DurableSteps of %s: %v, want a *DurableFormatError", md, err)
		}
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

// Metadata a step cannot be appended to is refused with a
// *DurableFormatError, nothing written, on both stores alike.
func TestRecordStepRefusesMetadataItCannotKeep(t *testing.T) {
	bothStores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		for i, md := range []string{`{"cairnq_durable":null}`, `{"cairnq_durable":{"v":1,"steps":null}}`, `{"cairnq_durable":{"v":7}}`} {
			queue := fmt.Sprint("q", i)
			if _, err := s.Submit(ctx, SubmitParams{Name: "saga", SubmitOptions: cairnqtype.SubmitOptions{
				Queue: queue, Metadata: json.RawMessage(md)}}); err != nil {
				t.Fatal(err)
			}
			got, err := s.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{queue}, WorkerID: "w1", Lease: time.Minute})
			if err != nil || len(got) != 1 {
				t.Fatal(got, err)
			}
			var fe *DurableFormatError
			if err := s.RecordStep(ctx, got[0].ID, "w1", got[0].Attempt, 0, DurableStep{Name: "a"}, nil); !errors.As(err, &fe) {
				t.Errorf("metadata %s: %v, want a *DurableFormatError", md, err)
			}
		}
	})
}
