package cairnq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/claimloop"
)

// rereadTimeout bounds the read of a call's tasks after it settled, which
// runs even when the caller's context has ended, to report what the call
// left behind.
const rereadTimeout = 10 * time.Second

// WorkOne claims at most one handler call's tasks, with the claim Run
// makes (same registrations, queues and per-name limits, free slots
// counted as one; the queues paused for the fleet read first), and runs that call on the caller's goroutine as Run
// would: TaskContext, middleware, MaxRun, settlement. Every lease it
// holds is renewed by the heartbeat while the call runs. It returns the
// call's tasks read back after settlement, or none when nothing was
// claimable. It is for tests: package cairnqtest's Work wraps it, and a
// test that drives a worker one call at a time can call it directly.
//
// A worker runs one WorkOne at a time and never during Run: both hold
// the started flag, so a Run (or another WorkOne) meanwhile fails with
// ErrWorkerStarted, as does Handle. Unlike Run, WorkOne clears the flag
// when it returns.
//
// When ctx ends while the handler runs, the call is abandoned at once, as
// Run abandons a call past its shutdown deadline: the contexts are
// flagged lease-lost and canceled, nothing more is settled, and the task
// is left running to its lease. WorkOne waits up to 5 s (Run's shutdown
// grace) for the handler to return, then returns the tasks as they stand with ctx's
// error.
func (w *Worker) WorkOne(ctx context.Context) ([]*Task, error) {
	if err := checkCtx(ctx, "worker work"); err != nil {
		return nil, err
	}
	w.regMu.Lock()
	if w.started.Load() {
		w.regMu.Unlock()
		return nil, fmt.Errorf("%w: it is running, or working another call", ErrWorkerStarted)
	}
	if len(w.regs) == 0 {
		w.regMu.Unlock()
		return nil, &ArgumentError{Op: "worker", Arg: "handlers", Reason: "none registered"}
	}
	w.started.Store(true)
	w.regMu.Unlock()
	defer func() {
		w.regMu.Lock()
		w.started.Store(false)
		w.regMu.Unlock()
	}()

	w.mu.Lock()
	w.live = map[string]*TaskContext{}
	w.mu.Unlock()
	w.giveUp = make(chan struct{})

	if err := w.pauseWatch(ctx).Read(ctx); err != nil {
		return nil, fmt.Errorf("cairnq: worker %s: read the fleet's paused queues: %w", w.id, err)
	}
	d, ok, err := w.claimOne(ctx)
	if err != nil {
		return nil, fmt.Errorf("cairnq: worker %s: claim: %w", w.id, err)
	}
	if !ok {
		return nil, nil
	}
	if ctx.Err() != nil {
		return w.handBack(ctx, d)
	}

	handlerCtx, abandon := context.WithCancelCause(context.WithoutCancel(ctx))
	defer abandon(nil)
	beatCtx, stopBeat := context.WithCancel(context.WithoutCancel(ctx))
	var bg sync.WaitGroup
	bg.Add(2)
	go func() {
		defer bg.Done()
		w.heartbeat().Run(beatCtx)
	}()
	callDone := make(chan struct{})
	go func() { // abandons the call when ctx ends first
		defer bg.Done()
		select {
		case <-callDone:
			return
		case <-ctx.Done():
		}
		w.abandonCalls(abandon, fmt.Errorf("cairnq: work call abandoned: %w", context.Cause(ctx)))
		grace := time.NewTimer(min(w.opts.ShutdownTimeout, maxShutdownGrace))
		defer grace.Stop()
		select {
		case <-callDone:
		case <-grace.C:
			close(w.giveUp) // runCall stops waiting for the handler
		}
	}()
	w.runCall(handlerCtx, w.regs[d.Tasks[0].Name], d.Tasks, func() {}, false)
	close(callDone)
	stopBeat()
	bg.Wait()

	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rereadTimeout)
	defer cancel()
	out := make([]*cairnqtype.Task, 0, len(d.Tasks))
	var readErr error
	for _, t := range d.Tasks {
		got, err := w.st.Get(rctx, t.ID)
		if err != nil {
			// Deleted meanwhile (a purge), or unreadable: the claimed
			// snapshot is all there is.
			if !errIsNotFound(err) {
				readErr = errors.Join(readErr, fmt.Errorf("cairnq: reading task %s after its call: %w", t.ID, err))
			}
			got = t
		}
		out = append(out, got)
	}
	if ctx.Err() != nil {
		return tasksOf(out), fmt.Errorf("cairnq: worker %s: call on %s abandoned: %w", w.id, d.Tasks[0].ID, context.Cause(ctx))
	}
	return tasksOf(out), readErr
}

// handBack returns to their queue, their attempts given back, the tasks
// of a claim that ctx's end overtook (the claim runs on past it:
// claimloop says why), rather than run a handler for a caller that has
// gone. A task it cannot hand back is left to its lease.
func (w *Worker) handBack(ctx context.Context, d claimloop.Call) ([]*Task, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rereadTimeout)
	defer cancel()
	out := make([]*cairnqtype.Task, 0, len(d.Tasks))
	var err error
	for _, t := range d.Tasks {
		back, serr := w.st.Snooze(rctx, t.ID, w.id, 0)
		if serr != nil || back == nil {
			err = errors.Join(err, serr)
			back = t
		}
		out = append(out, back)
	}
	return tasksOf(out), errors.Join(fmt.Errorf("cairnq: worker %s: claim overtaken by the caller's end, tasks handed back: %w",
		w.id, context.Cause(ctx)), err)
}

// claimOne makes the claim of one loop iteration with one free slot
// (claimloop.Loop.ClaimOne): rotated as Run rotates its draws, it
// probes first and recovers expired leases.
func (w *Worker) claimOne(ctx context.Context) (claimloop.Call, bool, error) {
	loop := w.claimLoop(nil, claimloop.NewSlots(w.conc, 0))
	c, ok, err := loop.ClaimOne(ctx)
	w.cursor = loop.Cursor
	return c, ok, err
}
