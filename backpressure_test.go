package cairnq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
)

func TestBackpressureWaitsThenQueueFull(t *testing.T) {
	t.Parallel()
	c := openTemp(t, &cairnq.Options{QueueDepths: map[string]int{"narrow": 2}, MaxQueueWait: 100 * time.Millisecond})
	ctx := context.Background()
	narrow := &cairnq.SubmitOptions{Queue: "narrow"}
	for range 2 {
		if _, err := c.Submit(ctx, "x", nil, narrow); err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.Submit(ctx, "x", nil, narrow)
	var qf *cairnq.QueueFullError
	if !errors.Is(err, cairnq.ErrQueueFull) || !errors.As(err, &qf) || qf.Queue != "narrow" || qf.MaxDepth != 2 {
		t.Fatalf("third submit: %v, want QueueFullError on narrow", err)
	}
	// Other queues are not gated.
	for range 5 {
		if _, err := c.Submit(ctx, "x", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Bad input fails before any waiting.
	if _, err := c.Submit(ctx, "", nil, narrow); !errors.Is(err, cairnq.ErrInvalidArgument) {
		t.Errorf("empty name on a full queue: %v", err)
	}
	// Room made by a worker lets the next submit through.
	if _, err := cairnq.StoreOf(c).Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"narrow"}, WorkerID: "w"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(ctx, "x", nil, narrow); err != nil {
		t.Errorf("submit after a claim made room: %v", err)
	}
	stats, err := c.Stats(ctx, "narrow")
	if err != nil {
		t.Fatal(err)
	}
	if got := stats["narrow"]; got.Queued != 2 || got.Running != 1 {
		t.Errorf("narrow holds %+v, want 2 queued 1 running", got)
	}
}

func TestBackpressureUnblocksWhileWaiting(t *testing.T) {
	t.Parallel()
	c := openTemp(t, &cairnq.Options{MaxQueueDepth: 1, MaxQueueWait: time.Minute})
	ctx := context.Background()
	if _, err := c.Submit(ctx, "x", nil, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Submit(ctx, "x", nil, nil)
		done <- err
	}()
	if _, err := cairnq.StoreOf(c).Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("blocked submit: %v", err)
	}
}

func TestBackpressureOptionsValidated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, o := range []*cairnq.Options{
		{MaxQueueDepth: -1},
		{QueueDepths: map[string]int{"q": 0}},
		{MaxQueueDepth: 1, MaxQueueWait: -time.Second},
		{Retention: &cairnq.RetentionOptions{}},
		{Retention: &cairnq.RetentionOptions{Rules: []cairnq.RetentionRule{{Status: cairnq.StatusRunning}}}},
	} {
		if c, err := cairnq.Open(ctx, ":memory:", &cairnq.SQLiteOptions{Options: *o}); !errors.Is(err, cairnq.ErrInvalidArgument) {
			t.Errorf("options %+v: %v", o, err)
			if c != nil {
				c.Close()
			}
		}
	}
}
