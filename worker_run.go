package cairnq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/attempt"
	"github.com/cairnq/cairnq-go/internal/claimloop"
	"github.com/cairnq/cairnq-go/internal/completer"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/maintenance"
	"github.com/cairnq/cairnq-go/internal/ratelimit"
)

// claimer is what the worker claims and groups successes through: the
// store, and in tests a wrapper that watches what rides on the claims.
type claimer interface {
	claimloop.Claimer
	SettleCompletions(ctx context.Context, cs []*engine.Completion) error
}

// maxShutdownGrace caps how long Run waits, after canceling the contexts of
// calls still running at ShutdownTimeout, for their handlers to return.
const maxShutdownGrace = 5 * time.Second

// claimLoop is the claim loop (internal/claimloop) of w's registrations:
// its draws (one per name that limits itself, one shared by the rest),
// starting the calls it draws under handlerCtx through w.start.
func (w *Worker) claimLoop(handlerCtx context.Context, slots *claimloop.Slots) *claimloop.Loop {
	l := &claimloop.Loop{Claims: w.claims, Store: w.st, Completer: w.comp, Slots: slots, Pause: w.pause,
		WorkerID: w.id, Queues: w.queues, Conc: w.conc, Lease: w.lease, Poll: w.poll,
		ClaimBatch: w.opts.ClaimBatch, Resources: w.opts.Resources, BatchOf: map[string]int{},
		Start: func(c claimloop.Call) { w.start(handlerCtx, c) },
		Busy: func(ctx context.Context, backoff time.Duration) {
			w.log.LogAttrs(ctx, slog.LevelDebug, logBusyBackoff, slog.String("worker_id", w.id),
				slog.String("phase", string(PhaseClaim)), slog.Duration("backoff", backoff))
		},
		Report: func(err error) { w.report(err, PhaseClaim, "") },
		Cursor: w.cursor}
	var shared []string
	for _, name := range w.order {
		r := w.regs[name]
		l.Names = append(l.Names, name)
		if r.batch > 0 {
			l.BatchOf[name] = r.batch
		}
		if !r.ownDraw {
			shared = append(shared, name)
			continue
		}
		src := claimloop.Source{Names: []string{name}, Batch: max(r.batch, 1), OwnConc: r.opts.Concurrency, Resource: r.resource}
		if r.opts.RateLimit != nil {
			src.Limiter = ratelimit.New(r.opts.RateLimit.Rate, r.opts.RateLimit.Burst)
		}
		if g := r.opts.GlobalLimit; g != nil {
			src.Global = &engine.GlobalLimit{Max: g.Max, PerKey: g.PerMetadataKey}
		}
		l.Sources = append(l.Sources, src)
	}
	if len(shared) > 0 {
		l.Sources = append(l.Sources, claimloop.Source{Names: shared, Batch: 1})
	}
	return l
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
//
// While it runs, the worker keeps a row of cairnq_meta saying who it is
// and when it last beat, rewritten every 10 seconds and deleted as Run
// returns, which Client.Workers reads (idle workers too).
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
	w.slots = claimloop.NewSlots(w.conc, w.opts.MaxInFlightBytes)
	w.giveUp = make(chan struct{})
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
	beatWG.Add(2)
	go func() {
		defer beatWG.Done()
		w.heartbeat().Run(beatCtx)
	}()
	go func() { // the worker's row, for operators: deleted when Run ends
		defer beatWG.Done()
		w.presence().Run(beatCtx)
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
	// The fleet's pauses are read before the first claim, so a worker
	// started while its queue is paused claims nothing from it.
	pauses := w.pauseWatch(ctx)
	pauses.First(loopCtx)
	watchWG.Add(1)
	go func() {
		defer watchWG.Done()
		pauses.Run(loopCtx)
	}()
	loop := w.claimLoop(handlerCtx, w.slots)
	runErr := loop.Run(loopCtx)
	w.cursor = loop.Cursor
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

// presenceEvery is how often a running worker rewrites its row of
// cairnq_meta (Client.Workers).
const presenceEvery = 10 * time.Second

// presence keeps w's row of cairnq_meta, which Client.Workers reads.
func (w *Worker) presence() *maintenance.Beat {
	host, _ := os.Hostname()
	started := time.Now()
	return &maintenance.Beat{Store: w.st, Every: presenceEvery,
		Info: func() cairnqtype.WorkerInfo {
			w.mu.Lock()
			running := len(w.live)
			w.mu.Unlock()
			return cairnqtype.WorkerInfo{ID: w.id, Host: host, PID: os.Getpid(), Queues: w.queues, Names: w.order,
				Concurrency: w.conc, Running: running, StartedAt: started}
		},
		Report: func(err error) { w.report(err, PhaseClaim, "") }}
}

// pauseWatch keeps w's queues paused for the fleet as the database says
// (Client.PauseQueue), logging each change it sees.
func (w *Worker) pauseWatch(ctx context.Context) *maintenance.PauseWatch {
	return &maintenance.PauseWatch{Store: w.st, Every: w.poll,
		Set: func(queues []string) {
			paused, resumed := w.pause.SetFleet(queues)
			for _, q := range paused {
				w.log.LogAttrs(ctx, slog.LevelInfo, logQueuePaused, slog.String("queue", q), slog.String("worker_id", w.id))
			}
			for _, q := range resumed {
				w.log.LogAttrs(ctx, slog.LevelInfo, logQueueResumed, slog.String("queue", q), slog.String("worker_id", w.id))
			}
		},
		Report: func(err error) { w.report(err, PhaseClaim, "") }}
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
		// Over once no call is left to wait for: none has not ended or,
		// once drain gave up on the handlers and they run on their
		// calls' goroutines (MaxRun unset, see attempt), every call left
		// still holds its slot, its handler running past its context's
		// end. Such a call settles nothing when its handler returns at
		// last: its contexts were flagged lost. With MaxRun a call
		// holding its slot is waiting in attempt for w.giveUp, and ends
		// once it sees it, so drain waits for it.
		if settled == nil && w.slots.Over(gaveUp, w.opts.MaxRun <= 0) {
			// The completer goes last, when no call can hand it anything.
			settled = w.comp.Stop()
		}
		select {
		case <-settled:
			if grace != nil {
				grace.Stop()
			}
			return
		case <-w.slots.Freed(): // a call ended, or left its handler
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
