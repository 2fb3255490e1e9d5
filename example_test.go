package cairnq_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// tempDB returns a database path in a fresh temporary directory; a real
// program passes its own path (any process on the host may share it).
func tempDB() (path string, cleanup func()) {
	dir, err := os.MkdirTemp("", "cairnq-example")
	if err != nil {
		log.Fatal(err)
	}
	return filepath.Join(dir, "tasks.db"), func() { os.RemoveAll(dir) }
}

// Submitting with a key deduplicates: while the first task is live, a
// second submit with the same key returns it instead of inserting.
func ExampleClient_Submit() {
	path, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()
	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	first, err := c.Submit(ctx, "render", map[string]int{"page": 1}, &cairnq.SubmitOptions{Key: "doc:1:render"})
	if err != nil {
		log.Fatal(err)
	}
	again, err := c.Submit(ctx, "render", map[string]int{"page": 1}, &cairnq.SubmitOptions{Key: "doc:1:render"})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Submit(ctx, "render", nil, &cairnq.SubmitOptions{Key: "doc:1:render", Conflict: cairnq.ConflictReject})
	fmt.Println(first.Status, again.ID == first.ID, errors.Is(err, cairnq.ErrAlreadyExists))
	// Output: queued true true
}

// A worker runs handlers by task name; Call submits and waits for the
// result. Here both run in one process; usually they are separate
// processes, possibly in different languages, sharing the database.
func ExampleWorker() {
	path, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()
	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Concurrency: 4})
	if err != nil {
		log.Fatal(err)
	}
	err = w.Handle("greet", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var in struct{ Name string }
		if err := tc.Decode(&in); err != nil {
			return nil, cairnq.Permanent(err) // a malformed payload will not improve on retry
		}
		return "hello, " + in.Name, nil
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()

	t, err := c.Call(ctx, "greet", map[string]string{"Name": "gopher"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	var greeting string
	if err := t.DecodeResult(&greeting); err != nil {
		log.Fatal(err)
	}
	fmt.Println(greeting)

	stop() // Run drains what is in flight, then returns
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output: hello, gopher
}

// A TaskDef binds a name to Go types on both ends; other SDKs use the name.
func ExampleTaskDef() {
	path, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()
	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	type Sum struct{ A, B int }
	add := cairnq.Define[Sum, int]("math.add")

	w, err := cairnq.NewWorker(c, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := add.Handle(w, func(ctx context.Context, tc *cairnq.TaskContext, p Sum) (int, error) {
		return p.A + p.B, nil
	}, nil); err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	defer func() { stop(); <-done }()

	n, err := add.Call(ctx, c, Sum{A: 2, B: 40}, nil)
	fmt.Println(n, err)
	// Output: 42 <nil>
}

// A wait that times out says why and leaves the task running.
func ExampleClient_Wait() {
	path, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()
	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	t, err := c.Submit(ctx, "nobody.serves.this", nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Wait(ctx, t.ID, &cairnq.WaitOptions{Timeout: 50 * time.Millisecond})
	var timeout *cairnq.TaskTimeoutError
	if errors.As(err, &timeout) {
		fmt.Println(timeout.TaskID() == t.ID, timeout.Task.Status)
	}
	// Output: true queued
}

// SQLiteOptions holds what only the SQLite backend has beside the shared
// Options; here a queue gated at two tasks turns a third submit away.
func ExampleOpen() {
	path, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()
	c, err := cairnq.Open(ctx, path, &cairnq.SQLiteOptions{
		FullSync: true, // commits survive a power cut
		Options: cairnq.Options{
			QueueDepths:  map[string]int{"mail": 2},
			MaxQueueWait: 10 * time.Millisecond,
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	mail := &cairnq.SubmitOptions{Queue: "mail"}
	for i := range 3 {
		_, err := c.Submit(ctx, "send", map[string]int{"n": i}, mail)
		fmt.Println(i, err == nil, errors.Is(err, cairnq.ErrQueueFull))
	}
	room, err := c.QueueHeadroom(ctx, "mail", 5)
	fmt.Println("room below 5:", room, err)
	// Output:
	// 0 true false
	// 1 true false
	// 2 false true
	// room below 5: 3 <nil>
}

// A handler chooses how its failure is recorded with a TaskError: the
// code is what every SDK reading the task sees, and Retryable false ends
// the task on this attempt whatever attempts remain.
func ExampleTaskError() {
	path, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()
	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	w, err := cairnq.NewWorker(c, nil)
	if err != nil {
		log.Fatal(err)
	}
	err = w.Handle("charge", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return nil, &cairnq.TaskError{Code: "card_declined", Message: "the card was declined", Retryable: false}
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	defer func() { stop(); <-done }()

	_, err = c.Call(ctx, "charge", map[string]int{"cents": 500}, nil)
	var failed *cairnq.TaskFailedError
	if errors.As(err, &failed) {
		fmt.Println(failed.Envelope.Code, failed.Task.Attempt, failed.Task.MaxAttempts)
	}
	// Output: card_declined 1 3
}

// A middleware runs around every handler call; this one turns a quota
// error into a non-retryable failure and counts the calls it saw.
func ExampleMiddleware() {
	path, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()
	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	errQuota := errors.New("over quota")
	var calls atomic.Int32
	permanentQuota := func(ctx context.Context, call *cairnq.Call, next func(context.Context) (any, error)) (any, error) {
		calls.Add(1)
		res, err := next(ctx)
		if errors.Is(err, errQuota) {
			return nil, cairnq.Permanent(err)
		}
		return res, err
	}
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Middleware: []cairnq.Middleware{permanentQuota}})
	if err != nil {
		log.Fatal(err)
	}
	w.Handle("upload", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return nil, errQuota
	}, nil)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()

	_, err = c.Call(ctx, "upload", nil, &cairnq.CallOptions{SubmitOptions: cairnq.SubmitOptions{MaxAttempts: 5}})
	var failed *cairnq.TaskFailedError
	if errors.As(err, &failed) {
		fmt.Println(failed.Envelope.Code, failed.Envelope.Retryable, calls.Load())
	}
	stop()
	<-done
	// Output: handler_error false 1
}

// A submit hook sees every submit before it is written: it may add
// metadata or refuse the submit.
func ExampleSubmitHook() {
	path, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()
	stamp := func(ctx context.Context, s *cairnq.Submission, next func(context.Context) (*cairnq.Task, error)) (*cairnq.Task, error) {
		if s.Options.Queue == "frozen" {
			return nil, fmt.Errorf("queue %q takes no new tasks", s.Options.Queue)
		}
		if err := s.SetMetadata("submitted_by", "billing-api"); err != nil {
			return nil, err
		}
		return next(ctx)
	}
	c, err := cairnq.Open(ctx, path, &cairnq.SQLiteOptions{Options: cairnq.Options{SubmitHooks: []cairnq.SubmitHook{stamp}}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	t, err := c.Submit(ctx, "invoice", nil, &cairnq.SubmitOptions{Metadata: map[string]any{"customer": 7}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(t.Metadata))
	_, err = c.Submit(ctx, "invoice", nil, &cairnq.SubmitOptions{Queue: "frozen"})
	fmt.Println(err)
	// Output:
	// {"customer":7,"submitted_by":"billing-api"}
	// queue "frozen" takes no new tasks
}

// A rate limit makes a worker start at most Rate tasks of a name per
// second; what it may not start yet stays queued, unleased.
func ExampleRateLimit() {
	path, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()
	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Concurrency: 8})
	if err != nil {
		log.Fatal(err)
	}
	err = w.Handle("send-email", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return "sent", nil
	}, &cairnq.HandlerOptions{RateLimit: &cairnq.RateLimit{Rate: 50, Burst: 5}}) // 50/s, 5 at once
	fmt.Println(err)
	err = w.Handle("bad", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return nil, nil },
		&cairnq.HandlerOptions{RateLimit: &cairnq.RateLimit{Rate: 0}})
	fmt.Println(errors.Is(err, cairnq.ErrInvalidArgument))

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	t, err := c.Call(ctx, "send-email", nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(t.Result))
	stop()
	<-done
	// Output:
	// <nil>
	// true
	// "sent"
}

// Pause stops a running worker claiming from a queue; calls in flight
// finish as usual, and Resume starts claiming again.
func ExampleWorker_Pause() {
	path, cleanup := tempDB()
	defer cleanup()
	ctx := context.Background()
	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Queues: []string{"reports"}, PollInterval: 10 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	w.Handle("report", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return "done", nil }, nil)
	if err := w.Pause("reports"); err != nil { // e.g. while the reporting database is migrated
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()

	t, err := c.Submit(ctx, "report", nil, &cairnq.SubmitOptions{Queue: "reports"})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Wait(ctx, t.ID, &cairnq.WaitOptions{Timeout: 100 * time.Millisecond})
	var timeout *cairnq.TaskTimeoutError
	fmt.Println(w.Paused(), errors.As(err, &timeout))

	if err := w.Resume("reports"); err != nil {
		log.Fatal(err)
	}
	t, err = c.Wait(ctx, t.ID, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.Status)
	stop()
	<-done
	// Output:
	// [reports] true
	// succeeded
}
