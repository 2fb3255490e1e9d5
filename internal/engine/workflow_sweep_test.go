package engine

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
)

// A sweep of a workflow this process advanced from a step less than
// sweepMin ago skips its reads, for up to sweepSkipMax after its last
// full read: a step another SDK settled waits for the next full read,
// which inserts what it left ready.
func TestSweepSkipsAWorkflowThisProcessAdvances(t *testing.T) {
	bothStores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		now := fakeClock(s)
		later := func(d time.Duration) { now.Add(d.Milliseconds()) }
		rec := submitSpecs(t, s, []StepSpec{
			{Step: "a", Task: "work"}, {Step: "b", Task: "work", After: []string{"a"}},
			{Step: "c", Task: "work", After: []string{"b"}}, {Step: "d", Task: "work", After: []string{"c"}},
			{Step: "x", Task: "ts", Options: cairnqtype.SubmitOptions{Queue: "ts"}},
			{Step: "y", Task: "work", After: []string{"x"}},
		})
		// runNext runs the steps queued on default, which must be want.
		runNext := func(want ...string) {
			t.Helper()
			got, err := s.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w1", Lease: time.Minute, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			var steps []string
			for _, task := range got {
				mark, _ := StepMarkOf(task)
				steps = append(steps, mark.Step)
			}
			if slices.Sort(steps); !slices.Equal(steps, want) {
				t.Fatalf("queued on default: %v, want %v", steps, want)
			}
			for _, task := range got {
				if _, err := s.Settle(ctx, Settlement{Task: task, WorkerID: "w1", Outcome: Succeeded}); err != nil {
					t.Fatal(err)
				}
			}
		}
		sweep := func(what string) {
			t.Helper()
			if _, swept, err := s.sweepOne(ctx, rec.ID, "sweeper"); err != nil || !swept {
				t.Fatalf("%s: swept %v, %v", what, swept, err)
			}
		}

		runNext("a") // this process advances the workflow
		later(100 * time.Millisecond)
		sweep("the first sweep") // read whole: none before
		settleOnQueue(t, s, "ts")

		later(100 * time.Millisecond)
		runNext("b")
		later(sweepMin - time.Millisecond)
		sweep("a sweep just under sweepMin after an advance") // skipped: y is not inserted
		runNext("c")

		later(sweepMin)
		sweep("a sweep sweepMin after the last advance") // read whole: inserts y
		runNext("d", "y")
		got, err := s.GetWorkflow(ctx, rec.ID)
		if err != nil || got.Record.Status != cairnqtype.StatusSucceeded {
			t.Fatalf("the workflow: %+v, %v; want it succeeded", got, err)
		}
	})
}

// settleOnQueue claims the one task queued on queue and completes it
// as another SDK would: with the protocol's complete, advancing nothing.
func settleOnQueue(t *testing.T, s *Store, queue string) {
	t.Helper()
	got, err := s.Claim(t.Context(), cairnqtype.ClaimParams{Queues: []string{queue}, WorkerID: "ts-worker", Lease: time.Minute, Limit: 1})
	if err != nil || len(got) != 1 {
		t.Fatalf("the claim on %s: %d tasks, %v", queue, len(got), err)
	}
	if _, err := s.Complete(t.Context(), got[0].ID, "ts-worker", nil); err != nil {
		t.Fatal(err)
	}
}

// While this process advances a workflow without pause, its sweep still
// reads it whole every sweepSkipMax, and inserts what another SDK's
// settlement left ready then.
func TestSweepSkipsForAtMostSweepSkipMax(t *testing.T) {
	bothStores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		now := fakeClock(s)
		const chain = 12 // steps of this process's, run sweepMin/2 apart
		specs := []StepSpec{
			{Step: "x", Task: "ts", Options: cairnqtype.SubmitOptions{Queue: "ts"}},
			{Step: "y", Task: "after-ts", Options: cairnqtype.SubmitOptions{Queue: "y"}, After: []string{"x"}},
		}
		for i := range chain {
			sp := StepSpec{Step: fmt.Sprint("s", i), Task: "work"}
			if i > 0 {
				sp.After = []string{fmt.Sprint("s", i-1)}
			}
			specs = append(specs, sp)
		}
		rec := submitSpecs(t, s, specs)
		yQueued := func() bool {
			st, err := s.Stats(ctx, "y")
			if err != nil {
				t.Fatal(err)
			}
			return st["y"].Queued > 0
		}
		var sweptAt []time.Duration // after the first full read
		var fullAt time.Duration
		start := s.now()
		for i := range chain {
			got := claimOne(t, s, "w1", time.Minute)
			if _, err := s.Settle(ctx, Settlement{Task: got, WorkerID: "w1", Outcome: Succeeded}); err != nil {
				t.Fatal(err)
			}
			if i == 1 {
				settleOnQueue(t, s, "ts") // y is ready from here on
			}
			now.Add((sweepMin / 2).Milliseconds())
			if _, swept, err := s.sweepOne(ctx, rec.ID, "sweeper"); err != nil || !swept {
				t.Fatalf("sweep %d: swept %v, %v", i, swept, err)
			}
			sweptAt = append(sweptAt, s.now().Sub(start))
			if yQueued() {
				fullAt = s.now().Sub(start)
				break
			}
		}
		// The first sweep reads it whole (none before); the next full
		// read is the first at sweepSkipMax or more after that one.
		first := sweptAt[0]
		if fullAt == 0 || fullAt < first+sweepSkipMax || fullAt > first+sweepSkipMax+sweepMin/2 {
			t.Fatalf("y inserted by the sweep at %v (sweeps at %v), want the first at or after %v",
				fullAt, sweptAt, first+sweepSkipMax)
		}
	})
}

// fakeClock gives s a clock that stands still, at the time it was set,
// until the test moves it (Unix ms).
func fakeClock(s *Store) *atomic.Int64 {
	var now atomic.Int64
	now.Store(time.Now().UnixMilli())
	s.now = func() time.Time { return time.UnixMilli(now.Load()) }
	return &now
}
