package wake

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/pglisten"
)

// countingListener records the demand listener's calls; the real LISTEN
// behind it is covered per adapter and in conformance/ on Postgres. This
// test is about when LISTEN is started and stopped, which no server shows
// deterministically.
type countingListener struct {
	executor.Executor // unused; only Listen is called
	mu                sync.Mutex
	listens, stops    int
	active            int
	err               error
	gate              chan struct{} // when set, Listen blocks until it is closed
}

func (c *countingListener) Listen(ctx context.Context, channels []string, onNotify func(channel, payload string)) (func(), error) {
	if c.gate != nil {
		<-c.gate
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listens++
	if c.err != nil {
		return nil, c.err
	}
	c.active++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			c.stops++
			c.active--
			c.mu.Unlock()
		})
	}, nil
}

func (c *countingListener) counts() (listens, stops, active int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listens, c.stops, c.active
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// wantListens checks how many LISTENs were set up and how many are active.
func wantListens(t *testing.T, cl *countingListener, listens, active int, when string) {
	t.Helper()
	if l, _, a := cl.counts(); l != listens || a != active {
		t.Fatalf("%s: %d LISTENs, %d active; want %d, %d", when, l, a, listens, active)
	}
}

func TestDemandListenerListensOnlyWhileNeeded(t *testing.T) {
	cl := &countingListener{gate: make(chan struct{})}
	d := NewDemand(cl, "cairnq_done", func(string) {}, quietLog(), nil)
	d.linger = 20 * time.Millisecond
	defer d.Close()

	if l, _, _ := cl.counts(); l != 0 || d.Listening() {
		t.Fatalf("listening before any subscriber: %d listens", l)
	}
	// Concurrent first subscribers share one LISTEN, and none returns
	// before it is in effect.
	var wg sync.WaitGroup
	returned := make(chan bool, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.Acquire(context.Background())
			returned <- d.Listening()
		}()
	}
	close(cl.gate)
	wg.Wait()
	close(returned)
	for ok := range returned {
		if !ok {
			t.Fatal("acquire returned before LISTEN was in effect")
		}
	}
	if l, _, _ := cl.counts(); l != 1 {
		t.Fatalf("%d LISTENs for 8 concurrent subscribers, want 1", l)
	}
	for range 8 {
		d.Release()
	}
	// The last release arms the linger; a subscriber arriving within it
	// keeps the same listener.
	d.Acquire(context.Background())
	d.Release()
	waitFor(t, "the idle listener to stop", func() bool { _, s, a := cl.counts(); return s == 1 && a == 0 })
	if d.Listening() {
		t.Fatal("still listening after the linger")
	}
	// A new subscriber listens again.
	d.Acquire(context.Background())
	wantListens(t, cl, 2, 1, "after a new subscriber")
	d.Release()
}

func TestDemandListenerHeldWhileSubscribed(t *testing.T) {
	cl := &countingListener{}
	d := NewDemand(cl, "cairnq_queued", func(string) {}, quietLog(), nil)
	d.linger = time.Millisecond
	d.Acquire(context.Background())
	d.Acquire(context.Background())
	d.Release()
	// One subscriber remains: however long the linger passes, no stop.
	idle := time.NewTimer(50 * time.Millisecond)
	<-idle.C
	if _, s, _ := cl.counts(); s != 0 || !d.Listening() {
		t.Fatalf("stopped (%d) while a subscriber remained", s)
	}
	d.Release()
	waitFor(t, "the idle listener to stop", func() bool { _, s, _ := cl.counts(); return s == 1 })
	d.Close()
}

func TestDemandListenerUnavailableIsFinal(t *testing.T) {
	cl := &countingListener{err: executor.ErrListenUnavailable}
	d := NewDemand(cl, "cairnq_done", func(string) {}, quietLog(), nil)
	defer d.Close()
	for range 3 {
		d.Acquire(context.Background())
		d.Release()
	}
	if l, _, _ := cl.counts(); l != 1 {
		t.Fatalf("%d LISTEN attempts after ErrListenUnavailable, want 1", l)
	}
}

func TestDemandListenerBacksOffAfterFailure(t *testing.T) {
	cl := &countingListener{err: errors.New("connection refused")}
	d := NewDemand(cl, "cairnq_done", func(string) {}, quietLog(), nil)
	defer d.Close()
	for range 3 {
		d.Acquire(context.Background())
		d.Release()
	}
	if l, _, _ := cl.counts(); l != 1 {
		t.Fatalf("%d LISTEN attempts within the retry pause, want 1", l)
	}
	// Once the pause has passed, the next subscriber tries again.
	d.mu.Lock()
	d.failedAt = time.Now().Add(-listenRetry)
	d.mu.Unlock()
	cl.mu.Lock()
	cl.err = nil
	cl.mu.Unlock()
	d.Acquire(context.Background())
	wantListens(t, cl, 2, 1, "after the pause")
	d.Release()
}

func TestDemandListenerCloseStopsAndRefuses(t *testing.T) {
	cl := &countingListener{}
	d := NewDemand(cl, "cairnq_queued", func(string) {}, quietLog(), nil)
	d.Acquire(context.Background())
	d.Close()
	if _, s, a := cl.counts(); s != 1 || a != 0 {
		t.Fatalf("close: %d stops, %d active", s, a)
	}
	d.Release()
	d.Acquire(context.Background())
	if l, _, _ := cl.counts(); l != 1 {
		t.Fatalf("listened again after close: %d", l)
	}
	d.Release()
}

func TestDemandListenerCloseDuringSetup(t *testing.T) {
	cl := &countingListener{gate: make(chan struct{})}
	d := NewDemand(cl, "cairnq_queued", func(string) {}, quietLog(), nil)
	acquired := make(chan struct{})
	go func() {
		d.Acquire(context.Background())
		close(acquired)
	}()
	waitFor(t, "the LISTEN to be under way", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.starting != nil
	})
	closed := make(chan struct{})
	go func() {
		d.Close()
		close(closed)
	}()
	close(cl.gate)
	<-closed
	<-acquired
	if l, s, a := cl.counts(); l != 1 || s != 1 || a != 0 {
		t.Fatalf("LISTEN set up across close: %d listens, %d stops, %d active", l, s, a)
	}
}

// A Listen call must not be cut short before the listener's own first
// connection attempt could end: listenSetup bounds the whole call, the
// adapters' connection sources each attempt.
func TestListenSetupOutlastsAConnectAttempt(t *testing.T) {
	if listenSetup < pglisten.ConnectTimeout {
		t.Fatalf("listenSetup %v is shorter than pglisten.ConnectTimeout %v", listenSetup, pglisten.ConnectTimeout)
	}
}
