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
	// unsent, when it picks a statement, drops its first such statement
	// before it reaches the server: nothing commits.
	unsent func(sql string) bool
}

func (l *answerLost) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	if l.unsent != nil && l.unsent(sql) && l.dropped.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("write tcp: %w", io.ErrClosedPipe)
	}
	rows, err := l.Executor.Query(ctx, sql, args...)
	if err == nil && l.match != nil && l.match(sql, rows) && l.dropped.CompareAndSwap(false, true) {
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
	return openThrough(t, func(ex executor.Executor) executor.Executor {
		l.Executor = ex
		return l
	})
}

// openThrough opens a client on a fresh Postgres database through the
// executor wrap makes of a pgx one.
func openThrough(t *testing.T, wrap func(executor.Executor) executor.Executor) *cairnq.Client {
	t.Helper()
	ex, err := cairnqpgx.Open(t.Context(), pgtest.DSN(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	c, err := cairnq.OpenPostgres(t.Context(), wrap(ex), nil)
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
		// On the worker's goroutine: no t.Fatal here.
		if err := c.SendEvent(context.Background(), id.Load().(string), "go", "ok"); err != nil {
			t.Error(err)
			return
		}
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			got, err := c.Get(context.Background(), id.Load().(string))
			if err == nil && (got.Status == cairnq.StatusRunning || got.IsTerminal()) {
				return // claimed again (and maybe done already) while this attempt waits for its answer
			}
		}
		t.Error("the woken task was not claimed again within a minute")
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

// A step record that failed before it reached the server is written
// again within the lease: the step's function runs once, and the task
// succeeds on its first attempt.
func TestDurableStepRecordUnsent(t *testing.T) {
	c := openAnswerLost(t, &answerLost{unsent: func(sql string) bool {
		return strings.Contains(sql, "{cairnq_durable,steps}") && strings.Contains(sql, "jsonb_build_array(")
	}})
	var charges atomic.Int32
	w := newWorker(t, c, nil)
	w.Handle("pay", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return cairnq.Once(ctx, tc, "charge", func(context.Context) (int32, error) { return charges.Add(1), nil })
	}, nil)
	task, err := c.Submit(t.Context(), "pay", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if done := workUntil(t, c, w, task.ID); done.Status != cairnq.StatusSucceeded || done.Attempt != 1 || charges.Load() != 1 {
		t.Fatalf("after an unsent record: %s on attempt %d, charged %d times; want succeeded on attempt 1, charged once",
			done.Status, done.Attempt, charges.Load())
	}
}
