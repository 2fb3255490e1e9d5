package faulttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// PoisonedValues submits good payloads from several goroutines with bad
// values among them (see poisonedValues), then checks that everything
// committed is there for a fresh client.
func PoisonedValues(t *testing.T, b Backend) {
	SkipInChild(t)
	t.Parallel()
	dsn := b.NewDB(t)
	// Open's cleanup closes it again: a no-op after the close the test
	// checks.
	good, bad := poisonedValues(t, b.Open(t, dsn))
	// Everything committed is there for a fresh client.
	st, err := b.Open(t, dsn).Stats(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := st[cairnq.DefaultQueue]; got != (cairnq.StatusCounts{Succeeded: good, Failed: bad}) {
		t.Errorf("fresh client: %+v, want %d succeeded and %d failed", got, good, bad)
	}
}

// The poisoned values, refused by Submit.
func poisonedPayloads() map[string]any {
	return map[string]any{
		// Pre-encoded: encoding/json takes seconds over 40 MB under -race.
		"a 40 MB payload":         json.RawMessage(`{"blob":"` + strings.Repeat("x", 40<<20) + `"}`),
		"a NUL in a Go string":    map[string]string{"s": "a\x00b"},
		`a \u0000 in raw JSON`:    json.RawMessage(`{"s":"a\u0000b"}`),
		"NaN":                     map[string]float64{"x": math.NaN()},
		"a NUL in a nested value": []any{1, map[string]any{"deep": []string{"ok", "bad\x00"}}},
	}
}

// The poisoned results, chosen by a poison.result task's payload.
func poisonedResult(kind string) any {
	switch kind {
	case "nul":
		return map[string]string{"s": "x\x00y"}
	case "raw-nul":
		return json.RawMessage(`{"s":"\u0000"}`)
	case "nan":
		return math.NaN()
	}
	return nil
}

// The kinds of poisoned result. A result over the size limit goes through
// the same check as a payload over it; under -race each 40 MB value costs
// seconds of CPU, so one (the payload) is enough.
var poisonedResultKinds = []string{"nul", "raw-nul", "nan"}

// poisonedValues runs a worker on c while eight goroutines submit good
// payloads and others, in the middle of that stream, submit the poisoned
// payloads and good tasks whose handler returns a poisoned result. Each
// poisoned payload fails with a typed error and writes nothing; every
// good submit, before, beside and after them, succeeds, and so does its
// task; a poisoned result fails its task for good as
// unserializable_result. It closes c (which must neither fail nor panic)
// and returns how many tasks succeeded and failed.
func poisonedValues(t *testing.T, c *cairnq.Client) (succeeded, failed int) {
	t.Helper()
	stop := startPoisonWorker(t, c)
	goodIDs, resultIDs, poisoned := submitAroundPoison(t, c)
	if t.Failed() {
		stop()
		closeNoPanic(t, c)
		t.FailNow()
	}
	checkPoisonedTasks(t, c, goodIDs, resultIDs)
	t.Logf("%d good submits around %d poisoned payloads and %d poisoned results", len(goodIDs), poisoned, len(resultIDs))

	stop()
	closeNoPanic(t, c)
	return len(goodIDs), len(resultIDs)
}

// startPoisonWorker starts a worker on c for the poison tasks: a
// poison.good task returns its payload, a poison.result task the poisoned
// result its payload names.
func startPoisonWorker(t *testing.T, c *cairnq.Client) (stop func()) {
	t.Helper()
	w := NewWorker(t, c, &cairnq.WorkerOptions{Concurrency: 8})
	if err := w.Handle("poison.good", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return tc.Payload(), nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("poison.result", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var kind string
		if err := tc.Decode(&kind); err != nil {
			return nil, cairnq.Permanent(err)
		}
		return poisonedResult(kind), nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	return StartWorker(t, w)
}

// submitAroundPoison submits the good payloads from eight goroutines and,
// once a quarter of them are in, the poisoned payloads and the
// poisoned-result tasks from others. It returns the good tasks (id ->
// payload), the poisoned-result tasks (id -> kind) and how many poisoned
// payloads it tried.
func submitAroundPoison(t *testing.T, c *cairnq.Client) (goodIDs, resultIDs map[string]string, poisoned int) {
	t.Helper()
	ctx := context.Background()
	const goodGoroutines, perGoroutine = 8, 10
	var (
		mu       sync.Mutex
		progress atomic.Int64 // good submits so far
		badDone  = make(chan struct{})
		wg       sync.WaitGroup
	)
	goodIDs = map[string]string{}
	resultIDs = map[string]string{}
	for g := range goodGoroutines {
		wg.Go(func() {
			// Each goroutine keeps going until the bad submits are over (up
			// to a cap, then it waits for them), so good ones run before,
			// beside and after them.
			after := 0 // good submits since the bad ones ended
			for n := 0; n < perGoroutine || after < 5; n++ {
				if n >= 2*perGoroutine && after == 0 {
					<-badDone
				}
				select {
				case <-badDone:
					after++
				default:
				}
				payload := fmt.Sprintf(`{"g":%d,"n":%d}`, g, n)
				task, err := c.Submit(ctx, "poison.good", json.RawMessage(payload), nil)
				if err != nil {
					t.Errorf("good submit g=%d n=%d: %v", g, n, err)
					return
				}
				progress.Add(1)
				mu.Lock()
				goodIDs[task.ID] = payload
				mu.Unlock()
			}
		})
	}
	var badWG sync.WaitGroup
	payloads := poisonedPayloads()
	for what, payload := range payloads {
		badWG.Go(func() {
			for progress.Load() < goodGoroutines*perGoroutine/4 {
				time.Sleep(time.Millisecond)
			}
			task, err := c.Submit(ctx, "poison.good", payload, nil)
			checkPoisonedSubmit(t, what, task, err)
		})
	}
	for _, kind := range poisonedResultKinds {
		badWG.Go(func() {
			for progress.Load() < goodGoroutines*perGoroutine/4 {
				time.Sleep(time.Millisecond)
			}
			task, err := c.Submit(ctx, "poison.result", kind, &cairnq.SubmitOptions{MaxAttempts: 3})
			if err != nil {
				t.Errorf("submit of a %s-result task: %v", kind, err)
				return
			}
			mu.Lock()
			resultIDs[task.ID] = kind
			mu.Unlock()
		})
	}
	badWG.Wait()
	close(badDone)
	wg.Wait()
	return goodIDs, resultIDs, len(payloads)
}

// checkPoisonedSubmit checks what the submit of a poisoned payload (what
// describes it) returned: a typed error, and no task.
func checkPoisonedSubmit(t *testing.T, what string, task *cairnq.Task, err error) {
	var se *cairnq.SerializationError
	switch {
	case err == nil:
		t.Errorf("submit of %s: succeeded (task %s), want a typed error", what, task.ID)
	case !errors.Is(err, cairnq.ErrInvalidArgument) && !errors.As(err, &se):
		t.Errorf("submit of %s: %v (%T), want ErrInvalidArgument or a *SerializationError", what, err, err)
	case task != nil:
		t.Errorf("submit of %s: error %v with a task", what, err)
	}
}

// checkPoisonedTasks waits for the tasks submitAroundPoison submitted and
// checks how each ended: a poisoned result failed for good, a good task
// succeeded with its payload, and the stats count nothing else.
func checkPoisonedTasks(t *testing.T, c *cairnq.Client, goodIDs, resultIDs map[string]string) {
	t.Helper()
	for id, kind := range resultIDs {
		task := WaitTask(t, c, id)
		if task.Status != cairnq.StatusFailed || task.Error == nil || task.Error.Code != "unserializable_result" ||
			task.Error.Retryable || task.Attempt != 1 || task.Result != nil {
			t.Errorf("task returning a %s result: status %s attempt %d error %+v result %.80s, want failed for good on attempt 1 as unserializable_result",
				kind, task.Status, task.Attempt, task.Error, task.Result)
		}
	}
	for id, payload := range goodIDs {
		task := WaitTask(t, c, id)
		if task.Status != cairnq.StatusSucceeded || !SameJSON(task.Result, payload) {
			t.Errorf("good task %s: %s with result %s, want succeeded with %s", id, task.Status, task.Result, payload)
		}
	}
	st, err := c.Stats(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	want := cairnq.StatusCounts{Succeeded: len(goodIDs), Failed: len(resultIDs)}
	if got := st[cairnq.DefaultQueue]; got != want || len(st) != 1 {
		t.Errorf("stats %+v, want only %+v: a poisoned submit wrote a row", st, want)
	}
}

// closeNoPanic closes c, failing t if Close fails or panics.
func closeNoPanic(t *testing.T, c *cairnq.Client) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("Close panicked: %v", p)
		}
	}()
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
