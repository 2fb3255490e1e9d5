package cairnq

import (
	"context"
	"runtime"
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
// backlog cannot starve the rest, each bounded by its own limits
// (drawOf). req carries the loop's part (Busy, Settle, Leases). The rate
// limits are charged for what it returns.
func (w *Worker) claim(ctx context.Context, sources []source, names, queues []string, free int, req engine.ClaimRequest) (drawn []dispatch, got engine.Claimed, err error) {
	start := w.cursor % len(sources)
	w.cursor = start + 1
	order := append(append([]source(nil), sources[start:]...), sources[:start]...)
	now := time.Now()
	req.ClaimParams = cairnqtype.ClaimParams{Queues: queues, Names: names, WorkerID: w.id, Lease: w.lease}
	req.Calls, req.Draws = free, make([]engine.Draw, len(order))
	for i := range order {
		req.Draws[i] = w.drawOf(&order[i], now)
	}
	req.Resources = w.resourceRoom()
	if got, err = w.claims.Claims(ctx, req); err != nil {
		return nil, got, err
	}
	now = time.Now()
	for i, rows := range got.Tasks {
		src := &order[i]
		if src.limiter != nil {
			src.limiter.Take(now, len(rows))
		}
		drawn = append(drawn, w.deliveries(src, rows)...)
	}
	return drawn, got, nil
}

// idleWait is how long an idle loop sleeps: the poll interval, or less
// when a rate-limited name may start a task sooner or a look for an
// expired lease is due (lookDue, when set).
func (w *Worker) idleWait(sources []source, lookDue time.Time) time.Duration {
	wait := w.poll
	now := time.Now()
	if !lookDue.IsZero() {
		wait = max(min(wait, lookDue.Sub(now)), 0)
	}
	for _, src := range sources {
		if src.limiter != nil {
			if d := src.limiter.Next(now); d > 0 {
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
	tasks []*cairnqtype.Task
}

// drawOf is src's draw in this poll: at most the tightest of its name's
// own cap and ClaimBatch converted to calls (never below one) and, with
// a rate limit, the starts it allows now (spent after the claim commits:
// a transaction retried from the start must not pay twice).
func (w *Worker) drawOf(src *source, now time.Time) engine.Draw {
	calls := w.conc
	if w.opts.ClaimBatch > 0 {
		calls = min(calls, max(1, w.opts.ClaimBatch/src.batch))
	}
	if src.ownConc > 0 {
		w.mu.Lock()
		calls = min(calls, src.ownConc-w.perName[src.names[0]])
		w.mu.Unlock()
	}
	d := engine.Draw{Names: src.names, Batch: src.batch, Calls: calls, Tasks: -1, Resource: src.resource, Limit: src.global}
	if src.limiter != nil {
		d.Tasks = src.limiter.Available(now)
	}
	return d
}

// resourceRoom is how many more calls each resource has room for.
func (w *Worker) resourceRoom() map[string]int {
	if len(w.opts.Resources) == 0 {
		return nil
	}
	room := make(map[string]int, len(w.opts.Resources))
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, capacity := range w.opts.Resources {
		room[name] = capacity - w.perResource[name]
	}
	return room
}

// deliveries groups a draw's rows into calls: one task per call, or up to
// the name's batch size.
func (w *Worker) deliveries(src *source, rows []*cairnqtype.Task) []dispatch {
	byName := map[string][]*cairnqtype.Task{}
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
