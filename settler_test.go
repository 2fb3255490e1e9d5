package cairnq_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	cairnq "github.com/cairnq/cairnq-go"
)

// On Postgres the calls of a draw that succeed hand their completions to
// the worker's completer, which writes them together; each task still gets
// its own outcome: one taken over by another worker meanwhile stays
// theirs (its context learns the lease is lost, and nothing is reported),
// one canceled meanwhile ends canceled, the rest succeed with their own
// results.
func TestHandedOverCompletionsKeepTheirOwnOutcomes(t *testing.T) {
	t.Parallel()
	c, dsn := openPostgresDSN(t, nil)
	ctx := context.Background()
	const n = 8
	var (
		mu       sync.Mutex
		reported []string
		tcs      = map[string]*cairnq.TaskContext{}
	)
	w := newWorker(t, c, &cairnq.WorkerOptions{
		Concurrency: n, PollInterval: time.Minute,
		OnError: func(err error, phase cairnq.ErrorPhase, taskID string) {
			mu.Lock()
			reported = append(reported, fmt.Sprintf("%s %s: %v", phase, taskID, err))
			mu.Unlock()
		},
	})
	started := make(chan struct{}, n)
	release := make(chan struct{})
	w.Handle("job", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		mu.Lock()
		tcs[tc.ID()] = tc
		mu.Unlock()
		started <- struct{}{}
		<-release // past a cancel request too: the handler finishes its work
		return map[string]string{"id": tc.ID()}, nil
	}, nil)
	var ids []string
	for range n {
		task, err := c.Submit(ctx, "job", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	stop := startWorker(t, w)
	for range n {
		<-started
	}
	stolen, canceled := ids[2], ids[5]
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "UPDATE cairnq_tasks SET worker_id = 'thief' WHERE id = $1", stolen); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, canceled); err != nil {
		t.Fatal(err)
	}
	close(release)
	for _, id := range ids {
		if id == stolen {
			continue
		}
		waitTask(t, c, id)
	}
	stop() // Run returns once the completer has written everything
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		got, err := c.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var res struct{ ID string }
		_ = got.DecodeResult(&res)
		switch id {
		case stolen:
			if got.Status != cairnq.StatusRunning || got.WorkerID != "thief" {
				t.Errorf("stolen task: %s by %s, want still running for the thief", got.Status, got.WorkerID)
			}
			if !tcs[id].LostLease() {
				t.Error("the stolen task's context does not know its lease is lost")
			}
		case canceled:
			if got.Status != cairnq.StatusCanceled || got.Result != nil {
				t.Errorf("canceled task: %s with result %s", got.Status, got.Result)
			}
		default:
			if got.Status != cairnq.StatusSucceeded || res.ID != id {
				t.Errorf("task %s: %s with result %s", id, got.Status, got.Result)
			}
		}
	}
	if len(reported) > 0 {
		t.Errorf("reported: %v", reported)
	}
}
