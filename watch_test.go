package cairnq_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
)

func TestWatchSignalsQueuedDoneAndPoll(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	ctx := context.Background()
	var mu sync.Mutex
	var got []cairnq.Signal
	stop := c.Watch(ctx, &cairnq.WatchOptions{Queues: []string{"watched"}, PollInterval: 20 * time.Millisecond}, func(s cairnq.Signal) {
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
	})
	seen := func(want cairnq.Signal) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range got {
			if s == want {
				return true
			}
		}
		return false
	}
	if _, err := c.Submit(ctx, "x", nil, &cairnq.SubmitOptions{Queue: "ignored"}); err != nil {
		t.Fatal(err)
	}
	task, err := c.Submit(ctx, "x", nil, &cairnq.SubmitOptions{Queue: "watched"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a queued signal", func() bool { return seen(cairnq.Signal{Reason: "queued", Queue: "watched"}) })
	claimed, err := cairnq.StoreOf(c).Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"watched"}, WorkerID: "w"})
	if err != nil || len(claimed) != 1 {
		t.Fatal(claimed, err)
	}
	if _, err := cairnq.StoreOf(c).Complete(ctx, task.ID, "w", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a done signal", func() bool { return seen(cairnq.Signal{Reason: "done", TaskID: task.ID}) })
	waitFor(t, "a poll signal", func() bool { return seen(cairnq.Signal{Reason: "poll"}) })
	stop()
	if seen(cairnq.Signal{Reason: "queued", Queue: "ignored"}) {
		t.Error("a queued signal for an unwatched queue got through")
	}
	mu.Lock()
	n := len(got)
	mu.Unlock()
	if _, err := c.Submit(ctx, "x", nil, &cairnq.SubmitOptions{Queue: "watched"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Errorf("signals after stop: %v", got[n:])
	}
}

func TestTransactionSharingNeedsPostgres(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	ctx := context.Background()
	if _, err := c.SubmitTx(ctx, nil, "x", nil, nil); !errors.Is(err, cairnq.ErrUnsupported) {
		t.Errorf("SubmitTx on SQLite: %v", err)
	}
	w := newWorker(t, c, nil)
	errs := make(chan error, 2)
	w.Handle("x", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		errs <- tc.SucceedIn(ctx, nil)
		errs <- tc.SucceedTx(ctx, nil, nil)
		return nil, nil
	}, nil)
	startWorker(t, w)
	task, _ := c.Submit(ctx, "x", nil, nil)
	for range 2 {
		if err := <-errs; !errors.Is(err, cairnq.ErrUnsupported) {
			t.Errorf("in a handler on SQLite: %v", err)
		}
	}
	if got := waitTask(t, c, task.ID); got.Status != cairnq.StatusSucceeded {
		t.Errorf("task after the unsupported calls: %s", got.Status)
	}
}

// On SQLite another client's commit (as another process's would) reaches
// a watch through the watch of the WAL file, as Reason "changed": not
// labelled "poll", which is the timer's alone (issue 50).
func TestWatchSignalsAnotherProcessesCommitAsChanged(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tasks.db")
	ctx := context.Background()
	open := func() *cairnq.Client {
		c, err := cairnq.Open(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	watcher, other := open(), open()
	var mu sync.Mutex
	var got []cairnq.Signal
	stop := watcher.Watch(ctx, &cairnq.WatchOptions{PollInterval: time.Hour}, func(s cairnq.Signal) {
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
	})
	defer stop()
	waitFor(t, "a changed signal", func() bool {
		// Submit until the watch has started and heard one: a signal
		// is a wakeup, and a commit before the watch began is not one.
		if _, err := other.Submit(ctx, "x", nil, nil); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, s := range got {
			if s.Reason == "poll" {
				t.Fatalf("a poll signal with an hour's timer: %v", got)
			}
			if s.Reason == "changed" {
				return true
			}
		}
		return false
	})
}
