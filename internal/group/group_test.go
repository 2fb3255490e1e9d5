package group

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

var errClosed = errors.New("closed")

// Requests that arrive while a flush runs go into the next flush
// together, each getting its own result, in order.
func TestRequestsArrivingDuringAFlushShareTheNext(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	g := New(func(ctx context.Context, ins []int) []Result[int] {
		mu.Lock()
		sizes = append(sizes, len(ins))
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			<-release
		}
		out := make([]Result[int], len(ins))
		for i, in := range ins {
			out[i].Value = in * 10
		}
		return out
	}, nil, errClosed)
	defer g.Close()

	ctx := context.Background()
	firstDone := make(chan Result[int], 1)
	go func() { r, _ := g.Do(ctx, 1); firstDone <- r }()
	waitUntil(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(sizes) == 1 })
	const n = 5
	var wg sync.WaitGroup
	got := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := g.Do(ctx, i+2)
			if err != nil {
				t.Error(err)
			}
			got[i] = r.Value
		}()
	}
	waitUntil(t, func() bool { return g.Waiting() == n })
	close(release)
	wg.Wait()
	if r := <-firstDone; r.Value != 10 {
		t.Errorf("first request got %d, want 10", r.Value)
	}
	for i, v := range got {
		if v != (i+2)*10 {
			t.Errorf("request %d got %d, want %d", i, v, (i+2)*10)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sizes) != 2 || sizes[1] != n {
		t.Errorf("flush sizes %v, want [1 %d]", sizes, n)
	}
}

// After Close a request is refused with the closed error.
func TestClosedGrouperRefuses(t *testing.T) {
	g := New(func(ctx context.Context, ins []int) []Result[int] { return make([]Result[int], len(ins)) }, nil, errClosed)
	g.Close()
	if !g.Closing() {
		t.Error("Closing is false after Close")
	}
	if _, err := g.Do(context.Background(), 1); !errors.Is(err, errClosed) {
		t.Errorf("Do after Close: %v, want the closed error", err)
	}
}

// A ticket goes to whichever side moves first.
func TestTicketDecidesOnce(t *testing.T) {
	var a Ticket
	if !a.Start() || a.Abandon() {
		t.Error("a started ticket could be abandoned")
	}
	var b Ticket
	if !b.Abandon() || b.Start() {
		t.Error("an abandoned ticket could be started")
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}
