package claimloop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/completer"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
	"github.com/cairnq/cairnq-go/internal/testkit/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// bothStores runs fn on a fresh store of each dialect.
func bothStores(t *testing.T, fn func(t *testing.T, s *engine.Store)) { storetest.Both(t, fn) }

func submit(t *testing.T, s *engine.Store, name string, n int) {
	t.Helper()
	for range n {
		if _, err := s.Submit(t.Context(), engine.SubmitParams{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
}

// A call's charge holds a slot, its name's and its resource's share and
// its payload's bytes until Release, and keeps it settling until End
// (or, handed over, Settled).
func TestSlotsChargeAndFree(t *testing.T) {
	s := NewSlots(2, 10)
	src := &Source{Names: []string{"a"}, OwnConc: 1, Resource: "gpu"}
	payload := &cairnqtype.Task{Payload: []byte(`"0123456789"`)}
	ch := s.Begin(Call{Source: src, Tasks: []*cairnqtype.Task{payload}})
	if free, full := s.room(); free != 1 || !full {
		t.Errorf("one call of 12 payload bytes of 10: free %d, full %v; want 1, full", free, full)
	}
	if n := s.nameRoom("a", 1); n != 0 {
		t.Errorf("name room %d, want 0", n)
	}
	if room := s.resourceRoom(map[string]int{"gpu": 2, "tpu": 1}); room["gpu"] != 1 || room["tpu"] != 1 {
		t.Errorf("resource room %v", room)
	}
	s.Release(ch)
	s.Release(ch) // twice: no more
	if free, full := s.room(); free != 2 || full || !s.Busy() || s.Over(false, false) {
		t.Errorf("released: free %d, full %v, busy %v; want 2 free, settling, not over", free, full, s.Busy())
	}
	if n := s.nameRoom("a", 1); n != 1 {
		t.Errorf("name room after release %d, want 1", n)
	}
	select {
	case <-s.Freed():
	default:
		t.Error("a release did not signal Freed")
	}
	s.End(ch, true)
	if !s.Over(false, false) || !s.Busy() {
		t.Errorf("ended, handed over: over %v busy %v; want over and still settling", s.Over(false, false), s.Busy())
	}
	s.Settled()
	if s.Busy() {
		t.Error("busy after its settlement")
	}
	for range SettlingCap * 2 {
		s.End(s.Begin(Call{Source: &Source{}}), true)
	}
	if _, full := s.room(); !full {
		t.Errorf("%d calls settling on 2 slots: not full", SettlingCap*2)
	}
}

// A call left running past a shutdown's give-up counts as over only
// where handlers run on their calls' goroutines.
func TestSlotsOverWithHandlersLeftRunning(t *testing.T) {
	s := NewSlots(1, 0)
	s.Begin(Call{Source: &Source{}})
	if s.Over(false, true) || s.Over(true, false) || !s.Over(true, true) {
		t.Errorf("over: %v %v %v", s.Over(false, true), s.Over(true, false), s.Over(true, true))
	}
}

// Paused queues are left out of a claim and listed in the worker's order;
// a resume wakes a loop waiting for one.
func TestPauseLeavesQueuesOut(t *testing.T) {
	p := NewPause([]string{"a", "b", "c"})
	p.Set([]string{"c", "a"}, true)
	if got := p.Paused(); fmt.Sprint(got) != "[a c]" {
		t.Errorf("paused %v", got)
	}
	if got := p.hold(); fmt.Sprint(got) != "[b]" {
		t.Errorf("claimed on %v", got)
	}
	p.release()
	p.Set([]string{"a"}, false)
	select {
	case <-p.resumed:
	default:
		t.Error("a resume did not wake the loop")
	}
	if got := p.Paused(); fmt.Sprint(got) != "[c]" {
		t.Errorf("paused %v after resuming a", got)
	}
}

// The fleet's pauses replace each other whole, name only the worker's
// queues, add to the worker's own, and a fleet resume wakes the loop but
// lifts no pause of the worker's own.
func TestPauseFleetBesideTheWorkers(t *testing.T) {
	p := NewPause([]string{"a", "b", "c"})
	p.Set([]string{"b"}, true)
	paused, resumed := p.SetFleet([]string{"z", "c", "b"})
	if fmt.Sprint(paused, resumed) != "[b c] []" {
		t.Errorf("SetFleet paused %v, resumed %v", paused, resumed)
	}
	if got := p.hold(); fmt.Sprint(got) != "[a]" {
		t.Errorf("claimed on %v", got)
	}
	p.release()
	if paused, resumed := p.SetFleet([]string{"c"}); fmt.Sprint(paused, resumed) != "[] [b]" {
		t.Errorf("second SetFleet paused %v, resumed %v", paused, resumed)
	}
	select {
	case <-p.resumed:
	default:
		t.Error("a fleet resume did not wake the loop")
	}
	if got := p.hold(); fmt.Sprint(got) != "[a]" {
		t.Errorf("claimed on %v with b paused by the worker and c by the fleet", got)
	}
	p.release()
	if got := p.Paused(); fmt.Sprint(got) != "[b]" {
		t.Errorf("Paused %v, want the worker's own pause only", got)
	}
	if paused, resumed := p.SetFleet(nil); fmt.Sprint(paused, resumed) != "[] [c]" {
		t.Errorf("SetFleet(nil) paused %v, resumed %v", paused, resumed)
	}
}

// runner is a loop over a store whose calls succeed at once, settled
// through the store's completer.
type runner struct {
	*Loop
	mu      sync.Mutex
	started map[string]int // per task id
	sizes   map[string][]int
	peak    map[string]int // the most calls of a name at once
	running map[string]int
	wg      sync.WaitGroup
}

type recorder struct{ slots *Slots }

func (r recorder) Settled(_ engine.Settlement, _ engine.Settled, err error, handedOver bool) {
	if handedOver {
		r.slots.Settled()
	}
}

func newRunner(s *engine.Store, sources []Source, conc int) *runner {
	comp := completer.New(completer.Config{Store: s, Lease: time.Minute})
	r := &runner{started: map[string]int{}, sizes: map[string][]int{}, peak: map[string]int{}, running: map[string]int{}}
	var names []string
	batchOf := map[string]int{}
	for _, src := range sources {
		names = append(names, src.Names...)
		for _, n := range src.Names {
			batchOf[n] = src.Batch
		}
	}
	r.Loop = &Loop{Claims: s, Store: s, Completer: comp, Slots: NewSlots(conc, 0), Pause: NewPause([]string{"default"}),
		WorkerID: "w", Queues: []string{"default"}, Conc: conc, Lease: time.Minute, Poll: 50 * time.Millisecond,
		Sources: sources, Names: names, BatchOf: batchOf, Start: r.start,
		Busy: func(context.Context, time.Duration) {}, Report: func(error) {}}
	comp.(interface{ Start(context.Context) }).Start(context.Background())
	return r
}

func (r *runner) start(c Call) {
	ch := r.Slots.Begin(c)
	name := c.Tasks[0].Name
	r.mu.Lock()
	r.running[name]++
	r.peak[name] = max(r.peak[name], r.running[name])
	r.sizes[name] = append(r.sizes[name], len(c.Tasks))
	for _, t := range c.Tasks {
		r.started[t.ID]++
	}
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.mu.Lock()
		r.running[name]--
		r.mu.Unlock()
		r.Slots.Release(ch)
		handed := false
		for _, t := range c.Tasks {
			st := engine.Settlement{Task: t, WorkerID: "w", Outcome: engine.Succeeded}
			if r.Completer.Settle(context.Background(), st, recorder{r.Slots}, len(c.Tasks) == 1) {
				handed = true
			}
		}
		r.Slots.End(ch, handed)
	}()
}

// runUntilSucceeded runs the loop until n tasks of the default queue
// have succeeded, then stops it and waits for its calls.
func (r *runner) runUntilSucceeded(t *testing.T, s *engine.Store, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		stats, err := s.Stats(t.Context(), "default")
		if err != nil {
			t.Fatal(err)
		}
		if stats["default"].Succeeded == n {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("not drained: %+v", stats["default"])
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r.wg.Wait()
}

// The loop drains the queue through its draws: each task starts once, a
// batched name's calls hold up to its batch, a name with its own cap
// never runs more calls at once, and the worker's concurrency is never
// passed.
func TestLoopRunDrainsThroughItsDraws(t *testing.T) {
	bothStores(t, func(t *testing.T, s *engine.Store) {
		submit(t, s, "batched", 20)
		submit(t, s, "capped", 10)
		submit(t, s, "plain", 20)
		r := newRunner(s, []Source{
			{Names: []string{"batched"}, Batch: 3},
			{Names: []string{"capped"}, Batch: 1, OwnConc: 1},
			{Names: []string{"plain"}, Batch: 1},
		}, 4)
		r.runUntilSucceeded(t, s, 50)
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.started) != 50 {
			t.Errorf("%d tasks started, want 50", len(r.started))
		}
		for id, n := range r.started {
			if n != 1 {
				t.Errorf("task %s started %d times", id, n)
			}
		}
		for _, n := range r.sizes["batched"] {
			if n > 3 {
				t.Errorf("a batched call of %d tasks, batch 3", n)
			}
		}
		if r.peak["capped"] > 1 {
			t.Errorf("capped ran %d calls at once, cap 1", r.peak["capped"])
		}
	})
}

// ClaimOne rotates the draws as Run does, so repeated calls share out
// the names, and claims nothing while every queue is paused.
func TestLoopClaimOneRotatesAndPauses(t *testing.T) {
	bothStores(t, func(t *testing.T, s *engine.Store) {
		submit(t, s, "a", 3)
		submit(t, s, "b", 3)
		r := newRunner(s, []Source{{Names: []string{"a"}, Batch: 1}, {Names: []string{"b"}, Batch: 1}}, 1)
		var got []string
		for range 4 {
			c, ok, err := r.ClaimOne(t.Context())
			if err != nil || !ok || len(c.Tasks) != 1 {
				t.Fatalf("claim: %v %v %+v", ok, err, c)
			}
			got = append(got, c.Tasks[0].Name)
		}
		if fmt.Sprint(got) != "[a b a b]" {
			t.Errorf("claimed %v, want the names in turn", got)
		}
		r.Pause.Set([]string{"default"}, true)
		if c, ok, err := r.ClaimOne(t.Context()); ok || err != nil {
			t.Errorf("claimed %+v, %v while paused", c, err)
		}
		if stats, _ := s.Stats(t.Context(), "default"); stats["default"].Queued != 2 {
			t.Errorf("paused claim took tasks: %+v", stats["default"])
		}
	})
}

// A store closed under the loop ends Run with the store's error, which
// no retry could mend.
func TestLoopRunEndsWhenTheStoreIsGone(t *testing.T) {
	bothStores(t, func(t *testing.T, s *engine.Store) {
		r := newRunner(s, []Source{{Names: []string{"a"}, Batch: 1}}, 1)
		done := make(chan error, 1)
		go func() { done <- r.Run(t.Context()) }()
		s.Close()
		err := <-done
		if !errors.Is(err, cairnqtype.ErrClosed) {
			t.Errorf("Run after Close: %v, want ErrClosed", err)
		}
	})
}

// busyRecorder is a Claimer that keeps, for each claim, whether it was
// made as a busy worker's and whether a global limit capped its draw.
type busyRecorder struct {
	Claimer
	mu     sync.Mutex
	busy   []bool
	capped []bool // capped, and drew tasks
}

func (b *busyRecorder) Claims(ctx context.Context, r engine.ClaimRequest) (engine.Claimed, error) {
	got, err := b.Claimer.Claims(ctx, r)
	drew := false
	for _, ts := range got.Tasks {
		drew = drew || len(ts) > 0
	}
	b.mu.Lock()
	b.busy, b.capped = append(b.busy, r.Busy), append(b.capped, err == nil && got.Capped && drew)
	b.mu.Unlock()
	return got, err
}

// After a draw its global limit capped, the loop's next claim is a busy
// worker's, without the probe an idle one makes: the name's tasks are
// queued, held back only until a call ends. (A capped draw that drew
// nothing counts only while the worker has calls of its own: one whose
// limit other processes fill stays idle, and probes.)
func TestLoopClaimsAfterACappedDrawAsBusy(t *testing.T) {
	bothStores(t, func(t *testing.T, s *engine.Store) {
		submit(t, s, "limited", 6)
		r := newRunner(s, []Source{{Names: []string{"limited"}, Batch: 1, Global: &engine.GlobalLimit{Max: 1}}}, 4)
		rec := &busyRecorder{Claimer: s}
		r.Claims = rec
		r.runUntilSucceeded(t, s, 6)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		cappedOnes := 0
		for i := 1; i < len(rec.busy); i++ {
			if rec.capped[i-1] {
				cappedOnes++
				if !rec.busy[i] {
					t.Errorf("claim %d followed a capped draw as an idle worker's (claims: busy %v, capped %v)", i, rec.busy, rec.capped)
				}
			}
		}
		if cappedOnes == 0 {
			t.Errorf("no claim was capped by a limit of 1 over 6 tasks (capped %v)", rec.capped)
		}
		if r.peak["limited"] > 1 {
			t.Errorf("%d calls at once under a limit of 1", r.peak["limited"])
		}
	})
}
