package maintenance

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/workflowspec"
)

func openStore(t *testing.T) *engine.Store {
	t.Helper()
	s, err := engine.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "tasks.db"), engine.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// finished submits n tasks named name and settles each as worker w1.
func finished(t *testing.T, s *engine.Store, name string, n int) {
	t.Helper()
	ctx := t.Context()
	for range n {
		if _, err := s.Submit(ctx, engine.SubmitParams{Name: name}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, Names: []string{name}, WorkerID: "w1"})
		if err != nil || len(got) != 1 {
			t.Fatalf("claim: %v, %v", got, err)
		}
		if _, err := s.Complete(ctx, got[0].ID, "w1", nil); err != nil {
			t.Fatal(err)
		}
	}
}

// A sweep purges what its rules match, every batch of it, and nothing
// else; the timer's sweeps run until Stop, which waits for them.
func TestRetentionSweepsItsRules(t *testing.T) {
	s := openStore(t)
	ctx := t.Context()
	finished(t, s, "old", 5)
	finished(t, s, "kept", 2)
	var mu sync.Mutex
	var failed []error
	r := NewRetention(s, []cairnqtype.PurgeOptions{{Name: "old", Status: cairnqtype.StatusSucceeded, Limit: 2}},
		time.Hour, func(err error) { mu.Lock(); failed = append(failed, err); mu.Unlock() })
	n, err := r.Sweep(ctx, true, false)
	if err != nil || n != 5 {
		t.Fatalf("sweep purged %d (%v), want the 5 matching tasks in batches of 2", n, err)
	}
	stats, err := s.Stats(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := stats["default"].Succeeded; got != 2 {
		t.Fatalf("%d succeeded tasks left, want the 2 no rule matched", got)
	}
	r.Start()
	r.Stop()
	mu.Lock()
	defer mu.Unlock()
	if len(failed) != 0 {
		t.Fatalf("sweeps failed: %v", failed)
	}
}

// A workflow whose step another SDK settled (a plain complete, which
// advances nothing) moves on at the sweep: the next step is submitted.
func TestWorkflowSweepAdvancesWhatOthersSettled(t *testing.T) {
	s := openStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	def, err := engine.NewDefinition("submit workflow", workflowspec.OnFailure(""), []engine.StepSpec{
		{Step: "a", Task: "work"}, {Step: "b", Task: "work", After: []string{"a"}}})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.SubmitWorkflow(ctx, engine.WorkflowParams{Def: def})
	if err != nil {
		t.Fatal(err)
	}
	finished(t, s, "work", 1) // step a, as another SDK settles it
	var mu sync.Mutex
	var reported []error
	sweep := &WorkflowSweep{Store: s, WorkerID: "w1", Every: 5 * time.Millisecond,
		Unread: func(context.Context, string, string) {},
		Report: func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sweep.Run(ctx)
	}()
	deadline := time.Now().Add(30 * time.Second) // hang guard only
	for {
		if _, err := s.GetByKey(ctx, workflowspec.StepKey(rec.ID, "b")); err == nil {
			break
		} else if !errors.Is(err, cairnqtype.ErrNotFound) || time.Now().After(deadline) {
			t.Fatalf("step b after sweeps: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 0 {
		t.Fatalf("sweeps reported %v", reported)
	}
}
