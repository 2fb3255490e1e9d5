package cairnq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
)

// finish submits n tasks named name and settles each: succeed or fail.
func finish(t *testing.T, c *cairnq.Client, name, queue string, n int, succeed bool) {
	t.Helper()
	ctx := context.Background()
	st := cairnq.StoreOf(c)
	for range n {
		if _, err := c.Submit(ctx, name, nil, &cairnq.SubmitOptions{Queue: queue, MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{queue}, Names: []string{name}, WorkerID: "w", Limit: n})
	if err != nil || len(got) != n {
		t.Fatalf("claim: %d %v", len(got), err)
	}
	for _, task := range got {
		if succeed {
			_, err = st.Complete(ctx, task.ID, "w", nil)
		} else {
			_, err = st.Fail(ctx, task.ID, "w", cairnqtype.ErrorEnvelope{Message: "x"}, false, 0)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	last := time.Now()
	// A rule's age is measured in whole milliseconds and a purge keeps
	// what finished in the current one: without this wait a sweep made at
	// once found some of the tasks too young (and a paced one then paused).
	waitFor(t, "the clock past the tasks' completion", func() bool { return time.Since(last) > time.Millisecond })
}

func TestRetentionRulesAreTiered(t *testing.T) {
	t.Parallel()
	c := openTemp(t, &cairnq.Options{Retention: &cairnq.RetentionOptions{
		Interval: time.Hour, // only SweepNow runs in this test
		Limit:    2,         // several batches per rule
		Rules: []cairnq.RetentionRule{
			{Status: cairnq.StatusSucceeded, OlderThan: 0},
			{Queue: "audit", OlderThan: 24 * time.Hour},
			{Status: cairnq.StatusFailed, Queue: "default", OlderThan: 0},
		},
	}})
	ctx := context.Background()
	finish(t, c, "ok", "default", 5, true)
	finish(t, c, "bad", "default", 3, false)
	finish(t, c, "kept", "audit", 2, false)
	if _, err := c.Submit(ctx, "live", nil, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // completed_at must be strictly before the cutoff

	n, err := c.SweepNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 8 {
		t.Errorf("swept %d, want 8 (5 succeeded + 3 failed on default)", n)
	}
	stats, err := c.Stats(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if stats["default"] != (cairnq.StatusCounts{Queued: 1}) || stats["audit"] != (cairnq.StatusCounts{Failed: 2}) {
		t.Errorf("after the sweep: %+v", stats)
	}
}

func TestRetentionRunsInBackground(t *testing.T) {
	t.Parallel()
	c := openTemp(t, &cairnq.Options{Retention: &cairnq.RetentionOptions{
		Interval: 10 * time.Millisecond,
		Rules:    []cairnq.RetentionRule{{OlderThan: 0}},
	}})
	finish(t, c, "ok", "default", 3, true)
	waitFor(t, "the background sweeper to purge the finished tasks", func() bool { return countTasks(t, c) == 0 })
	if err := c.Close(); err != nil { // stops the sweeper goroutine
		t.Fatal(err)
	}
}

// The timer's sweeps pause between batches; paced, a sweep still drains
// every batch of its rules.
func TestRetentionPacedSweepDrainsEveryBatch(t *testing.T) {
	t.Parallel()
	c := openTemp(t, &cairnq.Options{Retention: &cairnq.RetentionOptions{
		Interval: time.Hour, // the timer's sweep is started by hand below
		Limit:    2,
		Rules:    []cairnq.RetentionRule{{OlderThan: 0}},
	}})
	finish(t, c, "ok", "default", 21, true)
	n, err := cairnq.SweepPaced(context.Background(), c)
	if err != nil || n != 21 {
		t.Fatalf("paced sweep purged %d, %v; want all 21 in 11 batches", n, err)
	}
	if got := countTasks(t, c); got != 0 {
		t.Fatalf("%d tasks left after the paced sweep", got)
	}
}

// A paced sweep lets go of the floors while it pauses: SweepNow, which
// does not pause, runs then rather than after the sweep, and an ended
// context ends the pause.
func TestRetentionSweepNowRunsDuringAPause(t *testing.T) {
	t.Parallel()
	c := openTemp(t, &cairnq.Options{Retention: &cairnq.RetentionOptions{
		Interval: time.Hour,
		Limit:    2,
		Rules:    []cairnq.RetentionRule{{OlderThan: 0}},
	}})
	finish(t, c, "ok", "default", 5, true)
	cairnq.SetSweepIdle(c, 1<<30) // a pause of half the interval after the first batch
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		n   int
		err error
	}
	paced := make(chan result, 1)
	go func() {
		n, err := cairnq.SweepPaced(ctx, c)
		paced <- result{n, err}
	}()
	waitFor(t, "the paced sweep's first batch", func() bool { return countTasks(t, c) == 3 })
	n, err := c.SweepNow(context.Background())
	if err != nil || n != 3 {
		t.Fatalf("SweepNow during the pause purged %d, %v; want the 3 left", n, err)
	}
	cancel()
	r := <-paced
	if r.n != 2 || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the paced sweep returned %d, %v; want its first batch of 2 and context.Canceled", r.n, r.err)
	}
}
