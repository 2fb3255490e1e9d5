package cairnq_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// A running worker, idle or not, is listed by Client.Workers from
// another client on the database, with its host, pid, queues and last
// beat; its row goes when Run returns.
func TestWorkersListsIdleWorkers(t *testing.T) {
	onBothBackendsTwice(t, func(t *testing.T, a, b *cairnq.Client) {
		ctx := context.Background()
		w := newWorker(t, a, &cairnq.WorkerOptions{ID: "idle-1", Queues: []string{"mail"}, Concurrency: 3})
		w.Handle("email", func(context.Context, *cairnq.TaskContext) (any, error) { return nil, nil }, nil)
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(runCtx) }()
		defer func() { stop(); <-done }()

		var got *cairnq.WorkerInfo
		waitFor(t, "the worker's row", func() bool {
			ws, err := b.Workers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if i := slices.IndexFunc(ws, func(w cairnq.WorkerInfo) bool { return w.ID == "idle-1" }); i >= 0 {
				got = &ws[i]
			}
			return got != nil
		})
		host, _ := os.Hostname()
		if got.Host != host || got.PID != os.Getpid() || !slices.Equal(got.Queues, []string{"mail"}) ||
			!slices.Equal(got.Names, []string{"email"}) || got.Concurrency != 3 || got.Running != 0 ||
			got.Every != 10*time.Second || got.StartedAt.IsZero() || got.BeatAt.Before(got.StartedAt) || got.Silent(time.Now()) {
			t.Errorf("the idle worker as listed: %+v", *got)
		}
		if !got.Silent(got.BeatAt.Add(31 * time.Second)) {
			t.Error("a worker 31 s past its last beat, of 10 s, is not silent")
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		done <- nil // for the deferred wait
		ws, err := b.Workers(ctx)
		if err != nil || len(ws) != 0 {
			t.Errorf("Workers after Run returned = %+v, %v; want none", ws, err)
		}
	})
}

// A worker's row is in the documented format, so another SDK could read
// it; a row silent for a day is deleted by the next worker to start, a
// row of an unknown format is listed by its id alone.
func TestWorkersRowFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	c, err := cairnq.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	execSQL(t, path, `INSERT INTO cairnq_meta (key, value) VALUES
		('cairnq:worker:old', '{"v":1,"id":"old","host":"gone-host","pid":7,"queues":["default"],"names":["x"],"concurrency":1,"running":0,"started_at_ms":1000,"beat_at_ms":2000,"every_ms":10000}'),
		('cairnq:worker:fresh', '{"v":1,"id":"fresh","host":"web-1","pid":42,"queues":["q"],"names":["n"],"concurrency":2,"running":1,"started_at_ms":`+
		strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10)+`,"beat_at_ms":`+strconv.FormatInt(time.Now().UnixMilli(), 10)+`,"every_ms":10000}'),
		('cairnq:worker:odd', 'not json')`)
	ws, err := c.Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 3 || ws[0].ID != "fresh" || ws[0].Host != "web-1" || ws[0].PID != 42 || ws[0].Running != 1 ||
		ws[1].ID != "odd" || ws[1].Host != "" || !ws[1].Silent(time.Now()) || ws[2].ID != "old" || !ws[2].Silent(time.Now()) {
		t.Fatalf("Workers = %+v", ws)
	}
	w := newWorker(t, c, &cairnq.WorkerOptions{ID: "new"})
	w.Handle("x", func(context.Context, *cairnq.TaskContext) (any, error) { return nil, nil }, nil)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	waitFor(t, "the day-old row deleted", func() bool {
		ws, err := c.Workers(context.Background())
		return err == nil && !slices.ContainsFunc(ws, func(w cairnq.WorkerInfo) bool { return w.ID == "old" }) &&
			slices.ContainsFunc(ws, func(w cairnq.WorkerInfo) bool { return w.ID == "new" })
	})
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
