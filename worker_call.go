package cairnq

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/attempt"
	"github.com/cairnq/cairnq-go/internal/claimloop"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// start charges a call the claim loop drew to the budgets and runs it
// in its own goroutine. Its slot frees when the handler returns
// (claimloop.Slots.Release); a settlement handed over to the completer
// ends its share when written (settleRecorder.Settled).
func (w *Worker) start(handlerCtx context.Context, c claimloop.Call) {
	ch := w.slots.Begin(c)
	go func() {
		handedOver := false
		defer func() { w.slots.End(ch, handedOver) }()
		handedOver = w.runCall(handlerCtx, w.regs[c.Tasks[0].Name], c.Tasks, func() { w.slots.Release(ch) }, true)
	}()
}

// abandonCalls gives up on the calls in flight: abandon cancels the
// context of their settlements with cause, and every live call is
// flagged lease-lost (its writes through the TaskContext are refused) and
// its context canceled (endCalls). abandon goes first, so a call that is
// not live yet finds handlerCtx done once it is (runCall).
func (w *Worker) abandonCalls(abandon context.CancelCauseFunc, cause error) {
	abandon(cause)
	w.mu.Lock()
	live := slices.Collect(maps.Values(w.live))
	w.mu.Unlock()
	endCalls(live, cause)
}

// endCalls flags tcs lease-lost and cancels their calls' contexts with
// cause (a single task's context already canceled by markLost keeps the
// lost lease as its cause).
func endCalls(tcs []*TaskContext, cause error) {
	for _, tc := range tcs {
		tc.markLost()
		tc.endCall(cause)
	}
}

// signalSlot wakes a Run's claim loop if it waits for a free slot.
func (w *Worker) signalSlot() {
	if s := w.slots; s != nil {
		s.Signal()
	}
}

// failUnhandled fails tasks for good: no handler is registered for
// them. It is apart from runCall so that its Settlement does not widen
// the frame every call's goroutine runs in (see settleFailure).
func (w *Worker) failUnhandled(ctx context.Context, tasks []*cairnqtype.Task) {
	for _, t := range tasks {
		st := engine.Settlement{Task: t, WorkerID: w.id, Outcome: engine.Failed, Error: cairnqtype.ErrorEnvelope{
			Type: "NoHandler", Code: "no_handler", Message: "no handler registered for " + t.Name}}
		if _, err := w.st.Settle(ctx, st); err != nil && !errIsLostLease(err) {
			w.report(err, PhaseExecute, t.ID)
		}
	}
}

// runCall runs one handler call and settles whatever it left unsettled,
// or hands a lone task's success over to its completer, reporting
// handedOver: its context then stays live until the completer has
// written it. own says
// the call is Run's (see attempt).
func (w *Worker) runCall(handlerCtx context.Context, reg *registration, tasks []*cairnqtype.Task, release func(), own bool) (handedOver bool) {
	if reg == nil { // unreachable while claims are filtered by name
		w.failUnhandled(handlerCtx, tasks)
		return false
	}
	// Not a child of handlerCtx: every call registering with the one
	// parent at once serialized them on its lock (docs/benchmarks.md). A shutdown past its deadline ends the
	// calls' contexts through their TaskContexts instead (endCalls).
	callCtx, cancelCall := context.WithCancelCause(context.WithoutCancel(handlerCtx))
	defer cancelCall(nil)
	tcs := make([]*TaskContext, len(tasks))
	for i, t := range tasks {
		tc := &TaskContext{task: t, w: w, cancel: func(error) {}, endCall: cancelCall, comp: w.inline}
		if own {
			tc.comp = w.comp
		}
		if reg.batch == 0 {
			// A single task owns the call's context: losing its lease or a
			// cancel request ends the handler's work.
			tc.cancel = cancelCall
		}
		tcs[i] = tc
	}
	w.track(tcs, true)
	// Until attempt returns: a handler on this goroutine that calls
	// runtime.Goexit ends the call here.
	exited := true
	defer func() {
		if exited { // nothing is settled; writes through the contexts are refused
			endCalls(tcs, attempt.ErrExited)
		}
		if !handedOver {
			w.track(tcs, false)
		}
	}()
	if handlerCtx.Err() != nil { // the shutdown's pass over the live calls missed this one
		endCalls(tcs, context.Cause(handlerCtx))
	}

	o := w.attempt(callCtx, reg, tcs, own)
	err := o.Err
	exited = err == attempt.ErrExited
	release()
	if exited {
		return false
	}

	// Leftovers are settled on the worker's authority, so they bypass the
	// contexts' short-circuit, except where a context already knows its
	// lease is gone.
	var wg sync.WaitGroup
	for _, tc := range tcs {
		if tc.isSettled() || tc.stale.Load() || (tc.LostLease() && err != attempt.ErrTimeout) {
			continue
		}
		settle := func() bool { return w.settleLeftover(handlerCtx, tc, reg, err, o.Result, o.Results) }
		if len(tcs) == 1 {
			handedOver = settle()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			settle()
		}()
	}
	wg.Wait()
	return handedOver
}

// attempt runs the handler (internal/attempt), recovering a panic, and
// bounded by MaxRun when set. On timeout every context of the call is
// flagged lease-lost before the caller records the failure, so a
// handler that keeps running cannot settle anything behind the worker's
// back.
//
// With MaxRun set, or when the call is not Run's (own is false), the
// handler runs in a goroutine of its own, so that a handler ignoring its
// context holds up neither this call past MaxRun nor RunOnce past its
// shutdown (w.giveUp). Otherwise it runs on the call's own goroutine,
// sparing every call a goroutine and a hand-off (docs/benchmarks.md has
// what that saves); Run then stops waiting for such a call at its
// shutdown's end by its slot, still held (claimloop.Slots.Over).
func (w *Worker) attempt(ctx context.Context, reg *registration, tcs []*TaskContext, own bool) attempt.Outcome {
	if own && w.opts.MaxRun <= 0 {
		return w.guarded(ctx, reg, tcs)
	}
	return attempt.Run(attempt.Limits{MaxRun: w.opts.MaxRun, GiveUp: w.giveUp, TimedOut: func() {
		for _, tc := range tcs {
			tc.markLost()
		}
	}}, func() attempt.Outcome { return w.guarded(ctx, reg, tcs) })
}

// guarded calls the handler of reg through attempt.Guard.
func (w *Worker) guarded(ctx context.Context, reg *registration, tcs []*TaskContext) attempt.Outcome {
	return attempt.Guard(func() attempt.Outcome { return w.callHandler(ctx, reg, tcs) }, func() {
		for _, tc := range tcs {
			w.report(fmt.Errorf("%w (task %s)", attempt.ErrExited, tc.task.ID), PhaseExecute, tc.task.ID)
		}
	})
}

// callHandler calls the handler of reg through the worker's middleware.
func (w *Worker) callHandler(ctx context.Context, reg *registration, tcs []*TaskContext) (o attempt.Outcome) {
	if len(w.opts.Middleware) == 0 {
		if reg.batch > 0 {
			o.Results, o.Err = reg.batchFn(ctx, tcs)
		} else {
			o.Result, o.Err = reg.fn(ctx, tcs[0])
		}
		return o
	}
	call := &Call{Tasks: tcs, Batch: reg.batch > 0}
	handler := func(ctx context.Context) (any, error) {
		if reg.batch > 0 {
			return reg.batchFn(ctx, tcs)
		}
		return reg.fn(ctx, tcs[0])
	}
	result, err := chainMiddleware(w.opts.Middleware, call, handler)(ctx)
	o.Err = err
	if reg.batch == 0 {
		o.Result = result
	} else if m, ok := result.(map[string]any); ok {
		o.Results = m
	}
	return o
}
