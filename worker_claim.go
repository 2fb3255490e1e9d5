package cairnq

import (
	"context"
	"runtime"
	"slices"
	"strings"
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
// backlog cannot starve the rest. ran reports whether a claim statement
// ran (a draw every limit skipped runs none); drained, that every draw
// ran and came back short of its limit, so nothing this worker may claim
// was left at the claim's snapshot; sess, what the claim session reported
// (Ran: the probe, when one ran, found work, so the claim went on to
// draw). The rate limits are charged for what it returns.
func (w *Worker) claim(ctx context.Context, sources []source, names, queues []string, free int, hints engine.ClaimHints) (drawn []dispatch, ran bool, sess engine.SessionResult, drained bool, err error) {
	start := w.cursor % len(sources)
	w.cursor = start + 1
	order := append(append([]source(nil), sources[start:]...), sources[:start]...)
	// Names under a global limit keep their places in the rotation, but
	// among themselves go in name order, every poll: each draw takes its
	// name's lock until the claim commits, and two claims taking two such
	// locks in opposite orders would deadlock. (The other draws take no
	// lock they wait for: SKIP LOCKED.)
	var at []int
	var globals []source
	for i, src := range order {
		if src.global != nil {
			if hints.Limits == nil {
				hints.Limits = map[string]engine.GlobalLimit{}
			}
			hints.Limits[src.names[0]] = *src.global
			at, globals = append(at, i), append(globals, src)
		}
	}
	if len(globals) > 1 {
		slices.SortFunc(globals, func(a, b source) int { return strings.Compare(a.names[0], b.names[0]) })
		for k, i := range at {
			order[i] = globals[k]
		}
	}
	params := cairnqtype.ClaimParams{Queues: queues, Names: names, WorkerID: w.id, Lease: w.lease}
	if len(sources) == 1 && hints.Limits == nil {
		// One draw, which on Postgres is a single statement rather than a
		// transaction around one.
		err = w.plan(func(names []string, limit int) ([]*Task, error) {
			p := params
			p.Names, p.Limit = names, limit
			ran = true
			var out []*Task
			var err error
			sess, err = w.claims.ClaimSession(ctx, p, hints, true, func(draw drawFunc) error {
				out, err = draw(names, limit)
				return err
			})
			return out, err
		}, order, free, &drawn, &drained)
		if err == nil && !ran && len(hints.Settle) > 0 {
			// Every limit skipped the draw: the settlements go alone.
			err = w.claims.SettleCompletions(ctx, hints.Settle)
		}
	} else {
		ran = true
		sess, err = w.claims.ClaimSession(ctx, params, hints, false, func(draw drawFunc) error {
			drawn = drawn[:0] // a retried transaction starts over
			return w.plan(draw, order, free, &drawn, &drained)
		})
	}
	if err != nil {
		return nil, ran, sess, false, err
	}
	now := time.Now()
	for _, d := range drawn {
		if d.src.limiter != nil {
			d.src.limiter.take(now, len(d.tasks))
		}
	}
	return drawn, ran, sess, drained, nil
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
// with nothing queued. drained is set when every source drew and came
// back short of its limit.
func (w *Worker) plan(draw drawFunc, order []source, free int, out *[]dispatch, drained *bool) error {
	taken := map[string]int{} // resource units drawn in this poll
	left := free
	*drained = true
	for i := range order {
		src := &order[i]
		if left <= 0 {
			*drained = false
			break
		}
		quota := min(w.sourceCalls(src, taken), left)
		if quota <= 0 {
			*drained = false
			continue
		}
		limit := src.batch * quota
		if src.limiter != nil {
			// Spent after the claim commits (loop): a transaction retried
			// from the start must not pay twice.
			if limit = min(limit, src.limiter.available(time.Now())); limit <= 0 {
				*drained = false
				continue
			}
		}
		rows, err := draw(src.names, limit)
		if err != nil {
			return err
		}
		if len(rows) >= limit {
			*drained = false
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
