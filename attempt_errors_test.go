package cairnq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// Every failed attempt's error is kept, the newest ten, oldest first,
// beside the metadata the task was submitted with; a copy of the task's
// metadata for a new task leaves them out.
func TestAttemptErrorsKept(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		task, err := c.Submit(ctx, "flaky", nil, &cairnq.SubmitOptions{MaxAttempts: 12, Metadata: map[string]string{"tenant": "acme"}})
		if err != nil {
			t.Fatal(err)
		}
		w := newWorker(t, c, &cairnq.WorkerOptions{RetryBackoff: cairnq.NoRetryBackoff})
		w.Handle("flaky", func(_ context.Context, tc *cairnq.TaskContext) (any, error) {
			if tc.Attempt() < 12 {
				return nil, fmt.Errorf("try %d: %s", tc.Attempt(), strings.Repeat("x", 1500))
			}
			return "ok", nil
		}, nil)
		done := workUntil(t, c, w, task.ID)
		if done.Status != cairnq.StatusSucceeded {
			t.Fatalf("the task: %s", done.Status)
		}
		got := cairnq.AttemptErrorsOf(done)
		if len(got) != 10 || got[0].Attempt != 2 || got[9].Attempt != 11 {
			t.Fatalf("AttemptErrorsOf: %d entries, first %+v", len(got), got)
		}
		for i, e := range got {
			if !strings.HasPrefix(e.Message, fmt.Sprintf("try %d: xxx", e.Attempt)) || len(e.Message) > 1000+len("…") ||
				e.Code == "" || e.At.IsZero() || time.Since(e.At) > time.Minute || i > 0 && e.At.Before(got[i-1].At) {
				t.Errorf("entry %d: %+v", i, e)
			}
		}
		var md map[string]any
		if err := json.Unmarshal(done.Metadata, &md); err != nil || md["tenant"] != "acme" {
			t.Errorf("the task's own metadata: %s", done.Metadata)
		}
	})
}

// A plain task's single failure is kept.
func TestAttemptErrorsOfOneFailure(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		plain, err := c.Submit(ctx, "boom", nil, &cairnq.SubmitOptions{MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		w := newWorker(t, c, nil)
		w.Handle("boom", func(context.Context, *cairnq.TaskContext) (any, error) { return nil, errors.New("boom") }, nil)
		got := workUntil(t, c, w, plain.ID)
		if es := cairnq.AttemptErrorsOf(got); got.Status != cairnq.StatusFailed || len(es) != 1 || es[0].Message != "boom" || es[0].Attempt != 1 {
			t.Errorf("the plain task: %s, %+v", got.Status, es)
		}
	})
}

// An error with a NUL in it fails the task as any other, on Postgres too,
// its entry cleaned as the error column is; entries of another writer's
// that are no objects are dropped rather than fail the write.
func TestAttemptErrorsOddInput(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		task, err := c.Submit(ctx, "boom", nil, &cairnq.SubmitOptions{MaxAttempts: 1,
			Metadata: map[string]any{"cairnq_errors": []any{"a string", 12, map[string]any{"attempt": 0, "message": "kept"}}}})
		if err != nil {
			t.Fatal(err)
		}
		w := newWorker(t, c, nil)
		w.Handle("boom", func(context.Context, *cairnq.TaskContext) (any, error) {
			return nil, &cairnq.TaskError{Code: "nul\x00code", Message: "a NUL \x00 inside"}
		}, nil)
		got := workUntil(t, c, w, task.ID)
		es := cairnq.AttemptErrorsOf(got)
		if got.Status != cairnq.StatusFailed || len(es) != 2 || es[0].Message != "kept" ||
			es[1].Message != "a NUL \uFFFD inside" || es[1].Code != "nul\uFFFDcode" {
			t.Errorf("the task: %s, entries %+v", got.Status, es)
		}
	})
}
