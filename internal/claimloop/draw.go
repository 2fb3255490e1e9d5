package claimloop

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
)

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
// server often share the cores: a wait that only yields spins on CPU the
// server needs, while a blocking one widens the claims
// (docs/benchmarks.md has both measured).
func (l *Loop) gatherSlots(free int) int {
	start := time.Now()
	last := start
	var timer *time.Timer
	for free < l.Conc {
		runtime.Gosched()
		now := l.Slots.free()
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
			case <-l.Slots.Freed():
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

// ClaimOne makes the claim of one loop iteration with one free slot, on
// the queues not paused, rotated as Run rotates its draws, so repeated
// calls share out the names as Run would. It probes first and recovers
// expired leases. ok is false when it drew nothing.
func (l *Loop) ClaimOne(ctx context.Context) (c Call, ok bool, err error) {
	queues := l.Pause.hold()
	defer l.Pause.release()
	if len(queues) == 0 {
		return Call{}, false, nil
	}
	claimCtx, done := claimContext(ctx)
	defer done()
	drawn, _, err := l.claim(claimCtx, queues, 1, engine.ClaimRequest{})
	if err != nil || len(drawn) == 0 {
		return Call{}, false, err
	}
	return drawn[0], true, nil
}

// claim makes one poll's claim on queues, spending at most free call
// slots: the draws in schedule order, rotated at every poll so one name's
// backlog cannot starve the rest, each bounded by its own limits
// (drawOf). req carries the loop's part (Busy, Settle, Leases). The rate
// limits are charged for what it returns. claimCtx is the caller's
// claimContext, which outlives its stop by claimGrace.
func (l *Loop) claim(claimCtx context.Context, queues []string, free int, req engine.ClaimRequest) (drawn []Call, got engine.Claimed, err error) {
	start := l.Cursor % len(l.Sources)
	l.Cursor = start + 1
	order := append(append([]Source(nil), l.Sources[start:]...), l.Sources[:start]...)
	now := time.Now()
	req.ClaimParams = cairnqtype.ClaimParams{Queues: queues, Names: l.Names, WorkerID: l.WorkerID, Lease: l.Lease}
	req.Calls, req.Draws = free, make([]engine.Draw, len(order))
	for i := range order {
		req.Draws[i] = l.drawOf(&order[i], now)
	}
	req.Resources = l.Slots.resourceRoom(l.Resources)
	if got, err = l.Claims.Claims(claimCtx, req); err != nil {
		return nil, got, err
	}
	now = time.Now()
	for i, rows := range got.Tasks {
		src := &order[i]
		if src.Limiter != nil {
			src.Limiter.Take(now, len(rows))
		}
		drawn = append(drawn, l.calls(src, rows)...)
	}
	return drawn, got, nil
}

// idleWait is how long an idle loop sleeps: the poll interval, or less
// when a rate-limited name may start a task sooner or a look for an
// expired lease is due (lookDue, when set).
func (l *Loop) idleWait(lookDue time.Time) time.Duration {
	wait := l.Poll
	now := time.Now()
	if !lookDue.IsZero() {
		wait = max(min(wait, lookDue.Sub(now)), 0)
	}
	for _, src := range l.Sources {
		if src.Limiter != nil {
			if d := src.Limiter.Next(now); d > 0 {
				wait = min(wait, d)
			}
		}
	}
	return wait
}

// drawOf is src's draw in this poll: at most the tightest of its name's
// own cap and ClaimBatch converted to calls (never below one) and, with
// a rate limit, the starts it allows now (spent after the claim commits:
// a transaction retried from the start must not pay twice).
func (l *Loop) drawOf(src *Source, now time.Time) engine.Draw {
	calls := l.Conc
	if l.ClaimBatch > 0 {
		calls = min(calls, max(1, l.ClaimBatch/src.Batch))
	}
	if src.OwnConc > 0 {
		calls = min(calls, l.Slots.nameRoom(src.Names[0], src.OwnConc))
	}
	d := engine.Draw{Names: src.Names, Batch: src.Batch, Calls: calls, Tasks: -1, Resource: src.Resource, Limit: src.Global}
	if src.Limiter != nil {
		d.Tasks = src.Limiter.Available(now)
	}
	return d
}

// calls groups a draw's rows into calls: one task per call, or up to
// the name's batch size.
func (l *Loop) calls(src *Source, rows []*cairnqtype.Task) []Call {
	byName := map[string][]*cairnqtype.Task{}
	var names []string
	for _, t := range rows {
		if _, ok := byName[t.Name]; !ok {
			names = append(names, t.Name)
		}
		byName[t.Name] = append(byName[t.Name], t)
	}
	var out []Call
	for _, name := range names {
		group := byName[name]
		size := max(l.BatchOf[name], 1)
		for i := 0; i < len(group); i += size {
			out = append(out, Call{Source: src, Tasks: group[i:min(i+size, len(group))]})
		}
	}
	return out
}

// claimGrace is how long a claim in flight when its loop stops may go on.
// Cancelling it at once could lose what it drew: on Postgres a claim may
// commit on the server while the driver reports the cancellation, and
// its tasks would then belong to nobody until their leases expired.
// Given the grace, the claim returns what it drew and the loop starts
// it, so that the worker's drain runs it (WorkOne hands it back to its
// queue instead). A claim on a database out of reach still ends soon
// after the stop.
const claimGrace = 2 * time.Second

// claimContext is the context claims run on: ctx's values, and its
// cancellation claimGrace late. done releases it. A loop makes one for
// all its claims, not one a claim: a claim is its hot path.
func claimContext(ctx context.Context) (claimCtx context.Context, done func()) {
	claimCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	var mu sync.Mutex
	var late *time.Timer
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		late = time.AfterFunc(claimGrace, func() { cancel(context.Cause(ctx)) })
	})
	return claimCtx, func() {
		stop()
		mu.Lock()
		if late != nil {
			late.Stop()
		}
		mu.Unlock()
		cancel(nil)
	}
}
