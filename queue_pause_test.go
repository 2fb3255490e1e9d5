package cairnq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/internal/testkit/faulttest"
	"github.com/ncruces/go-sqlite3"
)

// TestPauseQueueRefusesBadInput: each bad argument is an *ArgumentError
// naming it, and nothing is written.
func TestPauseQueueRefusesBadInput(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		long := strings.Repeat("q", 256)
		for _, tc := range []struct {
			name, queue, arg string
			opts             *cairnq.PauseOptions
		}{
			{"empty queue", "", "queue", nil},
			{"overlong queue", long, "queue", nil},
			{"queue not UTF-8", "q\xff", "queue", nil},
			{"queue with NUL", "q\x00", "queue", nil},
			{"overlong by", "emails", "by", &cairnq.PauseOptions{By: long}},
			{"overlong reason", "emails", "reason", &cairnq.PauseOptions{Reason: strings.Repeat("r", cairnq.MaxPauseReasonBytes+1)}},
		} {
			_, _, err := c.PauseQueue(ctx, tc.queue, tc.opts)
			var ae *cairnq.ArgumentError
			if !errors.As(err, &ae) || ae.Arg != tc.arg {
				t.Errorf("%s: PauseQueue = %v, want an *ArgumentError on %q", tc.name, err, tc.arg)
			}
		}
		if _, err := c.ResumeQueue(ctx, ""); !errors.As(err, new(*cairnq.ArgumentError)) {
			t.Errorf("ResumeQueue(\"\") = %v, want an *ArgumentError", err)
		}
		if got, err := c.PausedQueues(ctx); err != nil || len(got) != 0 {
			t.Errorf("PausedQueues after bad input = %v, %v; want none", got, err)
		}
	})
}

// TestPauseQueueKeepsTheFirstPause: pausing a paused queue returns the
// pause in force, unchanged; PausedQueues lists the pauses by queue;
// ResumeQueue returns the pause it lifted, and nil when there was none.
func TestPauseQueueKeepsTheFirstPause(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		first, already, err := c.PauseQueue(ctx, "emails", &cairnq.PauseOptions{By: "ops", Reason: "provider down"})
		if err != nil || already {
			t.Fatal(err, already)
		}
		if first.Queue != "emails" || first.By != "ops" || first.Reason != "provider down" || time.Since(first.At) > time.Minute {
			t.Errorf("PauseQueue = %+v", first)
		}
		again, already, err := c.PauseQueue(ctx, "emails", &cairnq.PauseOptions{Reason: "again"})
		if err != nil || !already || *again != *first {
			t.Errorf("PauseQueue of a paused queue = %+v, %v, %v; want the first pause %+v, already", again, already, err, first)
		}
		alpha, _, err := c.PauseQueue(ctx, "alpha", nil)
		if err != nil {
			t.Fatal(err)
		}
		host, _ := os.Hostname()
		if want := fmt.Sprintf("%s:%d", host, os.Getpid()); alpha.By != want {
			t.Errorf("default By = %q, want %q", alpha.By, want)
		}
		got, err := c.PausedQueues(ctx)
		if err != nil || len(got) != 2 || got[0] != *alpha || got[1] != *first {
			t.Errorf("PausedQueues = %+v, %v; want alpha's, then emails'", got, err)
		}
		lifted, err := c.ResumeQueue(ctx, "emails")
		if err != nil || lifted == nil || *lifted != *first {
			t.Errorf("ResumeQueue = %+v, %v; want the pause %+v", lifted, err, first)
		}
		if lifted, err := c.ResumeQueue(ctx, "emails"); err != nil || lifted != nil {
			t.Errorf("ResumeQueue of a queue not paused = %+v, %v; want nil, nil", lifted, err)
		}
		if got, err := c.PausedQueues(ctx); err != nil || len(got) != 1 || got[0].Queue != "alpha" {
			t.Errorf("PausedQueues after the resume = %+v, %v", got, err)
		}
	})
}

// TestPauseQueueRowFormat pins the cairnq_meta row another SDK would
// read (docs/operators.md), and that a row whose value does not read as
// a pause still pauses its queue.
func TestPauseQueueRowFormat(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tasks.db")
	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, _, err := c.PauseQueue(ctx, "emails", &cairnq.PauseOptions{By: "ops", Reason: "provider down"})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := sqlite3.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, _, err := conn.Prepare("SELECT key, value FROM cairnq_meta WHERE key LIKE 'cairnq:paused:%'")
	if err != nil {
		t.Fatal(err)
	}
	if !st.Step() {
		t.Fatalf("no pause row: %v", st.Err())
	}
	key, value := st.ColumnText(0), st.ColumnText(1)
	st.Close()
	if key != "cairnq:paused:emails" {
		t.Errorf("key = %q", key)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(value), &v); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"v": 1.0, "queue": "emails", "at_ms": float64(p.At.UnixMilli()), "by": "ops", "reason": "provider down"}
	if fmt.Sprint(v) != fmt.Sprint(want) {
		t.Errorf("value = %s, want %v", value, want)
	}
	execSQL(t, path, `INSERT INTO cairnq_meta (key, value) VALUES ('cairnq:paused:odd', 'not json')`)
	got, err := c.PausedQueues(ctx)
	if err != nil || len(got) != 2 || got[1] != (cairnq.QueuePause{Queue: "odd"}) {
		t.Errorf("PausedQueues with an unreadable row = %+v, %v; want emails' and odd's, bare", got, err)
	}
}

// TestFleetPauseStopsAnotherClientsWorker: a queue paused through one
// client stops a worker of another client on the database once it has
// read the pause, leaves its other queue running, and a Worker.Pause of
// the same queue outlives the fleet's resume.
func TestFleetPauseStopsAnotherClientsWorker(t *testing.T) {
	onBothBackendsTwice(t, fleetPauseTwoClients)
}

func fleetPauseTwoClients(t *testing.T, ops, workers *cairnq.Client) {
	ctx := context.Background()
	seen := make(chan string, 16)
	w := newWorker(t, workers, &cairnq.WorkerOptions{Queues: []string{"held", "open"},
		Logger: faulttest.PauseLog(func(line string) { seen <- line })})
	if err := w.Handle("job", func(context.Context, *cairnq.TaskContext) (any, error) { return nil, nil }, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ops.PauseQueue(ctx, "held", nil); err != nil {
		t.Fatal(err)
	}
	stop := startWorker(t, w)
	defer stop()
	// Read before the first claim: the worker never claims from it.
	if got := <-seen; got != "paused held" {
		t.Fatalf("the worker logged %q first, want its pause of held", got)
	}
	held, err := ops.Submit(ctx, "job", nil, &cairnq.SubmitOptions{Queue: "held"})
	if err != nil {
		t.Fatal(err)
	}
	open, err := ops.Submit(ctx, "job", nil, &cairnq.SubmitOptions{Queue: "open"})
	if err != nil {
		t.Fatal(err)
	}
	waitTask(t, ops, open.ID)
	if got, err := ops.Get(ctx, held.ID); err != nil || got.Status != cairnq.StatusQueued || got.Attempt != 0 {
		t.Fatalf("the paused queue's task = %+v, %v once the open queue's ran; want it queued, never claimed", got, err)
	}
	// Paused twice, resumed for the fleet: the worker's own pause holds.
	if err := w.Pause("held"); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.ResumeQueue(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	if got := <-seen; got != "resumed held" {
		t.Fatalf("the worker logged %q, want its resume of held", got)
	}
	again, err := ops.Submit(ctx, "job", nil, &cairnq.SubmitOptions{Queue: "open"})
	if err != nil {
		t.Fatal(err)
	}
	waitTask(t, ops, again.ID)
	if got, err := ops.Get(ctx, held.ID); err != nil || got.Status != cairnq.StatusQueued {
		t.Fatalf("the task of a queue the worker paused itself = %+v, %v; want it queued", got, err)
	}
	if err := w.Resume("held"); err != nil {
		t.Fatal(err)
	}
	waitTask(t, ops, held.ID)
}

// Pauses and resumes of one queue racing each other: each pause returns
// a pause of that queue in force when it wrote or met it, never an empty
// one (a resume between the write and a read after it once left none).
func TestPauseQueueRacingResumes(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Go(func() {
				for range 40 {
					if g%2 == 1 {
						if _, err := c.ResumeQueue(ctx, "emails"); err != nil {
							errs <- err
							return
						}
						continue
					}
					p, _, err := c.PauseQueue(ctx, "emails", &cairnq.PauseOptions{By: "ops"})
					if err == nil && (p == nil || p.Queue != "emails" || p.By != "ops" || p.At.IsZero()) {
						err = fmt.Errorf("PauseQueue returned %+v", p)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}
