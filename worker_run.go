package cairnq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/internal/attempt"
	"github.com/cairnq/cairnq-go/internal/completer"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/maintenance"
	"github.com/cairnq/cairnq-go/internal/ratelimit"
)

// claimer is what the worker claims through: the store, and in tests a
// wrapper that watches what rides on the claims.
type claimer interface {
	Claims(ctx context.Context, r engine.ClaimRequest) (engine.Claimed, error)
	SettleCompletions(ctx context.Context, cs []*engine.Completion) error
}

// source is one draw of a poll's claim: one name that limits itself, or
// all the names that do not, sharing one draw.
type source struct {
	names    []string
	batch    int // tasks per call
	ownConc  int // this name's own cap on calls (0: none)
	resource string
	limiter  *ratelimit.Bucket   // the name's RateLimit, nil when it has none
	global   *engine.GlobalLimit // the name's GlobalLimit, nil when it has none
}

const claimErrorBackoff = 250 * time.Millisecond

// maxShutdownGrace caps how long Run waits, after canceling the contexts of
// calls still running at ShutdownTimeout, for their handlers to return.
const maxShutdownGrace = 5 * time.Second

// schedule derives the claim's draws from the registrations, once per Run.
func (w *Worker) schedule() (sources []source, names []string) {
	var shared []string
	for _, name := range w.order {
		r := w.regs[name]
		names = append(names, name)
		if r.ownDraw {
			src := source{names: []string{name}, batch: max(r.batch, 1), ownConc: r.opts.Concurrency, resource: r.resource}
			if r.opts.RateLimit != nil {
				src.limiter = ratelimit.New(r.opts.RateLimit.Rate, r.opts.RateLimit.Burst)
			}
			if g := r.opts.GlobalLimit; g != nil {
				src.global = &engine.GlobalLimit{Max: g.Max, PerKey: g.PerMetadataKey}
			}
			sources = append(sources, src)
		} else {
			shared = append(shared, name)
		}
	}
	if len(shared) > 0 {
		sources = append(sources, source{names: shared, batch: 1})
	}
	return sources, names
}

// Run claims and runs tasks until ctx ends (or Stop is called), then stops
// claiming and waits up to ShutdownTimeout for the calls in flight; past
// that it cancels their contexts and waits as long again (at most
// maxShutdownGrace, 5s) for them to return. A handler still running then
// ignores its context: Go cannot stop it, so Run reports it through
// OnError (PhaseShutdown) and returns without it; its task is left to its
// lease, and its writes through the TaskContext are refused. When Run
// returns, every other goroutine it started has ended: only such handlers
// go on, each on its call's goroutine (on a goroutine of its own with
// MaxRun), which ends when the handler returns.
func (w *Worker) Run(ctx context.Context) error {
	if err := checkCtx(ctx, "worker run"); err != nil {
		return err
	}
	w.regMu.Lock()
	if w.started.Load() {
		w.regMu.Unlock()
		return ErrWorkerStarted
	}
	w.started.Store(true)
	w.regMu.Unlock()
	if len(w.regs) == 0 {
		return &ArgumentError{Op: "worker", Arg: "handlers", Reason: "none registered"}
	}

	w.stopCh = make(chan struct{})
	w.stopped = make(chan struct{})
	defer close(w.stopped)
	w.slotFreed = make(chan struct{}, 1)
	w.giveUp = make(chan struct{})
	w.perName = map[string]int{}
	w.perResource = map[string]int{}
	w.live = map[string]*TaskContext{}

	// Handlers outlive ctx by up to ShutdownTimeout, so their contexts keep
	// ctx's values but not its cancellation.
	handlerCtx, abandon := context.WithCancelCause(context.WithoutCancel(ctx))
	defer abandon(nil)
	loopCtx, stopLoop := context.WithCancel(ctx)
	var watchWG sync.WaitGroup
	watchWG.Add(1)
	go func() { // turns Stop into the loop's cancellation
		defer watchWG.Done()
		select {
		case <-w.stopCh:
			stopLoop()
		case <-w.st.Lost(): // a busy worker may claim nothing for a while
			stopLoop()
		case <-loopCtx.Done():
		}
	}()

	var beatWG sync.WaitGroup
	beatCtx, stopBeat := context.WithCancel(context.WithoutCancel(ctx))
	beatWG.Add(1)
	go func() {
		defer beatWG.Done()
		w.heartbeat().Run(beatCtx)
	}()

	w.log.LogAttrs(ctx, slog.LevelInfo, logWorkerStarted, slog.String("worker_id", w.id),
		slog.Any("queues", w.queues), slog.Int("concurrency", w.conc), slog.Any("names", w.order))
	defer func() {
		w.log.LogAttrs(context.WithoutCancel(ctx), slog.LevelInfo, logWorkerStopped, slog.String("worker_id", w.id))
	}()
	w.comp = completer.New(w.completerConfig())
	w.comp.Start(handlerCtx)
	if w.opts.WorkflowSweep > 0 {
		sweep := &maintenance.WorkflowSweep{Store: w.st, WorkerID: w.id, Every: w.opts.WorkflowSweep,
			Unread: func(ctx context.Context, record, reason string) {
				w.log.LogAttrs(ctx, slog.LevelWarn, logWorkflowUnread, slog.String("workflow", record),
					slog.String("reason", reason), slog.String("worker_id", w.id))
			},
			Report: func(err error) { w.report(err, PhaseClaim, "") }}
		watchWG.Add(1)
		go func() {
			defer watchWG.Done()
			sweep.Run(loopCtx)
		}()
	}
	runErr := w.loop(loopCtx, handlerCtx)
	stopLoop()
	lost := w.st.LostErr()
	if lost != nil && runErr == nil {
		runErr = fmt.Errorf("cairnq: worker %s: %w", w.id, lost)
	}
	watchWG.Wait()

	w.drain(abandon, lost)
	stopBeat()
	beatWG.Wait()
	return runErr
}

// drain ends a Run once its loop has: it lets the calls running finish
// and their settlements commit, for at most ShutdownTimeout, then abandons
// what is left (abandonCalls) and, after a grace, stops waiting for
// handlers that ignore their contexts. A store that lost its file (lost,
// ErrDatabaseReplaced) can record nothing more: its calls are abandoned
// at once, their side effects to be repeated by whoever runs the tasks.
func (w *Worker) drain(abandon context.CancelCauseFunc, lost error) {
	wait, cause := w.opts.ShutdownTimeout, error(errShutDownLate)
	if lost != nil {
		wait, cause = 0, lost
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var grace *time.Timer
	var graceC <-chan time.Time
	gaveUp := false
	var settled <-chan struct{} // closed once the completer has stopped
	for {
		if settled == nil && w.callsOver(gaveUp) {
			// The completer goes last, when no call can hand it anything.
			settled = w.comp.Stop()
		}
		select {
		case <-settled:
			if grace != nil {
				grace.Stop()
			}
			return
		case <-w.slotFreed: // a call ended, or left its handler
		case <-timer.C:
			w.abandonCalls(abandon, cause)
			// Handlers that honour their context return now. One that
			// ignores it would hold Run (and the deployment's stop)
			// forever: after a grace, Run stops waiting for such handlers.
			grace = time.NewTimer(min(w.opts.ShutdownTimeout, maxShutdownGrace))
			graceC = grace.C
		case <-graceC:
			graceC = nil
			w.mu.Lock()
			left := slices.Collect(maps.Keys(w.live))
			w.mu.Unlock()
			for _, id := range left {
				w.report(fmt.Errorf("%w (task %s)", attempt.ErrAbandoned, id), PhaseShutdown, id)
			}
			gaveUp = true
			close(w.giveUp)
		}
	}
}

// errShutDownLate is why the calls still running at ShutdownTimeout are
// abandoned.
var errShutDownLate = errors.New("cairnq: worker shut down past its deadline")

// callsOver reports whether drain has no call left to wait for: none
// has not ended or, once it gave up on the handlers and they run on their
// calls' goroutines (MaxRun unset, see attempt), every call left still
// holds its slot, its handler running past its context's end. Such a call
// settles nothing when its handler returns at last: its contexts were
// flagged lost. With MaxRun a call holding its slot is waiting in attempt
// for w.giveUp, and ends once it sees it, so drain waits for it.
func (w *Worker) callsOver(gaveUp bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls == 0 || (gaveUp && w.opts.MaxRun <= 0 && w.calls == w.running)
}

// Stop ends a Run started elsewhere and waits for it to return, or for ctx.
func (w *Worker) Stop(ctx context.Context) error {
	if !w.started.Load() || w.stopCh == nil {
		return nil
	}
	w.stopOnce.Do(func() { close(w.stopCh) })
	select {
	case <-w.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// settlingCap bounds the calls whose handler returned but whose
// settlement has not committed yet, as a multiple of Concurrency. The
// claim loop keeps drawing while they settle, so the settlements of
// several draws share one commit; past the cap it waits, so a database
// that settles slowly slows claiming instead of piling up leases.
const settlingCap = 4

// loop claims and dispatches until ctx ends. It returns an error only when
// the store is closed under it, which no retry can mend.
func (w *Worker) loop(ctx, handlerCtx context.Context) error {
	sources, names := w.schedule()
	defer w.comp.EndClaims()
	busy := false                             // the last poll claimed something
	burst := false                            // it claimed several tasks
	leases := engine.LeaseLook{Every: w.poll} // a busy worker recovers as often as an idle one
	notified := false                         // this poll follows a submit's notification
	var quiet time.Duration                   // how long idle defers notifications (nextQuiet)
	for ctx.Err() == nil {
		free, room := w.waitForRoom(ctx)
		if !room {
			continue
		}
		if busy && free < w.conc {
			// After a poll that claimed, while calls run, let the ones
			// about to return free their slots first. A lone call's
			// settlement or successor does not wait, nor does the
			// first claim after an idle wait.
			free = w.gatherSlots(free)
		}
		w.claimMu.Lock() // until what this poll draws has started
		queues := w.activeQueues()
		if len(queues) == 0 {
			w.claimMu.Unlock()
			w.waitResumed(ctx)
			continue
		}
		// Subscribe before the probe, so a submit landing between an empty
		// probe and the idle sleep still ends the sleep. A poll after a
		// claim does not: it expects to claim again, and subscribing would
		// keep the cross-process watch reading this worker's own commits
		// (on SQLite; docs/benchmarks.md has its cost). When it claims
		// nothing, the next poll subscribes and probes again before
		// sleeping.
		subscribed := !busy
		var wake <-chan struct{}
		unsubscribe := func() {}
		if subscribed {
			wake, unsubscribe = w.st.SubscribeQueued(ctx, w.queues)
		}
		taken := w.comp.Take()
		drawn, got, err := w.claim(ctx, sources, names, queues, free,
			engine.ClaimRequest{Busy: busy, Settle: taken, Leases: &leases})
		w.comp.Answer(taken, err)
		if err == nil {
			quiet = w.nextQuiet(quiet, len(drawn) > 0, notified && !busy, got.Ran)
		}
		notified = false
		if err != nil {
			w.claimMu.Unlock()
			unsubscribe()
			if done, runErr := w.claimFailed(ctx, err); done {
				return runErr
			}
			continue
		}
		busy, burst = len(drawn) > 0, len(drawn) > 1
		w.mu.Lock()
		w.comp.OpenRide(burst || w.running > 0 || w.settling > 0)
		w.mu.Unlock()
		if !busy && !subscribed {
			w.claimMu.Unlock()
			continue // not subscribed: subscribe and probe, then sleep
		}
		if busy && got.Drained && subscribed && !w.comp.RidesClaims() {
			// The draw took all there was, under the subscription taken
			// before it: what is submitted after it wakes this loop. So the
			// loop sleeps now, as after an empty probe, rather than claim
			// again for nothing and probe after that (each idle process of
			// a fleet did both for every task it won). Not where
			// completions ride on the next claim (SQLite), which would
			// wait for it.
			for _, d := range drawn {
				w.start(handlerCtx, d)
			}
			w.claimMu.Unlock()
			busy, burst = false, false
			notified = w.idle(ctx, sources, wake, quiet, leases.Due())
			unsubscribe()
			continue
		}
		if !busy {
			w.claimMu.Unlock()
			notified = w.idle(ctx, sources, wake, quiet, leases.Due())
			unsubscribe()
			continue
		}
		unsubscribe()
		for _, d := range drawn {
			w.start(handlerCtx, d)
		}
		w.claimMu.Unlock()
	}
	return nil
}

// waitForRoom returns the free slots when the worker has room for another
// call. When it has none (at most Concurrency calls run, and at most
// settlingCap times as many more wait for their settlement to commit) it
// settles what waits or waits for a slot, and reports no room: the loop
// looks again.
func (w *Worker) waitForRoom(ctx context.Context) (free int, room bool) {
	w.mu.Lock()
	free = w.conc - w.running
	over := w.opts.MaxInFlightBytes > 0 && w.inFlightSize >= w.opts.MaxInFlightBytes
	full := (w.running > 0 && (free <= 0 || over)) || w.settling >= settlingCap*w.conc
	w.mu.Unlock()
	if !full {
		return free, true
	}
	if w.comp.SettleWaiting(ctx) { // no claim to carry them soon
		return 0, false
	}
	select {
	case <-w.slotFreed:
	case <-ctx.Done():
	}
	return 0, false
}

// waitResumed waits, every queue paused, for a queue to resume or a call
// to finish (its completion waits to be settled).
func (w *Worker) waitResumed(ctx context.Context) {
	w.comp.SettleWaiting(ctx)
	select {
	case <-w.resumed:
	case <-w.slotFreed:
	case <-ctx.Done():
	}
}

// claimFailed handles a failed claim. done reports whether the loop ends,
// with runErr as Run's result; otherwise it has reported the error (a busy
// database only at debug) and backed off.
func (w *Worker) claimFailed(ctx context.Context, err error) (done bool, runErr error) {
	if ctx.Err() != nil {
		return true, nil
	}
	if storeGone(err) {
		return true, fmt.Errorf("cairnq: worker %s: %w", w.id, err)
	}
	if errors.Is(err, ErrBusy) {
		w.log.LogAttrs(ctx, slog.LevelDebug, logBusyBackoff, slog.String("worker_id", w.id),
			slog.String("phase", string(PhaseClaim)), slog.Duration("backoff", claimErrorBackoff))
	} else {
		w.report(err, PhaseClaim, "")
	}
	sleepCtx(ctx, claimErrorBackoff)
	return false, nil
}

// idle sleeps until something may be claimable: a submit (wake), a
// rate limit's next start, a resumed queue, or the poll timer, which also
// drives lease recovery (and ends the sleep sooner when a look for an
// expired lease is due, lookDue); and a call finishing, where that can
// matter: its name's or resource's limit may have bound the last claim,
// or (SQLite) its completion waits for the next claim. A call finishing otherwise
// makes nothing claimable, and waking for it cost every idle process of
// a fleet a probe per task it ran.
//
// A submit that arrives less than quiet into the sleep ends it only once
// quiet has passed (see nextQuiet). It reports whether a submit ended it.
func (w *Worker) idle(ctx context.Context, sources []source, wake <-chan struct{}, quiet time.Duration, lookDue time.Time) (notified bool) {
	var slotFreed <-chan struct{}
	if w.comp.RidesClaims() || limited(sources) {
		slotFreed = w.slotFreed
	}
	timer := time.NewTimer(w.idleWait(sources, lookDue))
	defer timer.Stop()
	var hush <-chan time.Time // quiet's end, once a submit came during it
	start := time.Now()
	for {
		select {
		case <-wake:
			left := quiet - time.Since(start)
			if left <= 0 {
				return true
			}
			wake = nil
			t := time.NewTimer(left)
			defer t.Stop()
			hush = t.C
			continue
		case <-hush:
			return true
		case <-slotFreed:
		case <-w.resumed:
		case <-timer.C:
		case <-ctx.Done():
		}
		return false
	}
}

// nextQuiet is how long the next idle sleep defers a submit's wakeup,
// after a poll that drew (drew) or not, and that a notification started
// with a probe (notifiedProbe) whose answer was that there was work
// (opened). Every process of a fleet hears every submit, and each idle
// one probed on each: 32 probes a task for 32 processes
// (docs/benchmarks.md, "Fleet"). So a worker that loses a race (its
// probe saw work, its claim drew none: another process took it) defers
// the next wakeup, 5 ms at first and double that for each further
// notification that finds nothing, to no more than its poll interval
// (at most maxQuiet); a draw that claims anything makes it prompt
// again. The processes that win answer at once, the others no more often
// than their polls would, and nothing waits longer than a poll. An empty
// probe alone starts no deferral: a lone process hears its own retries
// and delayed submits, and nothing else is racing it.
func (w *Worker) nextQuiet(quiet time.Duration, drew, notifiedProbe, opened bool) time.Duration {
	switch {
	case drew:
		return 0
	case !notifiedProbe || (!opened && quiet == 0):
		return quiet
	}
	return min(max(2*quiet, firstQuiet), w.poll, maxQuiet)
}

// The bounds of nextQuiet: the deferral after a first lost race, and the
// most it grows to, whatever the poll interval.
const (
	firstQuiet = 5 * time.Millisecond
	maxQuiet   = time.Second
)

// limited reports whether a source's draw is capped by a name's own
// concurrency, a resource or a global limit, which a finishing call may
// lift.
func limited(sources []source) bool {
	for _, src := range sources {
		if src.ownConc > 0 || src.resource != "" || src.global != nil {
			return true
		}
	}
	return false
}
