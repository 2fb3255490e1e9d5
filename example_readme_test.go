package cairnq_test

// The examples the README quotes, each body as the README shows it
// (TestReadme compares them), so every Go block of the README compiles and
// runs under go test.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// The README's Quick start: a client submits a task, a worker in the same
// program runs it, and the client waits for its result.
func Example_quickStart() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "cairnq-quickstart") // any directory will do
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	c, err := cairnq.Open(ctx, filepath.Join(dir, "tasks.db"), nil) // created if absent
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// The worker. Usually it is a process of its own (in Go, TypeScript or
	// Python) opening the same database; here it runs in this program.
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Concurrency: 4})
	if err != nil {
		log.Fatal(err)
	}
	err = w.Handle("render", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var p struct{ Page int }
		if err := tc.Decode(&p); err != nil {
			return nil, cairnq.Permanent(err) // a bad payload will not improve on retry
		}
		return map[string]int{"pages": p.Page + 1}, nil // stored as the task's result
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(runCtx) }() // claims until runCtx ends

	t, err := c.Submit(ctx, "render", map[string]any{"page": 1}, &cairnq.SubmitOptions{
		Key: "doc:1:render", // deduplicates: a second submit returns this task
	})
	if err != nil {
		log.Fatal(err)
	}
	done, err := c.Wait(ctx, t.ID, &cairnq.WaitOptions{Timeout: time.Minute})
	if err != nil {
		log.Fatal(err) // *cairnq.TaskTimeoutError: no worker finished it in time
	}
	if done.Status != cairnq.StatusSucceeded {
		log.Fatalf("render %s: %v", done.Status, done.Error)
	}
	var out struct{ Pages int }
	if err := done.DecodeResult(&out); err != nil {
		log.Fatal(err)
	}
	fmt.Println(done.Status, out.Pages)

	stop() // the worker finishes what it runs, then Run returns
	if err := <-stopped; err != nil {
		log.Fatal(err)
	}
	// Output: succeeded 2
}

// The README's Workers section: a task definition typed at both ends, a
// worker's and a handler's options, progress, and what a returned error
// does.
func Example_workers() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "cairnq-workers")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	c, err := cairnq.Open(ctx, filepath.Join(dir, "tasks.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	type Email struct{ To string }
	send := cairnq.Define[Email, string]("send-email") // other SDKs use the name

	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{
		Queues:      []string{"mail"},
		Concurrency: 8,                // handler calls at once
		MaxRun:      10 * time.Minute, // abandon a hung attempt (retryable handler_timeout)
	})
	if err != nil {
		log.Fatal(err)
	}
	err = send.Handle(w, func(ctx context.Context, tc *cairnq.TaskContext, e Email) (string, error) {
		if e.To == "" {
			return "", cairnq.Permanent(errors.New("no recipient")) // fails at once, no retry
		}
		if err := tc.Report(ctx, 0.5, "rendered"); err != nil { // progress, for whoever watches
			return "", err // any other error: retried with backoff while attempts remain
		}
		tenant, _ := tc.MetadataText("tenant") // as PerMetadataKey reads it
		return "sent to " + e.To + " for " + tenant, nil
	}, &cairnq.HandlerOptions{
		Concurrency: 2,                                                     // of this name at once, in this worker
		GlobalLimit: &cairnq.GlobalLimit{Max: 4, PerMetadataKey: "tenant"}, // per tenant, in every Go worker
	})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(runCtx) }()

	onMail := cairnq.SubmitOptions{Queue: "mail", Metadata: map[string]string{"tenant": "acme"}}
	batch := []cairnq.SubmitItem{{Name: "send-email", Payload: Email{To: "bob@example.com"}, Options: onMail}}
	if _, err := c.SubmitMany(ctx, batch); err != nil { // up to 10,000 tasks, one transaction
		log.Fatal(err)
	}
	msg, err := send.Call(ctx, c, Email{To: "ada@example.com"}, &cairnq.CallOptions{SubmitOptions: onMail})
	fmt.Println(msg, err) // Call: Submit, Wait, and a failed task as *cairnq.TaskFailedError

	stop()
	if err := <-stopped; err != nil {
		log.Fatal(err)
	}
	// Output: sent to ada@example.com for acme <nil>
}

// The README's Workflows: two steps that wait for nothing, and one that
// waits for both and reads their results.
func Example_workflows() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "cairnq-workflows")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	c, err := cairnq.Open(ctx, filepath.Join(dir, "tasks.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	count := cairnq.Define[string, int]("count-words")
	sum := cairnq.Define[[]string, int]("sum-counts")
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Concurrency: 4})
	if err != nil {
		log.Fatal(err)
	}
	err = errors.Join(
		count.Handle(w, func(ctx context.Context, tc *cairnq.TaskContext, text string) (int, error) {
			return len(strings.Fields(text)), nil
		}, nil),
		sum.Handle(w, func(ctx context.Context, tc *cairnq.TaskContext, steps []string) (int, error) {
			total := 0
			for _, s := range steps {
				n, err := cairnq.StepResult[int](ctx, tc, s) // a step it waited for
				if err != nil {
					return 0, err
				}
				total += n
			}
			return total, nil
		}, nil),
	)
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(runCtx) }()

	rec, err := c.CallWorkflow(ctx, []cairnq.WorkflowStep{
		count.Step("intro", "a durable task runtime", nil),
		count.Step("body", "steps wait for steps", nil),
		sum.Step("total", []string{"intro", "body"}, nil, "intro", "body"), // after both
	}, nil, nil)
	if err != nil {
		log.Fatal(err) // a step failed for good: *cairnq.TaskFailedError, type WorkflowFailed
	}
	total, err := c.GetByKey(ctx, cairnq.StepKey(rec.ID, "total"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.Status, string(total.Result))

	stop()
	if err := <-stopped; err != nil {
		log.Fatal(err)
	}
	// Output: succeeded 8
}

// The README's Durable steps: a handler whose steps run once across its
// attempts, which waits for an event and sleeps without holding a slot.
func Example_durableSteps() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "cairnq-durable")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	c, err := cairnq.Open(ctx, filepath.Join(dir, "tasks.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	w, err := cairnq.NewWorker(c, nil)
	if err != nil {
		log.Fatal(err)
	}
	w.Handle("checkout", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		cents, err := cairnq.Once(ctx, tc, "charge", func(ctx context.Context) (int, error) {
			return 4200, nil // charge the card: runs once, whatever happens after
		})
		if err != nil {
			return nil, err
		}
		ok, err := cairnq.WaitEvent[string](ctx, tc, "approval", 48*time.Hour)
		if err != nil || ok.TimedOut { // err: parked until the event or the timeout
			return "refunded", err
		}
		if err := cairnq.Sleep(ctx, tc, "cool-off", 100*time.Millisecond); err != nil {
			return nil, err
		}
		return fmt.Sprintf("charged %d, shipped, approved by %s", cents, ok.Payload), nil
	}, nil)
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(runCtx) }()

	t, err := c.Submit(ctx, "checkout", nil, &cairnq.SubmitOptions{Key: "order-42"})
	if err != nil {
		log.Fatal(err)
	}
	// From any process, before or after the wait begins (or `cairnq event send`):
	if err := c.SendEventByKey(ctx, "order-42", "approval", "ops"); err != nil {
		log.Fatal(err)
	}
	done, err := c.Wait(ctx, t.ID, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(done.Status, string(done.Result))
	stop()
	if err := <-stopped; err != nil {
		log.Fatal(err)
	}
	// Output: succeeded "charged 4200, shipped, approved by ops"
}
