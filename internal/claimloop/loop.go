// Package claimloop is a worker's claim loop: what it draws for which
// handler in each claim, how many calls it may start, when it sleeps and
// what wakes it. It runs on the engine's one claim call
// (engine.Store.Claims), hands each call it drew to the worker (Start),
// and counts the calls against the worker's budgets (Slots); the worker
// runs the calls and settles them through internal/completer, which
// rides on the loop's claims where the store settles that way.
package claimloop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/completer"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/ratelimit"
	"github.com/cairnq/cairnq-go/internal/wake"
)

// Claimer is what the loop claims through: the store, and in tests a
// wrapper that watches the claims.
type Claimer interface {
	Claims(ctx context.Context, r engine.ClaimRequest) (engine.Claimed, error)
}

// Source is one draw of a claim: one name that limits itself, or all
// the names that do not, sharing one draw.
type Source struct {
	Names    []string
	Batch    int                 // tasks per call
	OwnConc  int                 // this name's own cap on calls (0: none)
	Resource string              // the resource its calls hold ("": none)
	Limiter  *ratelimit.Bucket   // the name's RateLimit, nil when it has none
	Global   *engine.GlobalLimit // the name's GlobalLimit, nil when it has none
}

// Call is one handler call a draw produced: its tasks, all of one name.
type Call struct {
	Source *Source
	Tasks  []*cairnqtype.Task
}

// Loop is a worker's claim loop. Its fields are set before Run or
// ClaimOne and not changed while either runs.
type Loop struct {
	Claims    Claimer
	Store     *engine.Store // its queued notifications wake an idle loop
	Completer completer.Completer
	Slots     *Slots
	Pause     *Pause
	WorkerID  string
	Queues    []string // every queue the worker claims from
	Conc      int      // the worker's Concurrency
	Lease     time.Duration
	Poll      time.Duration // the idle sleep, and lease recovery's pace
	// ClaimBatch bounds the tasks one draw takes (0: Conc calls).
	ClaimBatch int
	Resources  map[string]int // each resource's capacity
	Sources    []Source       // the draws, in the order of the schedule
	Names      []string       // every name the worker has a handler for
	BatchOf    map[string]int // tasks per call of each batched name
	// Start starts a call the loop drew (charged to Slots by the
	// caller); the loop holds the pause lock until it returns.
	Start func(Call)
	// Busy logs a claim that met a busy SQLite database and backs off;
	// Report is any other failed claim.
	Busy   func(ctx context.Context, backoff time.Duration)
	Report func(error)
	// Cursor is the draw the next claim starts from; each claim moves it
	// on, so that no name's backlog starves the rest.
	Cursor int
}

// claimErrorBackoff is the wait after a failed claim.
const claimErrorBackoff = 250 * time.Millisecond

// Run claims and starts calls until ctx ends. It returns an error only
// when the store is closed under it, which no retry can mend.
func (l *Loop) Run(ctx context.Context) error {
	defer l.Completer.EndClaims()
	busy := false                             // the last poll claimed something
	burst := false                            // it claimed several tasks
	capped := false                           // a global limit bound its draw
	leases := engine.LeaseLook{Every: l.Poll} // a busy worker recovers as often as an idle one
	notified := false                         // this poll follows a submit's notification
	var quiet time.Duration                   // how long idle defers notifications (nextQuiet)
	claimCtx, done := claimContext(ctx)
	defer done()
	for ctx.Err() == nil {
		free, room := l.waitForRoom(ctx)
		if !room {
			continue
		}
		if busy && free < l.Conc {
			// After a poll that claimed, while calls run, let the ones
			// about to return free their slots first. A lone call's
			// settlement or successor does not wait, nor does the
			// first claim after an idle wait.
			free = l.gatherSlots(free)
		}
		queues := l.Pause.hold() // until what this poll draws has started
		if len(queues) == 0 {
			l.Pause.release()
			l.waitResumed(ctx)
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
		var woken <-chan struct{}
		unsubscribe := func() {}
		if subscribed {
			woken, unsubscribe = l.Store.SubscribeQueued(ctx, l.Queues)
		}
		taken := l.Completer.Take()
		// After a draw a global limit bound, the loop sleeps until a call
		// ends, then claims as a busy worker does, without the probe: the
		// limit's tasks are queued.
		drawn, got, err := l.claim(claimCtx, queues, free, engine.ClaimRequest{Busy: busy || capped, Settle: taken, Leases: &leases})
		l.Completer.Answer(taken, err)
		if err == nil {
			quiet = l.nextQuiet(quiet, len(drawn) > 0, notified && !busy, got.Ran)
		}
		notified = false
		if err != nil {
			l.Pause.release()
			unsubscribe()
			if done, runErr := l.claimFailed(ctx, err); done {
				return runErr
			}
			continue
		}
		// Capped counts while this worker has calls of its own: a limit
		// other processes' calls fill leaves an idle one probing.
		busy, burst, capped = len(drawn) > 0, len(drawn) > 1, got.Capped && (len(drawn) > 0 || l.Slots.Busy())
		l.Completer.OpenRide(burst || l.Slots.Busy())
		if !busy && !subscribed {
			l.Pause.release()
			continue // not subscribed: subscribe and probe, then sleep
		}
		if busy && got.Drained && subscribed && !l.Completer.RidesClaims() {
			// The draw took all there was, under the subscription taken
			// before it: what is submitted after it wakes this loop. So the
			// loop sleeps now, as after an empty probe, rather than claim
			// again for nothing and probe after that (each idle process of
			// a fleet did both for every task it won). Not where
			// completions ride on the next claim (SQLite), which would
			// wait for it.
			l.startAll(drawn)
			busy, burst = false, false
			notified = l.idle(ctx, woken, quiet, leases.Due())
			unsubscribe()
			continue
		}
		if !busy {
			l.Pause.release()
			notified = l.idle(ctx, woken, quiet, leases.Due())
			unsubscribe()
			continue
		}
		unsubscribe()
		l.startAll(drawn)
	}
	return nil
}

// startAll starts the calls drawn, then lets go of the pause lock.
func (l *Loop) startAll(drawn []Call) {
	for _, c := range drawn {
		l.Start(c)
	}
	l.Pause.release()
}

// waitForRoom returns the free slots when the worker has room for another
// call. When it has none it settles what waits or waits for a slot, and
// reports no room: the loop looks again.
func (l *Loop) waitForRoom(ctx context.Context) (free int, room bool) {
	free, full := l.Slots.room()
	if !full {
		return free, true
	}
	if l.Completer.SettleWaiting(ctx) { // no claim to carry them soon
		return 0, false
	}
	select {
	case <-l.Slots.Freed():
	case <-ctx.Done():
	}
	return 0, false
}

// waitResumed waits, every queue paused, for a queue to resume or a call
// to finish (its completion waits to be settled).
func (l *Loop) waitResumed(ctx context.Context) {
	l.Completer.SettleWaiting(ctx)
	select {
	case <-l.Pause.resumed:
	case <-l.Slots.Freed():
	case <-ctx.Done():
	}
}

// claimFailed handles a failed claim. done reports whether the loop ends,
// with runErr as Run's result; otherwise it has reported the error (a busy
// database only through Busy) and backed off.
func (l *Loop) claimFailed(ctx context.Context, err error) (done bool, runErr error) {
	if ctx.Err() != nil {
		return true, nil
	}
	if engine.Gone(err) {
		return true, fmt.Errorf("cairnq: worker %s: %w", l.WorkerID, err)
	}
	if errors.Is(err, cairnqtype.ErrBusy) {
		l.Busy(ctx, claimErrorBackoff)
	} else {
		l.Report(err)
	}
	wake.Sleep(ctx, claimErrorBackoff)
	return false, nil
}

// idle sleeps until something may be claimable: a submit (woken), a
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
func (l *Loop) idle(ctx context.Context, woken <-chan struct{}, quiet time.Duration, lookDue time.Time) (notified bool) {
	var slotFreed <-chan struct{}
	if l.Completer.RidesClaims() || limited(l.Sources) {
		slotFreed = l.Slots.Freed()
	}
	timer := time.NewTimer(l.idleWait(lookDue))
	defer timer.Stop()
	var hush <-chan time.Time // quiet's end, once a submit came during it
	start := time.Now()
	for {
		select {
		case <-woken:
			left := quiet - time.Since(start)
			if left <= 0 {
				return true
			}
			woken = nil
			t := time.NewTimer(left)
			defer t.Stop()
			hush = t.C
			continue
		case <-hush:
			return true
		case <-slotFreed:
		case <-l.Pause.resumed:
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
func (l *Loop) nextQuiet(quiet time.Duration, drew, notifiedProbe, opened bool) time.Duration {
	switch {
	case drew:
		return 0
	case !notifiedProbe || (!opened && quiet == 0):
		return quiet
	}
	return min(max(2*quiet, firstQuiet), l.Poll, maxQuiet)
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
func limited(sources []Source) bool {
	for _, src := range sources {
		if src.OwnConc > 0 || src.Resource != "" || src.Global != nil {
			return true
		}
	}
	return false
}
