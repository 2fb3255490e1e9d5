package ratelimit

import (
	"testing"
	"time"
)

// A bucket starts full, refills at its rate up to its burst, and says
// how long until the next start once empty; a claim that took more than
// was there (a draw bounded before it) is paid back first.
func TestBucket(t *testing.T) {
	start := time.Unix(1000, 0)
	b := New(2, 3) // two a second, three at once
	if got := b.Available(start); got != 3 {
		t.Fatalf("a new bucket holds %d, want its burst 3", got)
	}
	b.Take(start, 3)
	if got, next := b.Available(start), b.Next(start); got != 0 || next != 500*time.Millisecond {
		t.Fatalf("empty: %d available, next in %v; want 0, 500ms", got, next)
	}
	if got := b.Available(start.Add(time.Second)); got != 2 {
		t.Fatalf("a second later %d available, want 2", got)
	}
	if got := b.Available(start.Add(time.Hour)); got != 3 {
		t.Fatalf("an hour later %d available, want no more than the burst 3", got)
	}
	later := start.Add(time.Hour)
	b.Take(later, 5) // two past empty
	if got, next := b.Available(later), b.Next(later); got != -2 || next != 1500*time.Millisecond {
		t.Fatalf("overdrawn by 2: %d available, next in %v; want -2, 1.5s", got, next)
	}
	if New(1, 0).Available(start) != 1 {
		t.Fatal("a burst below 1 holds no token")
	}
}
