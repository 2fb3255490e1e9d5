package cairnq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/internal/engine"
)

// drawFunc claims up to limit tasks named in names inside a claim session.
type drawFunc = func(names []string, limit int) ([]*engine.Task, error)

// claimer is what a worker's claim loop writes through: its store, or in
// tests a wrapper that watches what rides on the claims.
type claimer interface {
	ClaimWith(ctx context.Context, p engine.ClaimParams, h engine.ClaimHints) ([]*engine.Task, error)
	ClaimSession(ctx context.Context, p engine.ClaimParams, h engine.ClaimHints, single bool, plan func(draw drawFunc) error) (bool, error)
	SettleCompletions(ctx context.Context, cs []*engine.Completion) error
}

// source is one draw of a poll's claim: one name that limits itself, or
// all the names that do not, sharing one draw.
type source struct {
	names    []string
	batch    int // tasks per call
	ownConc  int // this name's own cap on calls (0: none)
	resource string
	limiter  *tokenBucket // the name's RateLimit, nil when it has none
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
				src.limiter = newTokenBucket(*r.opts.RateLimit)
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
		case <-loopCtx.Done():
		}
	}()

	var beatWG sync.WaitGroup
	beatCtx, stopBeat := context.WithCancel(context.WithoutCancel(ctx))
	beatWG.Add(1)
	go func() {
		defer beatWG.Done()
		w.heartbeatLoop(beatCtx)
	}()

	w.log.LogAttrs(ctx, slog.LevelInfo, logWorkerStarted, slog.String("worker_id", w.id),
		slog.Any("queues", w.queues), slog.Int("concurrency", w.conc), slog.Any("names", w.order))
	defer func() {
		w.log.LogAttrs(context.WithoutCancel(ctx), slog.LevelInfo, logWorkerStopped, slog.String("worker_id", w.id))
	}()
	if !w.st.SettleOnClaim() {
		w.settler = w.startSettler(handlerCtx)
	}
	runErr := w.loop(loopCtx, handlerCtx)
	stopLoop()
	watchWG.Wait()

	w.drain(abandon)
	stopBeat()
	beatWG.Wait()
	return runErr
}

// drain ends a Run once its loop has: it lets the calls running finish
// and their settlements commit, for at most ShutdownTimeout, then abandons
// what is left (abandonCalls) and, after a grace, stops waiting for
// handlers that ignore their contexts.
func (w *Worker) drain(abandon context.CancelCauseFunc) {
	timer := time.NewTimer(w.opts.ShutdownTimeout)
	defer timer.Stop()
	var grace *time.Timer
	var graceC <-chan time.Time
	gaveUp := false
	var settled <-chan struct{} // closed once the settler has stopped
	for {
		if settled == nil && w.callsOver(gaveUp) {
			// The settler goes last, when no call can hand it anything.
			settled = w.stopSettler()
		}
		select {
		case <-settled:
			if grace != nil {
				grace.Stop()
			}
			return
		case <-w.slotFreed: // a call ended, or left its handler
		case <-timer.C:
			w.abandonCalls(abandon, errors.New("cairnq: worker shut down past its deadline"))
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
				w.report(fmt.Errorf("%w (task %s)", errAbandoned, id), PhaseShutdown, id)
			}
			gaveUp = true
			close(w.giveUp)
		}
	}
}

// stopSettler stops w's settler and returns a channel closed once it has
// ended: at once on SQLite, which has none.
func (w *Worker) stopSettler() <-chan struct{} {
	if w.settler != nil {
		return w.settler.stop()
	}
	done := make(chan struct{})
	close(done)
	return done
}

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
	w.rideStart()
	defer w.rideEnd()
	busy := false  // the last poll claimed something
	burst := false // it claimed several tasks
	// When leases were last recovered. A busy worker claims many times a
	// second; recovering once a poll interval is as often as an idle one.
	var recoveredAt time.Time
	for ctx.Err() == nil {
		w.mu.Lock()
		free := w.conc - w.running
		over := w.opts.MaxInFlightBytes > 0 && w.inFlightSize >= w.opts.MaxInFlightBytes
		// At most Concurrency calls run, and at most settlingCap times as
		// many more wait for their settlement to commit.
		full := (w.running > 0 && (free <= 0 || over)) || w.settling >= settlingCap*w.conc
		w.mu.Unlock()
		if full {
			if w.settlePending(ctx) { // no claim to carry them soon
				continue
			}
			select {
			case <-w.slotFreed:
			case <-ctx.Done():
			}
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
			w.settlePending(ctx)
			select {
			case <-w.resumed:
			case <-w.slotFreed: // a call finished: its completion waits
			case <-ctx.Done():
			}
			continue
		}
		// Subscribe before the probe, so a submit landing between an empty
		// probe and the idle sleep still ends the sleep. A poll after a
		// claim does not: it expects to claim again, and subscribing would
		// keep the cross-process watch reading this worker's own commits
		// (on SQLite a burn-down measured ~7% for it). When it claims
		// nothing, the next poll subscribes and probes again before
		// sleeping.
		subscribed := !busy
		var wake <-chan struct{}
		unsubscribe := func() {}
		if subscribed {
			wake, unsubscribe = w.st.SubscribeQueued(ctx, w.queues)
		}
		skipRecover := busy && time.Since(recoveredAt) < w.poll
		taken := w.ride.Take()
		hints := engine.ClaimHints{SkipProbe: busy, SkipRecover: skipRecover, Settle: taken}
		drawn, ran, err := w.claim(ctx, sources, names, queues, free, hints)
		engine.Answer(taken, err)
		// Leases were recovered, or the probe saw none expired.
		recovered := ran && !skipRecover
		if err != nil {
			w.claimMu.Unlock()
			unsubscribe()
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, engine.ErrClosed) {
				return fmt.Errorf("cairnq: worker %s: %w", w.id, err)
			}
			if errors.Is(err, ErrBusy) {
				w.log.LogAttrs(ctx, slog.LevelDebug, logBusyBackoff, slog.String("worker_id", w.id),
					slog.String("phase", string(PhaseClaim)), slog.Duration("backoff", claimErrorBackoff))
			} else {
				w.report(err, PhaseClaim, "")
			}
			sleepCtx(ctx, claimErrorBackoff)
			continue
		}
		if recovered {
			recoveredAt = time.Now()
		}
		busy, burst = len(drawn) > 0, len(drawn) > 1
		w.rideAfterClaim(burst)
		if !busy && !subscribed {
			w.claimMu.Unlock()
			continue // not subscribed: subscribe and probe, then sleep
		}
		if !busy {
			w.claimMu.Unlock()
			// Idle until something may be claimable: a submit here, a call
			// finishing (its name's or resource's limit may have bound), a
			// rate limit's next start, a resumed queue, or the poll timer,
			// which also drives lease recovery.
			timer := time.NewTimer(w.idleWait(sources))
			select {
			case <-wake:
			case <-w.slotFreed:
			case <-w.resumed:
			case <-timer.C:
			case <-ctx.Done():
			}
			timer.Stop()
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

// gatherSlots lets calls that are about to return free their slots
// before the next claim, and returns the slots then free. The calls of
// one draw tend to finish together, and the next draw then takes all
// their slots in one statement instead of the first few: on SQLite a
// claim is a commit in the one writer, whatever it draws, and on
// Postgres a statement and a commit that cost the server CPU.
//
// The loop waits, yielding the processor and then blocking, until every
// slot is free, or until gatherGap passes without one freeing, or
// gatherMax in all. The blocking matters on Postgres, where client and
// server often share the cores: a wait that only yielded measured slower
// than none, its spinning taking CPU the server needed, while this one
// widened claims from ~49 tasks to ~60 and the burn-down by ~4%
// (docs/benchmarks.md).
func (w *Worker) gatherSlots(free int) int {
	freeNow := func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.conc - w.running
	}
	start := time.Now()
	last := start
	var timer *time.Timer
	for free < w.conc {
		runtime.Gosched()
		now := freeNow()
		t := time.Now()
		switch {
		case now > free:
			free, last = now, t
		case t.Sub(last) >= gatherGap:
			return free
		case t.Sub(last) >= gatherSpin:
			// Nothing freed for a while: block instead of yielding, so
			// that this P can go idle and take over calls queued on a P
			// whose thread the OS has stopped. A yielding goroutine is
			// always found runnable first, so the other P's queue is
			// never stolen from: traced under load, such calls waited out
			// stalls of up to 14 ms while the loop claimed a few slots at
			// a time.
			wait := min(gatherGap-t.Sub(last), gatherMax-t.Sub(start))
			if timer == nil {
				timer = time.NewTimer(wait)
				defer timer.Stop()
			} else {
				timer.Reset(wait)
			}
			select {
			case <-w.slotFreed:
			case <-timer.C:
			}
		}
		if t.Sub(start) >= gatherMax {
			break
		}
	}
	return free
}

// The bounds of gatherSlots' wait: it yields the processor until
// gatherSpin passes without a slot freeing, then blocks until one frees,
// and ends once gatherGap passes without one, or after gatherMax in all.
const (
	gatherSpin = 20 * time.Microsecond
	gatherGap  = 100 * time.Microsecond
	gatherMax  = time.Millisecond
)

// claim makes one poll's claim on queues, spending at most free call
// slots: the draws in schedule order, rotated at every poll so one name's
// backlog cannot starve the rest. ran reports whether a claim statement
// ran (a draw every limit skipped runs none). The rate limits are charged
// for what it returns.
func (w *Worker) claim(ctx context.Context, sources []source, names, queues []string, free int, hints engine.ClaimHints) (drawn []dispatch, ran bool, err error) {
	start := w.cursor % len(sources)
	w.cursor = start + 1
	order := append(append([]source(nil), sources[start:]...), sources[:start]...)
	params := engine.ClaimParams{Queues: queues, Names: names, WorkerID: w.id, Lease: w.lease}
	if len(sources) == 1 {
		// One draw: Claim, which on Postgres is a single statement rather
		// than a transaction around one.
		err = w.plan(func(names []string, limit int) ([]*engine.Task, error) {
			p := params
			p.Names, p.Limit = names, limit
			ran = true
			return w.claims.ClaimWith(ctx, p, hints)
		}, order, free, &drawn)
		if err == nil && !ran && len(hints.Settle) > 0 {
			// Every limit skipped the draw: the settlements go alone.
			err = w.claims.SettleCompletions(ctx, hints.Settle)
		}
	} else {
		ran = true
		_, err = w.claims.ClaimSession(ctx, params, hints, false, func(draw drawFunc) error {
			drawn = drawn[:0] // a retried transaction starts over
			return w.plan(draw, order, free, &drawn)
		})
	}
	if err != nil {
		return nil, ran, err
	}
	now := time.Now()
	for _, d := range drawn {
		if d.src.limiter != nil {
			d.src.limiter.take(now, len(d.tasks))
		}
	}
	return drawn, ran, nil
}

// idleWait is how long an idle loop sleeps: the poll interval, or less
// when a rate-limited name may start a task sooner.
func (w *Worker) idleWait(sources []source) time.Duration {
	wait := w.poll
	now := time.Now()
	for _, src := range sources {
		if src.limiter != nil {
			if d := src.limiter.next(now); d > 0 {
				wait = min(wait, d)
			}
		}
	}
	return wait
}

// dispatch is one handler call a draw produced.
type dispatch struct {
	reg   *registration
	src   *source
	tasks []*Task
}

// plan spends the free call slots across the draws, each draw sized by
// what its own limits and the slots still free allow, inside the claim
// transaction: a budget divided up front would leave slots idle for names
// with nothing queued.
func (w *Worker) plan(draw drawFunc, order []source, free int, out *[]dispatch) error {
	taken := map[string]int{} // resource units drawn in this poll
	left := free
	for i := range order {
		src := &order[i]
		if left <= 0 {
			break
		}
		quota := min(w.sourceCalls(src, taken), left)
		if quota <= 0 {
			continue
		}
		limit := src.batch * quota
		if src.limiter != nil {
			// Spent after the claim commits (loop): a transaction retried
			// from the start must not pay twice.
			if limit = min(limit, src.limiter.available(time.Now())); limit <= 0 {
				continue
			}
		}
		rows, err := draw(src.names, limit)
		if err != nil {
			return err
		}
		calls := w.deliveries(src, rows)
		*out = append(*out, calls...)
		left -= len(calls)
		if src.resource != "" {
			taken[src.resource] += len(calls)
		}
	}
	return nil
}

// sourceCalls is the most calls a draw may start this poll: the tightest
// of its name's own cap, its resource's remaining capacity, and ClaimBatch
// converted to calls (never below one).
func (w *Worker) sourceCalls(src *source, taken map[string]int) int {
	limit := w.conc
	if w.opts.ClaimBatch > 0 {
		limit = min(limit, max(1, w.opts.ClaimBatch/src.batch))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if src.ownConc > 0 {
		limit = min(limit, src.ownConc-w.perName[src.names[0]])
	}
	if src.resource != "" {
		limit = min(limit, w.opts.Resources[src.resource]-w.perResource[src.resource]-taken[src.resource])
	}
	return limit
}

// deliveries groups a draw's rows into calls: one task per call, or up to
// the name's batch size.
func (w *Worker) deliveries(src *source, rows []*Task) []dispatch {
	byName := map[string][]*Task{}
	var names []string
	for _, t := range rows {
		if _, ok := byName[t.Name]; !ok {
			names = append(names, t.Name)
		}
		byName[t.Name] = append(byName[t.Name], t)
	}
	var out []dispatch
	for _, name := range names {
		group := byName[name]
		reg := w.regs[name]
		size := 1
		if reg != nil && reg.batch > 0 {
			size = reg.batch
		}
		for i := 0; i < len(group); i += size {
			out = append(out, dispatch{reg: reg, src: src, tasks: group[i:min(i+size, len(group))]})
		}
	}
	return out
}

// start charges a call to the budgets and runs it in its own goroutine.
func (w *Worker) start(handlerCtx context.Context, d dispatch) {
	var size int64
	for _, t := range d.tasks {
		size += int64(len(t.Payload))
	}
	w.mu.Lock()
	w.running++
	w.calls++
	w.inFlightSize += size
	if d.src.ownConc > 0 {
		w.perName[d.src.names[0]]++
	}
	if d.src.resource != "" {
		w.perResource[d.src.resource]++
	}
	w.mu.Unlock()
	go func() {
		// The call's slot (and its name's and resource's share) frees as
		// soon as the handler returns, not when its settlement commits:
		// settlements are grouped into shared commits, and holding the
		// slot through one would make claims and commits take turns. The
		// settling calls are bounded separately (see loop).
		var once sync.Once
		release := func() {
			once.Do(func() {
				w.mu.Lock()
				w.running--
				w.settling++
				w.inFlightSize -= size
				if d.src.ownConc > 0 {
					w.perName[d.src.names[0]]--
				}
				if d.src.resource != "" {
					w.perResource[d.src.resource]--
				}
				w.mu.Unlock()
				w.signalSlot()
			})
		}
		handedOver := false
		defer func() {
			release()
			w.mu.Lock()
			w.calls--
			if !handedOver { // else the settler ends its settling
				w.settling--
			}
			w.mu.Unlock()
			w.signalSlot()
		}()
		handedOver = w.runCall(handlerCtx, d, release, true)
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

// signalSlot wakes the claim loop if it waits for a free slot.
func (w *Worker) signalSlot() {
	select {
	case w.slotFreed <- struct{}{}:
	default:
	}
}

// errAttemptTimeout marks an attempt abandoned at MaxRun.
var errAttemptTimeout = errors.New("cairnq: attempt exceeded MaxRun")

// runCall runs one handler call and settles whatever it left unsettled,
// or hands a lone task's success to the settler, reporting handedOver:
// its context then stays live until the settler has written it. own says
// the call is Run's (see attempt).
func (w *Worker) runCall(handlerCtx context.Context, d dispatch, release func(), own bool) (handedOver bool) {
	if d.reg == nil { // unreachable while claims are filtered by name
		for _, t := range d.tasks {
			env := ErrorEnvelope{Type: "NoHandler", Code: "no_handler", Message: "no handler registered for " + t.Name}
			if _, err := w.st.Fail(handlerCtx, t.ID, w.id, env, false, 0); err != nil && !errIsLostLease(err) {
				w.report(err, PhaseExecute, t.ID)
			}
		}
		return false
	}
	// Not a child of handlerCtx: every call registering with the one
	// parent at once serialized them on its lock, a quarter of a no-op
	// call's own CPU in a burn-down. A shutdown past its deadline ends the
	// calls' contexts through their TaskContexts instead (endCalls).
	callCtx, cancelCall := context.WithCancelCause(context.WithoutCancel(handlerCtx))
	defer cancelCall(nil)
	tcs := make([]*TaskContext, len(d.tasks))
	for i, t := range d.tasks {
		tc := &TaskContext{task: t, w: w, cancel: func(error) {}, endCall: cancelCall}
		if d.reg.batch == 0 {
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
			endCalls(tcs, errHandlerExited)
		}
		if !handedOver {
			w.track(tcs, false)
		}
	}()
	if handlerCtx.Err() != nil { // the shutdown's pass over the live calls missed this one
		endCalls(tcs, context.Cause(handlerCtx))
	}

	result, results, err := w.attempt(callCtx, d.reg, tcs, own)
	exited = err == errHandlerExited
	release()
	if exited {
		return false
	}

	// Leftovers are settled on the worker's authority, so they bypass the
	// contexts' short-circuit, except where a context already knows its
	// lease is gone.
	var wg sync.WaitGroup
	for _, tc := range tcs {
		if tc.isSettled() || (tc.LostLease() && err != errAttemptTimeout) {
			continue
		}
		settle := func() bool { return w.settleLeftover(handlerCtx, tc, d.reg, err, result, results) }
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

// attempt runs the handler, recovering a panic, and bounded by MaxRun when
// set. On timeout every context of the call is flagged lease-lost before
// the caller records the failure, so a handler that keeps running cannot
// settle anything behind the worker's back.
//
// With MaxRun set, or when the call is not Run's (own is false), the
// handler runs in a goroutine of its own, so that a handler ignoring its
// context holds up neither this call past MaxRun nor RunOnce past its
// shutdown (w.giveUp): Go cannot stop it, but the worker need not wait.
// The goroutine ends when the handler returns; done is buffered for it.
// Otherwise it runs on the call's own goroutine, sparing every call a
// goroutine and a hand-off (a burn-down measured ~3% for it on either
// backend, docs/benchmarks.md); Run then stops waiting for such a call at
// its shutdown's end by its slot, still held (see callsOver).
func (w *Worker) attempt(ctx context.Context, reg *registration, tcs []*TaskContext, own bool) (result any, results map[string]any, err error) {
	if own && w.opts.MaxRun <= 0 {
		o := w.callHandler(ctx, reg, tcs)
		return o.result, o.results, o.err
	}
	done := make(chan handlerOutcome, 1)
	go func() {
		o := handlerOutcome{err: errHandlerExited} // unless callHandler returns
		defer func() { done <- o }()
		o = w.callHandler(ctx, reg, tcs)
	}()
	var timeout <-chan time.Time
	if w.opts.MaxRun > 0 {
		timer := time.NewTimer(w.opts.MaxRun)
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case o := <-done:
		return o.result, o.results, o.err
	case <-timeout:
		for _, tc := range tcs {
			tc.markLost()
		}
		return nil, nil, errAttemptTimeout
	case <-w.giveUp:
		// Run stopped waiting: the contexts were flagged lost and canceled
		// ShutdownTimeout ago, and the handler still runs.
		return nil, nil, errAbandoned
	}
}

// handlerOutcome is what one handler call returned.
type handlerOutcome struct {
	result  any
	results map[string]any
	err     error
}

// callHandler calls the handler of reg through the worker's middleware and
// turns a panic into a panicError. A handler that calls runtime.Goexit
// (t.FailNow in a test) gives no outcome: callHandler reports it, and the
// goroutine goes on ending, the call with it when the handler runs on the
// call's goroutine; either way nothing is settled and the task is left to
// its lease (runCall).
func (w *Worker) callHandler(ctx context.Context, reg *registration, tcs []*TaskContext) (o handlerOutcome) {
	returned := false
	defer func() {
		if returned {
			return
		}
		if p := recover(); p != nil {
			o = handlerOutcome{err: &panicError{value: p, stack: string(debug.Stack())}}
			return
		}
		for _, tc := range tcs {
			w.report(fmt.Errorf("%w (task %s)", errHandlerExited, tc.task.ID), PhaseExecute, tc.task.ID)
		}
	}()
	if len(w.opts.Middleware) == 0 {
		if reg.batch > 0 {
			o.results, o.err = reg.batchFn(ctx, tcs)
		} else {
			o.result, o.err = reg.fn(ctx, tcs[0])
		}
		returned = true
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
	returned = true
	o.err = err
	if reg.batch == 0 {
		o.result = result
	} else if m, ok := result.(map[string]any); ok {
		o.results = m
	}
	return o
}

// errHandlerExited marks a call whose handler called runtime.Goexit.
var errHandlerExited = errors.New("cairnq: handler called runtime.Goexit; its task is left to its lease")

// errAbandoned marks a call Run stopped waiting for at shutdown.
var errAbandoned = errors.New("cairnq: handler still running after shutdown; abandoned")

type panicError struct {
	value any
	stack string
}

func (p *panicError) Error() string { return fmt.Sprintf("handler panicked: %v", p.value) }

// settleLeftover records one task's outcome from how its call ended. It
// runs the handler's own values (its error's methods, its result's
// MarshalJSON) outside the handler's recover, so a panic here is
// recovered too: reported, and the task left to its lease, which expires
// and lets the task run again, rather than the worker process dying with
// every other task it holds. It reports whether it handed a lone task's
// success to the settler (complete).
func (w *Worker) settleLeftover(ctx context.Context, tc *TaskContext, reg *registration, callErr error, result any, results map[string]any) (handedOver bool) {
	defer func() {
		if p := recover(); p != nil {
			w.report(fmt.Errorf("cairnq: settling task %s panicked: %v", tc.task.ID, p), PhaseExecute, tc.task.ID)
		}
	}()
	if callErr == nil {
		if reg.batch > 0 {
			result = results[tc.task.ID]
		}
		return w.complete(ctx, tc, result, reg.batch == 0)
	}
	if d, ok := snoozeOf(callErr); ok {
		w.snooze(ctx, tc, d)
		return
	}
	if env, retryable, record := w.failureOf(tc, callErr); record {
		w.fail(ctx, tc, env, retryable)
	}
	return false
}

// failureOf turns how a call failed into the envelope to record, and
// whether there is anything to record at all.
func (w *Worker) failureOf(tc *TaskContext, callErr error) (env ErrorEnvelope, retryable, record bool) {
	if callErr == errAttemptTimeout {
		return ErrorEnvelope{
			Type: "HandlerTimeout", Code: "handler_timeout", Retryable: true, Details: map[string]any{},
			Message: fmt.Sprintf("handler for %s ran past MaxRun=%v; the attempt was abandoned", tc.task.Name, w.opts.MaxRun),
		}, true, true
	}
	if pe, ok := callErr.(*panicError); ok {
		return panicEnvelope(pe.value, pe.stack), true, true
	}
	// A write through the context was already refused: nothing more to
	// record. errors.Is calls the handler's error's own methods, hence
	// the recover (envelopeOf has its own).
	lost := false
	func() {
		defer func() { recover() }()
		lost = errIsLostLease(callErr)
	}()
	if lost {
		return ErrorEnvelope{}, false, false
	}
	env, retryable = envelopeOf(callErr)
	return env, retryable, true
}

// complete settles tc's success: through the loop's next claim (SQLite)
// or, for a lone task's call when handOver allows, by handing it to the
// settler (Postgres), which it then reports; else on its own.
func (w *Worker) complete(ctx context.Context, tc *TaskContext, result any, handOver bool) (handedOver bool) {
	if w.completeByClaim(tc, result) {
		return false
	}
	if handOver && w.settler != nil && w.settler.handOver(tc, result) {
		return true
	}
	err := w.settleTask(ctx, tc, func() error {
		_, err := w.st.Complete(ctx, tc.task.ID, w.id, result)
		return err
	})
	var se *engine.SerializationError
	switch {
	case err == nil:
	case errors.As(err, &se):
		// Deterministic: every attempt would fail the same way, so the task
		// fails for good instead of being redelivered.
		w.fail(ctx, tc, ErrorEnvelope{
			Type: "SerializationError", Code: "unserializable_result", Retryable: false, Details: map[string]any{},
			Message: "handler result is not JSON-serializable: " + se.Err.Error(),
		}, false)
	default:
		w.report(err, PhaseExecute, tc.task.ID)
	}
	return false
}

func (w *Worker) fail(ctx context.Context, tc *TaskContext, env ErrorEnvelope, retryable bool) {
	env.Retryable = retryable
	if err := w.settleTask(ctx, tc, func() error { return w.recordFailure(ctx, tc, env, retryable) }); err != nil {
		w.report(err, PhaseExecute, tc.task.ID)
	}
}

// settleTask writes a settlement of tc on the worker's authority,
// retrying while the failure may pass (retrySettle), and marks tc settled
// or lease-lost by the outcome. Any other error is returned for the caller
// to handle.
func (w *Worker) settleTask(ctx context.Context, tc *TaskContext, write func() error) error {
	tc.startSettling()
	defer tc.doneSettling()
	err := w.retrySettle(ctx, write)
	switch {
	case err == nil:
		tc.markSettled()
	case errIsLostLease(err):
		tc.markLost()
	default:
		return err
	}
	return nil
}

// recordFailure writes one failed attempt, the retry's delay chosen here,
// and logs what the store made of it.
func (w *Worker) recordFailure(ctx context.Context, tc *TaskContext, env ErrorEnvelope, retryable bool) error {
	delay := w.failDelay(tc.task.Attempt, retryable)
	settled, err := w.st.Fail(ctx, tc.task.ID, w.id, env, retryable, delay)
	if err == nil {
		w.logSettledFailure(ctx, tc, settled, env, delay)
	}
	return err
}

// retrySettle runs a settlement again while it fails for a reason that
// may pass (another process holding the SQLite write lock past the busy
// timeout, a dropped connection, a restarting server), for up to a
// lease's length: the heartbeat keeps the lease alive meanwhile where it
// can, and giving up early would leave the task to lease expiry and a
// second run of work that already finished.
func (w *Worker) retrySettle(ctx context.Context, settle func() error) error {
	deadline := time.Now().Add(w.lease)
	backoff := 10 * time.Millisecond
	for {
		err := settle()
		if !transient(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		if errors.Is(err, ErrBusy) {
			w.log.LogAttrs(ctx, slog.LevelDebug, logBusyBackoff, slog.String("worker_id", w.id),
				slog.String("phase", string(PhaseExecute)), slog.Duration("backoff", backoff))
		}
		sleepCtx(ctx, backoff)
		backoff = min(backoff*2, time.Second)
	}
}

// transient reports whether a failed write may succeed if run again: not
// a refusal that would repeat (bad input, a lost lease, a closed store,
// the server rejecting the statement itself), but a busy database or a
// connection that failed, whose errors carry no SQLSTATE or one of the
// classes of connection, resource and operator faults.
func transient(err error) bool {
	switch {
	case err == nil, errIsLostLease(err), errors.Is(err, ErrInvalidArgument), errors.Is(err, ErrClosed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.Is(err, ErrBusy):
		return true
	}
	var se interface{ SQLState() string }
	if errors.As(err, &se) {
		code := se.SQLState()
		switch code[:min(2, len(code))] {
		case "08", "40", "53", "57", "58":
			return true
		}
		return false
	}
	return true
}

// track adds or removes contexts from the set the heartbeat renews.
func (w *Worker) track(tcs []*TaskContext, add bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, tc := range tcs {
		if add {
			w.live[tc.task.ID] = tc
		} else {
			delete(w.live, tc.task.ID)
		}
	}
}

// heartbeatLoop renews every lease the worker holds with one statement per
// beat. A task missing from the reply lost its lease: only its context is
// flagged, its neighbours run on.
func (w *Worker) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(w.beat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.mu.Lock()
		ids := make([]string, 0, len(w.live))
		tcs := make([]*TaskContext, 0, len(w.live))
		for id, tc := range w.live {
			if !tc.LostLease() && !tc.isSettled() {
				ids = append(ids, id)
				tcs = append(tcs, tc)
			}
		}
		w.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		renewed, err := w.renew(ctx, ids)
		if err != nil {
			if ctx.Err() == nil {
				w.report(err, PhaseExecute, ids[0])
			}
			continue
		}
		for _, tc := range tcs {
			if cancel, ok := renewed[tc.task.ID]; ok {
				tc.observeCancel(cancel)
			} else {
				// The task may have settled while the beat was in flight,
				// which takes it out of running and out of the reply.
				tc.missedByBeat()
			}
		}
	}
}

// renew renews ids' leases in one statement, tried again within the beat's
// interval while it fails for a reason that may pass: a busy database, a
// dropped connection, or a deadlock. A beat and a grouped settlement
// lock the rows they share in whatever order their plans visit them (heap
// order for a bitmap scan or a hash join), so under load they can
// deadlock, and the server rolls one back; a settlement is retried the
// same way (retrySettle). The next beat would renew the leases anyway;
// what is reported is only what outlasts the interval.
func (w *Worker) renew(ctx context.Context, ids []string) (map[string]bool, error) {
	deadline := time.Now().Add(w.beat)
	backoff := 10 * time.Millisecond
	for {
		renewed, err := w.st.HeartbeatBatch(ctx, ids, w.id, w.lease)
		if err == nil || !transient(err) || time.Now().Add(backoff).After(deadline) || ctx.Err() != nil {
			return renewed, err
		}
		sleepCtx(ctx, backoff)
		backoff = min(2*backoff, time.Second)
	}
}

func errIsLostLease(err error) bool { return errors.Is(err, engine.ErrLostLease) }

func errIsNotFound(err error) bool { return errors.Is(err, engine.ErrNotFound) }
