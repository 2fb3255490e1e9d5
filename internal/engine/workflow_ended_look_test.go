package engine

import (
	"sync"
	"testing"
	"time"
)

// A store's full looks over the ended workflows: the first at a random
// point of the spread after the first ask, then one reserved for the
// worker that asked when it was due, every endedFullEvery (with a tenth
// of jitter) or fullDrawShare times as long as the last took; and at once
// again after one cut short.
func TestEndedFullPace(t *testing.T) {
	now := time.Unix(1000, 0)
	after := func(d time.Duration) time.Time { return now.Add(d) }
	for range 20 {
		var p endedFull
		if p.take(now) { // drawn 0 of the spread's nanoseconds: never
			t.Fatal("the first full look at the first ask despite the spread")
		}
		if p.next.Before(now) || !p.next.Before(after(endedFullSpread)) {
			t.Fatalf("the first full look is due at %v, want within %v of %v", p.next, endedFullSpread, now)
		}
		if !p.take(after(endedFullSpread)) {
			t.Fatal("no full look once the spread passed")
		}
	}

	p := endedFull{spreadSet: true}
	if !p.take(now) {
		t.Fatal("without a spread the first ask waits")
	}
	if p.take(after(time.Millisecond)) {
		t.Fatal("a second worker of the store looks beside the first")
	}
	p.ran(now, time.Second, true)
	if p.take(after(endedFullEvery - time.Second)) {
		t.Fatal("a full look sooner than endedFullEvery after the last")
	}
	if next := p.next; next.Before(after(endedFullEvery)) || !next.Before(after(endedFullEvery+endedFullEvery/10)) {
		t.Fatalf("next full look at %v, want within a tenth after %v", next, after(endedFullEvery))
	}
	start := after(time.Hour)
	if !p.take(start) {
		t.Fatal("no full look an hour after the last")
	}
	p.ran(start, time.Minute, true) // a slow one: fullDrawShare times later
	if p.take(start.Add(fullDrawShare*time.Minute - time.Second)) {
		t.Fatal("a full look sooner than fullDrawShare times the last one's cost")
	}
	start = start.Add(time.Hour)
	if !p.take(start) {
		t.Fatal("no full look once the spacing passed")
	}
	p.ran(start, time.Second, false)
	if !p.take(start.Add(time.Second)) {
		t.Fatal("a full look cut short is not due again at once")
	}
	if got := p.taken.Load(); got != 4 {
		t.Errorf("taken %d, want 4", got)
	}
}

// The workers of a store share its full look: of many asking at once,
// one looks, and none again until it is next due.
func TestLookEndedFullOncePerStore(t *testing.T) {
	s, _ := openTestStore(t, SQLiteOptions{})
	s.SpreadEndedFull(0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	looked := 0
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				ok, err := s.LookEndedFull(t.Context(), "w"+string(rune('a'+i)), 256)
				if err != nil {
					t.Error(err)
				}
				if ok {
					mu.Lock()
					looked++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if looked != 1 || s.EndedFullLooks() != 1 {
		t.Fatalf("%d workers looked (%d counted), want 1", looked, s.EndedFullLooks())
	}
}
