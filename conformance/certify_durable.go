package conformance

// The durable check (durable): a durable handler's statements go through
// the executor: a step's checkpoint (durable_step), a sleep and a wait
// that park the task (snooze with its event), and an event delivered in
// the executor's transaction (durable_event), which wakes the task only
// once it commits.

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
)

// durable: a handler of a step, a short sleep and a wait runs its step
// once across the parks, and its wait returns the event a committed
// SendEventTx delivered, not the one a rolled-back one did.
func (s *suite) durable(r reporter) {
	e := s.setup(r)
	c := s.client(r, e)
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{
		Queues: []string{"certify"}, Concurrency: 2, PollInterval: 50 * time.Millisecond,
		LeaseDuration: 10 * time.Second, ShutdownTimeout: 5 * time.Second,
	})
	if err != nil {
		r.Fatalf("NewWorker: %v", err)
	}
	var charged atomic.Int32
	w.Handle("certify.durable", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		if _, err := cairnq.Once(ctx, tc, "charge", func(context.Context) (int32, error) { return charged.Add(1), nil }); err != nil {
			return nil, err
		}
		if err := cairnq.Sleep(ctx, tc, "nap", 50*time.Millisecond); err != nil {
			return nil, err
		}
		ev, err := cairnq.WaitEvent[string](ctx, tc, "go", time.Hour)
		return ev.Payload, err
	}, nil)
	stop := s.runWorker(e.ctx, w)
	defer func() {
		if err, returned := stop(); !returned {
			r.Errorf("%v", err)
		}
	}()

	task, err := c.Submit(e.ctx, "certify.durable", nil, &cairnq.SubmitOptions{Queue: "certify"})
	if err != nil {
		r.Fatalf("Submit: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := c.Get(e.ctx, task.ID)
		if err != nil {
			r.Fatalf("Get: %v", err)
		}
		if got.Status == cairnq.StatusQueued && got.RunAt.After(time.Now().Add(30*time.Minute)) {
			break // parked in its wait
		}
		if got.IsTerminal() || time.Now().After(deadline) {
			r.Fatalf("a durable handler on %s did not park in its wait within 30s: %s, due %v. Fix the failing named checks first (worker_run, tx_commits, jsonb_normalized)", s.name, got.Status, got.RunAt)
		}
		time.Sleep(20 * time.Millisecond)
	}
	errRollback := errors.New("certify: roll back")
	err = e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		if err := c.SendEventTx(ctx, sess, task.ID, "go", "rolled back"); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		r.Fatalf("SendEventTx inside Tx failed: %v", err)
	}
	err = e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		return c.SendEventTx(ctx, sess, task.ID, "go", "committed")
	})
	if err != nil {
		r.Fatalf("SendEventTx inside Tx failed: %v", err)
	}
	final, err := c.Wait(e.ctx, task.ID, &cairnq.WaitOptions{Timeout: 30 * time.Second})
	var out string
	if err != nil || final.Status != cairnq.StatusSucceeded || final.DecodeResult(&out) != nil || out != "committed" {
		r.Fatalf("the durable task after a committed event: %v, %v; want it succeeded with \"committed\"", final, err)
	}
	if n := charged.Load(); n != 1 || final.Attempt != 1 {
		r.Errorf("its step ran %d times over %d attempts; want once, on one attempt (a park spends none)", n, final.Attempt)
	}
}
