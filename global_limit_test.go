package cairnq_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
)

// A limit that cannot hold, or a metadata key both databases would not
// read alike, is refused when the handler is registered.
func TestGlobalLimitRefusesBadLimits(t *testing.T) {
	c := openTemp(t, nil)
	w := newWorker(t, c, nil)
	noop := func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return nil, nil }
	for i, l := range []cairnq.GlobalLimit{{Max: 0}, {Max: -1}, {Max: 1, PerMetadataKey: "a.b"}, {Max: 1, PerMetadataKey: "a b"}, {Max: 1, PerMetadataKey: "$"}} {
		if err := w.Handle(fmt.Sprintf("bad%d", i), noop, &cairnq.HandlerOptions{GlobalLimit: &l}); !errors.As(err, new(*cairnq.ArgumentError)) {
			t.Errorf("GlobalLimit %+v: %v, want an *ArgumentError", l, err)
		}
	}
	if err := w.Handle("good", noop, &cairnq.HandlerOptions{GlobalLimit: &cairnq.GlobalLimit{Max: 3, PerMetadataKey: "tenant_id"}}); err != nil {
		t.Errorf("a good limit: %v", err)
	}
}

// A task running under another worker's lease counts against the limit
// while the lease lasts, and stops counting once it has run out: the
// limited worker claims nothing before then, and claims then.
func TestGlobalLimitExpiredLeaseStopsCounting(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		ghostTask, err := c.Submit(ctx, "limited", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		claimed, err := c.Store().Claim(ctx, cairnqtype.ClaimParams{Queues: []string{cairnq.DefaultQueue}, Names: []string{"limited"},
			WorkerID: "ghost", Lease: 3 * time.Second, Limit: 1})
		if err != nil || len(claimed) != 1 || claimed[0].ID != ghostTask.ID {
			t.Fatalf("the ghost's claim: %v %v", claimed, err)
		}
		ghost := claimed[0]
		next, err := c.Submit(ctx, "limited", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		claimedAt := map[string]time.Time{}
		w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 4})
		if err := w.Handle("limited", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			mu.Lock()
			claimedAt[tc.ID()] = tc.Task().UpdatedAt // the claim's time, by the database's clock
			mu.Unlock()
			return nil, nil
		}, &cairnq.HandlerOptions{GlobalLimit: &cairnq.GlobalLimit{Max: 1}}); err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		waitTask(t, c, next.ID)
		mu.Lock()
		defer mu.Unlock()
		if at := claimedAt[next.ID]; at.Before(ghost.LeaseUntil) {
			t.Errorf("the limited worker claimed at %v, before the ghost's lease ran out at %v", at, ghost.LeaseUntil)
		}
	})
}

// Two names under limits, drawn by two workers at once, never deadlock
// and never pass their limits; an unlimited name beside them runs too.
func TestGlobalLimitTwoNames(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		var mu sync.Mutex
		running, most := map[string]int{}, map[string]int{}
		handler := func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			mu.Lock()
			running[tc.Name()]++
			most[tc.Name()] = max(most[tc.Name()], running[tc.Name()])
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			mu.Lock()
			running[tc.Name()]--
			mu.Unlock()
			return nil, nil
		}
		for i := range 2 {
			w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 8, ID: fmt.Sprintf("limits-%d", i)})
			for name, max := range map[string]int{"lim.a": 2, "lim.b": 3} {
				if err := w.Handle(name, handler, &cairnq.HandlerOptions{GlobalLimit: &cairnq.GlobalLimit{Max: max}}); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Handle("free", handler, nil); err != nil {
				t.Fatal(err)
			}
			startWorker(t, w)
		}
		var items []cairnq.SubmitItem
		for range 60 {
			items = append(items, cairnq.SubmitItem{Name: "lim.a"}, cairnq.SubmitItem{Name: "lim.b"}, cairnq.SubmitItem{Name: "free"})
		}
		tasks, err := c.SubmitMany(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			if got := waitTask(t, c, task.ID); got.Status != cairnq.StatusSucceeded {
				t.Fatalf("%s %s", got.Name, got.Status)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if most["lim.a"] > 2 || most["lim.b"] > 3 {
			t.Errorf("at most %d of lim.a (limit 2) and %d of lim.b (limit 3) ran at once", most["lim.a"], most["lim.b"])
		}
	})
}

// MetadataText reads a metadata member as a per-tenant limit reads it.
func TestMetadataText(t *testing.T) {
	c := openTemp(t, nil)
	task, err := c.Submit(context.Background(), "x", nil, &cairnq.SubmitOptions{
		Metadata: map[string]any{"tenant": "acme", "n": 7, "nested": map[string]int{"a": 1}, "none": nil}})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(t, c, nil)
	got := map[string]string{}
	w.Handle("x", func(_ context.Context, tc *cairnq.TaskContext) (any, error) {
		for _, k := range []string{"tenant", "n", "nested", "none", "absent"} {
			if v, ok := tc.MetadataText(k); ok {
				got[k] = v
			}
		}
		return nil, nil
	}, nil)
	workUntil(t, c, w, task.ID)
	want := map[string]string{"tenant": "acme", "n": "7", "nested": `{"a":1}`}
	if !maps.Equal(got, want) {
		t.Errorf("MetadataText = %v, want %v", got, want)
	}
}
