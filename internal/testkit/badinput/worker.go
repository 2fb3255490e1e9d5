package badinput

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/cairnqtype"
)

// newWorker is a row calling NewWorker with o.
func newWorker(o cairnq.WorkerOptions) func(context.Context, *Env) (Outcome, error) {
	return call(func(ctx context.Context, e *Env) error {
		_, err := cairnq.NewWorker(e.C, &o)
		return err
	})
}

// inHandler is a row that submits a workerTask, runs a worker until the
// task ends, and makes act's call from inside the handler. The handler
// reads the task back right after the call, so the row can tell what the
// call wrote before the settlement overwrites progress.
func inHandler(act func(ctx context.Context, tc *cairnq.TaskContext) error) func(context.Context, *Env) (Outcome, error) {
	return func(ctx context.Context, e *Env) (Outcome, error) {
		t, err := e.C.Submit(ctx, workerTask, map[string]any{}, nil)
		if err != nil {
			return Outcome{}, setupErr(err)
		}
		w, err := cairnq.NewWorker(e.C, &cairnq.WorkerOptions{PollInterval: 20 * time.Millisecond})
		if err != nil {
			return Outcome{}, setupErr(err)
		}
		type result struct {
			err     error
			seen    *cairnq.Task
			readErr error
		}
		got := make(chan result, 1)
		err = w.Handle(workerTask, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			var r result
			r.err = act(ctx, tc)
			r.seen, r.readErr = e.C.Get(ctx, tc.ID())
			got <- r
			return nil, nil
		}, nil)
		if err != nil {
			return Outcome{}, setupErr(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		ran := make(chan error, 1)
		go func() { ran <- w.Run(runCtx) }()
		// A bound on a stuck worker, not a timing assertion: the task is
		// claimable at once.
		final, waitErr := e.C.Wait(ctx, t.ID, &cairnq.WaitOptions{Timeout: 2 * time.Minute})
		stop()
		if err := <-ran; err != nil {
			return Outcome{}, setupErr(fmt.Errorf("worker Run: %w", err))
		}
		if waitErr != nil {
			return Outcome{}, setupErr(fmt.Errorf("waiting for the handler's task: %w", waitErr))
		}
		// The handler sent before it returned, and the task ended only after.
		r := <-got
		if r.readErr != nil {
			return Outcome{}, setupErr(fmt.Errorf("reading the task in the handler: %w", r.readErr))
		}
		return Outcome{Task: final, Seen: r.seen}, r.err
	}
}

// untouchedByHandler checks that the refused call stored no progress and no
// message on the running task.
func untouchedByHandler(_ context.Context, _ *Env, out Outcome) error {
	if out.Seen == nil {
		return errors.New("the handler's read of its task is missing")
	}
	if out.Seen.Progress != nil || out.Seen.Message != nil {
		return fmt.Errorf("the refused call wrote to the running task: progress %v, message %v",
			derefFloat(out.Seen.Progress), derefString(out.Seen.Message))
	}
	return nil
}

func derefFloat(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func derefString(p *string) any {
	if p == nil {
		return nil
	}
	if len(*p) > 40 {
		return fmt.Sprintf("%q... (%d bytes)", (*p)[:40], len(*p))
	}
	return *p
}

// workerCases are the rows that make a worker with bad options, and the
// ones that write from inside a running handler.
func workerCases() []Case {
	msg64k := strings.Repeat("m", cairnqtype.MaxMessageBytes)

	return []Case{
		// ---- Worker options.
		{Name: "worker/lease/1ns", Want: Argument, Arg: "LeaseDuration",
			Call: newWorker(cairnq.WorkerOptions{LeaseDuration: time.Nanosecond})},
		{Name: "worker/lease/20ms", Want: Argument, Arg: "LeaseDuration",
			Call: newWorker(cairnq.WorkerOptions{LeaseDuration: 20 * time.Millisecond})},
		{Name: "worker/heartbeat/half the lease", Want: Argument, Arg: "HeartbeatInterval",
			Call: newWorker(cairnq.WorkerOptions{LeaseDuration: 10 * time.Second, HeartbeatInterval: 5 * time.Second})},
		{Name: "worker/heartbeat/the whole lease", Want: Argument, Arg: "HeartbeatInterval",
			Call: newWorker(cairnq.WorkerOptions{LeaseDuration: 10 * time.Second, HeartbeatInterval: 10 * time.Second})},
		{Name: "worker/poll interval/1ns", Want: Argument, Arg: "PollInterval",
			Call: newWorker(cairnq.WorkerOptions{PollInterval: time.Nanosecond})},

		// ---- Writes from a running handler.
		{Name: "task context/message/NUL", Want: Argument, Adds: 1, Check: untouchedByHandler,
			Call: inHandler(func(ctx context.Context, tc *cairnq.TaskContext) error { return tc.Message(ctx, "half\x00way") })},
		{Name: "task context/message/invalid UTF-8", Want: Argument, Adds: 1, Check: untouchedByHandler,
			Call: inHandler(func(ctx context.Context, tc *cairnq.TaskContext) error { return tc.Message(ctx, "caf\xe9") })},
		{Name: "task context/message/64 KiB + 1", Want: Argument, Adds: 1, Check: untouchedByHandler,
			Call: inHandler(func(ctx context.Context, tc *cairnq.TaskContext) error { return tc.Message(ctx, msg64k+"m") })},
		{Name: "task context/progress/NaN", Want: Argument, Adds: 1, Check: untouchedByHandler,
			Call: inHandler(func(ctx context.Context, tc *cairnq.TaskContext) error { return tc.Progress(ctx, math.NaN()) })},
		{Name: "task context/progress/+Inf", Want: Argument, Adds: 1, Check: untouchedByHandler,
			Call: inHandler(func(ctx context.Context, tc *cairnq.TaskContext) error { return tc.Progress(ctx, math.Inf(1)) })},
		{Name: "task context/report/64 KiB accepted", Want: Accepted, Adds: 1,
			Call: inHandler(func(ctx context.Context, tc *cairnq.TaskContext) error { return tc.Report(ctx, 0.5, msg64k) }),
			Check: func(_ context.Context, _ *Env, out Outcome) error {
				if s := out.Seen; s == nil || s.Message == nil || *s.Message != msg64k || s.Progress == nil || *s.Progress != 0.5 {
					return fmt.Errorf("the handler read back progress %v, message %v; want 0.5 and the 64 KiB message",
						derefFloat(s.Progress), derefString(s.Message))
				}
				return nil
			}},
	}
}
