package cairnq_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// answerLost is an executor whose first statement that match picks
// commits and then reports a dropped connection, as a network blip after
// COMMIT does; after, if set, runs first.
type answerLost struct {
	executor.Executor
	match   func(sql string, rows []executor.Row) bool
	after   func()
	dropped atomic.Bool
}

func (l *answerLost) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	rows, err := l.Executor.Query(ctx, sql, args...)
	if err == nil && l.match(sql, rows) && l.dropped.CompareAndSwap(false, true) {
		if l.after != nil {
			l.after()
		}
		return nil, fmt.Errorf("read tcp: %w", io.EOF)
	}
	return rows, err
}

// openAnswerLost opens a client on a fresh Postgres database through l.
func openAnswerLost(t *testing.T, l *answerLost) *cairnq.Client {
	t.Helper()
	ex, err := cairnqpgx.Open(t.Context(), pgtest.DSN(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	l.Executor = ex
	c, err := cairnq.OpenPostgres(t.Context(), l, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A step whose record committed but whose answer was lost is not run
// again: the store reads the row and finds the record.
func TestDurableStepRecordAnswerLost(t *testing.T) {
	c := openAnswerLost(t, &answerLost{match: func(sql string, rows []executor.Row) bool {
		return strings.Contains(sql, "{cairnq_durable,steps}") && strings.Contains(sql, "jsonb_build_array(") && len(rows) > 0
	}})
	var charges atomic.Int32
	w := newWorker(t, c, nil)
	w.Handle("pay", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return cairnq.Once(ctx, tc, "charge", func(context.Context) (string, error) {
			return fmt.Sprint("receipt-", charges.Add(1)), nil
		})
	}, nil)
	task, err := c.Submit(t.Context(), "pay", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := workUntil(t, c, w, task.ID)
	if done.Status != cairnq.StatusSucceeded || string(done.Result) != `"receipt-1"` || charges.Load() != 1 || done.Attempt != 1 {
		t.Fatalf("after a lost answer: %s %s on attempt %d, charged %d times; want receipt-1 on attempt 1, charged once",
			done.Status, done.Result, done.Attempt, charges.Load())
	}
}

// A park whose answer was lost while the same worker claimed the woken
// task again (the attempt number and worker id repeat after a park):
// the parked attempt writes nothing more, and the new one succeeds.
func TestDurableParkAnswerLost(t *testing.T) {
	var id atomic.Value
	l := &answerLost{match: func(sql string, rows []executor.Row) bool {
		return strings.Contains(sql, "GREATEST(attempt - 1, 0)") && len(rows) == 1
	}}
	c := openAnswerLost(t, l)
	l.after = func() {
		if err := c.SendEvent(context.Background(), id.Load().(string), "go", "ok"); err != nil {
			t.Error(err)
		}
		waitFor(t, "the woken task to be claimed again", func() bool {
			got, err := c.Get(context.Background(), id.Load().(string))
			return err == nil && got.Status == cairnq.StatusRunning
		})
	}
	var starts atomic.Int32
	w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 2, PollInterval: 10 * time.Millisecond})
	w.Handle("approve", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		starts.Add(1)
		ev, err := cairnq.WaitEvent[string](ctx, tc, "go", time.Hour)
		if err != nil {
			return nil, err
		}
		return cairnq.Once(ctx, tc, "ship", func(context.Context) (string, error) { return "shipped " + ev.Payload, nil })
	}, nil)
	task, err := c.Submit(t.Context(), "approve", nil, &cairnq.SubmitOptions{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	id.Store(task.ID)
	defer startWorker(t, w)()
	if got := waitTask(t, c, task.ID); got.Status != cairnq.StatusSucceeded || string(got.Result) != `"shipped ok"` || starts.Load() != 2 {
		t.Fatalf("after a park's lost answer: %s %s %+v after %d starts; want succeeded, shipped ok, after 2", got.Status, got.Result, got.Error, starts.Load())
	}
}
