package cairnq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/internal/testkit/syncbuf"
)

// A handler returning a typed nil *TaskError, or an error whose methods
// panic, fails its task; the worker process survives and runs the next
// task. Before, the nil dereference happened outside the handler's
// recover and took the process down, and the next worker with it.
func TestHandlerErrorsThatPanicWhenReadFailTheTaskOnly(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 2})
	w.Handle("typed-nil", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var te *cairnq.TaskError
		return nil, te
	}, nil)
	w.Handle("panicky", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return nil, panickyError{}
	}, nil)
	w.Handle("fine", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return "ok", nil }, nil)
	startWorker(t, w)
	ctx := context.Background()
	one := &cairnq.SubmitOptions{MaxAttempts: 1}
	typedNil, _ := c.Submit(ctx, "typed-nil", nil, one)
	panicky, _ := c.Submit(ctx, "panicky", nil, one)
	fine, _ := c.Submit(ctx, "fine", nil, nil)
	if got := waitTask(t, c, typedNil.ID); got.Status != cairnq.StatusFailed || got.Error == nil || got.Error.Type != "TaskError" {
		t.Errorf("typed nil *TaskError: %s %+v, want failed with a TaskError envelope", got.Status, got.Error)
	}
	if got := waitTask(t, c, panicky.ID); got.Status != cairnq.StatusFailed || got.Error == nil ||
		got.Error.Code != "handler_panic" || !strings.Contains(got.Error.Message, "panicked when read") {
		t.Errorf("error whose Error panics: %s %+v, want failed with handler_panic", got.Status, got.Error)
	}
	if got := waitTask(t, c, fine.ID); got.Status != cairnq.StatusSucceeded {
		t.Errorf("the next task: %s, want succeeded", got.Status)
	}
}

type panickyError struct{}

func (panickyError) Error() string { panic("Error() itself panics") }

// Run returns after its context ends even when a handler ignores its
// context: past ShutdownTimeout and the grace after it, the call is
// reported (PhaseShutdown) and left behind. Before, Run never returned.
func TestRunReturnsWhenAHandlerIgnoresItsContext(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	var mu sync.Mutex
	var phases []cairnq.ErrorPhase
	w := newWorker(t, c, &cairnq.WorkerOptions{
		ShutdownTimeout: 50 * time.Millisecond,
		OnError: func(err error, phase cairnq.ErrorPhase, taskID string) {
			mu.Lock()
			defer mu.Unlock()
			phases = append(phases, phase)
		},
	})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // lets the leaked handler end with the test
	started := make(chan string, 1)
	w.Handle("deaf", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		started <- tc.ID()
		<-release // ignores ctx
		return "too late", nil
	}, nil)
	task, err := c.Submit(context.Background(), "deaf", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	<-started
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(time.Minute): // a hang detector, not a timing assertion
		t.Fatal("Run did not return with a handler ignoring its context")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(phases) != 1 || phases[0] != cairnq.PhaseShutdown {
		t.Errorf("OnError phases %v, want one %q for the handler left behind", phases, cairnq.PhaseShutdown)
	}
	got, _ := c.Get(context.Background(), task.ID)
	if got.Status != cairnq.StatusRunning {
		t.Errorf("task of the abandoned handler is %s, want running until its lease lapses", got.Status)
	}
}

// With MaxRun, an attempt whose handler ignores its context is recorded
// as a handler_timeout; the handler's own late settlement is refused; and
// Run still returns when its context ends. Before, the abandoned handler
// held Run's drain forever.
func TestMaxRunWithADeafHandlerLetsRunReturn(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	w := newWorker(t, c, &cairnq.WorkerOptions{MaxRun: 50 * time.Millisecond, ShutdownTimeout: time.Second})
	release := make(chan struct{})
	late := make(chan error, 1)
	w.Handle("deaf", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		<-release // ignores ctx
		late <- tc.Succeed(context.Background(), "late")
		return nil, nil
	}, nil)
	task, _ := c.Submit(context.Background(), "deaf", nil, &cairnq.SubmitOptions{MaxAttempts: 1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	got := waitTask(t, c, task.ID)
	if got.Status != cairnq.StatusFailed || got.Error == nil || got.Error.Code != "handler_timeout" {
		t.Fatalf("after MaxRun: %s %+v", got.Status, got.Error)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(time.Minute): // a hang detector
		t.Fatal("Run did not return after MaxRun abandoned a handler")
	}
	close(release)
	if err := <-late; !errors.Is(err, cairnq.ErrLostLease) {
		t.Errorf("the abandoned handler's own Succeed: %v, want ErrLostLease", err)
	}
}

// Options that would make every task run twice, or poll in a busy loop,
// are refused at construction with an *ArgumentError naming the option.
func TestTimingOptionsThatGuaranteeTroubleAreRefused(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	for _, tc := range []struct {
		arg string
		o   cairnq.WorkerOptions
	}{
		{"LeaseDuration", cairnq.WorkerOptions{LeaseDuration: time.Nanosecond}},
		{"LeaseDuration", cairnq.WorkerOptions{LeaseDuration: 20 * time.Millisecond}},
		{"HeartbeatInterval", cairnq.WorkerOptions{HeartbeatInterval: 15 * time.Second}},
		{"HeartbeatInterval", cairnq.WorkerOptions{LeaseDuration: 2 * time.Second, HeartbeatInterval: 3 * time.Second}},
		{"HeartbeatInterval", cairnq.WorkerOptions{HeartbeatInterval: time.Millisecond}},
		{"PollInterval", cairnq.WorkerOptions{PollInterval: time.Nanosecond}},
		{"queue", cairnq.WorkerOptions{Queues: []string{"nul\x00"}}},
		{"ID", cairnq.WorkerOptions{ID: strings.Repeat("w", 256)}},
	} {
		_, err := cairnq.NewWorker(c, &tc.o)
		var ae *cairnq.ArgumentError
		if !errors.As(err, &ae) || ae.Arg != tc.arg {
			t.Errorf("%+v: %v, want an *ArgumentError about %s", tc.o, err, tc.arg)
		}
	}
	if _, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{LeaseDuration: time.Second, HeartbeatInterval: 400 * time.Millisecond}); err != nil {
		t.Errorf("the smallest sane lease and beat: %v", err)
	}
	for _, o := range []cairnq.WaitOptions{
		{Timeout: -time.Second}, {PollInterval: time.Nanosecond}, {MaxPollInterval: time.Microsecond}, {PollInterval: -1},
	} {
		task, _ := c.Submit(context.Background(), "x", nil, nil)
		if _, err := c.Wait(context.Background(), task.ID, &o); !errors.Is(err, cairnq.ErrInvalidArgument) {
			t.Errorf("Wait with %+v: %v, want ErrInvalidArgument", o, err)
		}
	}
	before := countTasks(t, c)
	if _, err := c.Call(context.Background(), "x", nil, &cairnq.CallOptions{WaitOptions: cairnq.WaitOptions{Timeout: -1}}); !errors.Is(err, cairnq.ErrInvalidArgument) {
		t.Errorf("Call with a negative timeout: %v, want ErrInvalidArgument", err)
	}
	if n := countTasks(t, c); n != before {
		t.Errorf("Call with bad wait options submitted a task")
	}
}

// A wait on a task that does not exist ends at once with ErrNotFound; a
// nil context is an error, not a panic.
func TestWaitOnMissingTaskAndNilContext(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	long := &cairnq.WaitOptions{Timeout: time.Hour}
	for _, id := range []string{cairnq.NewTaskID(), "not-an-id"} {
		if _, err := c.Wait(context.Background(), id, long); !errors.Is(err, cairnq.ErrNotFound) {
			t.Errorf("Wait(%q): %v, want ErrNotFound at once", id, err)
		}
	}
	var nilCtx context.Context
	if _, err := c.Submit(nilCtx, "x", nil, nil); !errors.Is(err, cairnq.ErrInvalidArgument) {
		t.Errorf("Submit(nil ctx): %v", err)
	}
	if _, err := c.Get(nilCtx, cairnq.NewTaskID()); !errors.Is(err, cairnq.ErrInvalidArgument) {
		t.Errorf("Get(nil ctx): %v", err)
	}
	if _, err := c.Wait(nilCtx, cairnq.NewTaskID(), nil); !errors.Is(err, cairnq.ErrInvalidArgument) {
		t.Errorf("Wait(nil ctx): %v", err)
	}
	w := newWorker(t, c, nil)
	w.Handle("x", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return nil, nil }, nil)
	if err := w.Run(nilCtx); !errors.Is(err, cairnq.ErrInvalidArgument) {
		t.Errorf("Run(nil ctx): %v", err)
	}
}

// Details JSON cannot hold are not dropped silently: the envelope says
// why they are missing. A message with a NUL is stored, cleaned.
func TestUnstorableErrorDetailsAreExplained(t *testing.T) {
	t.Parallel()
	c := openTemp(t, nil)
	w := newWorker(t, c, nil)
	w.Handle("x", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return nil, &cairnq.TaskError{Message: "bad\x00news", Details: map[string]any{"f": func() {}}}
	}, nil)
	startWorker(t, w)
	task, _ := c.Submit(context.Background(), "x", nil, nil)
	got := waitTask(t, c, task.ID)
	if got.Status != cairnq.StatusFailed || got.Error == nil {
		t.Fatalf("%s %+v", got.Status, got.Error)
	}
	if why, _ := got.Error.Details["details_error"].(string); !strings.Contains(why, "not stored") {
		t.Errorf("details %v, want a details_error saying why they were not stored", got.Error.Details)
	}
	if got.Error.Message != "bad\uFFFDnews" {
		t.Errorf("message %q, want the NUL replaced", got.Error.Message)
	}
}

// Open refuses to add cairnq's tables to another application's SQLite
// file unless told to, and leaves the file as it was.
func TestOpenRefusesAnotherApplicationsDatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "app.db")
	execSQL(t, path, "CREATE TABLE users (id integer primary key, name text)")
	if _, err := cairnq.Open(context.Background(), path, nil); !errors.Is(err, cairnq.ErrForeignDatabase) {
		t.Fatalf("Open on another application's file: %v, want ErrForeignDatabase", err)
	}
	if n := tableCount(t, path, "cairnq_%"); n != 0 {
		t.Fatalf("the refused file gained %d cairnq tables", n)
	}
	c, err := cairnq.Open(context.Background(), path, &cairnq.SQLiteOptions{AllowOtherTables: true})
	if err != nil {
		t.Fatalf("Open with AllowOtherTables: %v", err)
	}
	c.Close()
	// Once cairnq's tables are there, no option is needed any more.
	c, err = cairnq.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	c.Close()
}

// A database whose schema_version is newer than this SDK's opens (same
// protocol major), with a warning in the log.
func TestNewerSchemaVersionIsWarnedAbout(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tasks.db")
	c, err := cairnq.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	execSQL(t, path, "UPDATE cairnq_meta SET value = '99' WHERE key = 'schema_version'")
	var buf syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	c, err = cairnq.Open(context.Background(), path, &cairnq.SQLiteOptions{Options: cairnq.Options{Logger: log}})
	if err != nil {
		t.Fatalf("opening a newer schema of the same protocol: %v", err)
	}
	c.Close()
	if !strings.Contains(buf.String(), "schema_version=99") {
		t.Errorf("log %q, want a warning naming schema_version 99", buf.String())
	}
}

// A result whose MarshalJSON panics is the handler's value running
// outside the handler's recover, when the worker encodes it to settle the
// task (on Postgres, as it hands the completion to the completer): the
// panic is reported and the task left to its lease, and the worker goes
// on with the next task.
func TestResultsThatPanicWhenEncodedAreReported(t *testing.T) {
	t.Parallel()
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		var mu sync.Mutex
		var reported []string
		w := newWorker(t, c, &cairnq.WorkerOptions{
			OnError: func(err error, phase cairnq.ErrorPhase, taskID string) {
				mu.Lock()
				defer mu.Unlock()
				reported = append(reported, fmt.Sprintf("%s %s: %v", phase, taskID, err))
			},
		})
		w.Handle("poison", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			return panickyResult{}, nil
		}, nil)
		w.Handle("fine", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return "ok", nil }, nil)
		ctx := context.Background()
		poison, err := c.Submit(ctx, "poison", nil, &cairnq.SubmitOptions{MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		startWorker(t, w)
		waitFor(t, "the panic reported", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(reported) > 0
		})
		fine, err := c.Submit(ctx, "fine", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := waitTask(t, c, fine.ID); got.Status != cairnq.StatusSucceeded {
			t.Errorf("the next task: %s, want succeeded", got.Status)
		}
		if got, _ := c.Get(ctx, poison.ID); got.Status != cairnq.StatusRunning {
			t.Errorf("the poisoned task is %s, want running until its lease lapses", got.Status)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(reported) != 1 || !strings.Contains(reported[0], "panicked") || !strings.Contains(reported[0], poison.ID) {
			t.Errorf("reported %q, want one report of the panic for %s", reported, poison.ID)
		}
	})
}

type panickyResult struct{}

func (panickyResult) MarshalJSON() ([]byte, error) { panic("MarshalJSON itself panics") }
