package cairnq

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/internal/engine"
)

// ridingOps records the completions that reached the store through the
// claim loop: carried by a claim, or settled by the loop when it could
// not claim. The rest went to the writer one call at a time.
type ridingOps struct {
	claimer
	mu   sync.Mutex
	rode []string
}

func (o *ridingOps) note(cs []*engine.Completion) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range cs {
		o.rode = append(o.rode, c.ID)
	}
}

func (o *ridingOps) Claims(ctx context.Context, r engine.ClaimRequest) (engine.Claimed, error) {
	o.note(r.Settle)
	return o.claimer.Claims(ctx, r)
}

func (o *ridingOps) SettleCompletions(ctx context.Context, cs []*engine.Completion) error {
	o.note(cs)
	return o.claimer.SettleCompletions(ctx, cs)
}

func (o *ridingOps) carried(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Contains(o.rode, id)
}

// On SQLite the completions of a busy worker ride on its next claim, also
// after a claim that drew a single task while other calls still ran:
// the calls of an earlier draw finishing then would otherwise each take a
// commit of their own (a burn-down whose slot gathering came up short
// settled ~60 tasks that way, one commit each).
func TestCompletionsRideWhileOtherCallsRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := Open(ctx, filepath.Join(t.TempDir(), "ride.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	w, err := NewWorker(c, &WorkerOptions{Concurrency: 4, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ops := &ridingOps{claimer: w.claims}
	w.claims = ops
	started := make(chan struct{}, 3)
	release := make(chan struct{})
	if err := w.Handle("slow", func(ctx context.Context, tc *TaskContext) (any, error) {
		started <- struct{}{}
		<-release
		return nil, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("fast", func(ctx context.Context, tc *TaskContext) (any, error) { return nil, nil }, nil); err != nil {
		t.Fatal(err)
	}
	var slow []string
	for range 3 {
		task, err := c.Submit(ctx, "slow", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		slow = append(slow, task.ID)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	for range 3 {
		<-started
	}
	// A claim drawing this one task, while the three slow calls run.
	fast, err := c.Submit(ctx, "fast", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if got, err := c.Wait(wctx, fast.ID, nil); err != nil || got.Status != StatusSucceeded {
		t.Fatalf("the fast task: %v %v", got, err)
	}
	close(release)
	for _, id := range slow {
		if got, err := c.Wait(wctx, id, nil); err != nil || got.Status != StatusSucceeded {
			t.Fatalf("slow task %s: %v %v", id, got, err)
		}
		if !ops.carried(id) {
			t.Errorf("slow task %s settled alone, not through the claim loop", id)
		}
	}
}
