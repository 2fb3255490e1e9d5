package cairnq

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/internal/engine"
)

// RetentionRule keeps finished tasks matching it for OlderThan after they
// finished, then purges them. Empty filters match everything. No rule
// purges a task of a workflow that has not ended (whose root is a
// workflow's record still queued or running), as Client.Purge does not:
// a step still to run reads the results of the steps it waited for
// (StepResult), and the workflow's ledger would count a step it last saw
// running, and then found gone, as lost. Another SDK's purge knows
// nothing of this (the package documentation's "Workflows" says what it
// can still do).
type RetentionRule struct {
	Queue     string
	Status    Status // a terminal status
	Name      string
	OlderThan time.Duration
}

// RetentionOptions configures the background purge of a Client.
type RetentionOptions struct {
	// Rules are swept in order, each draining its matches in batches of
	// Limit. Tiered retention is one rule per tier, e.g. succeeded tasks
	// after an hour, failed ones after a week. At least one rule.
	Rules []RetentionRule
	// Interval between sweeps. Default one hour. A timer's sweep waits
	// after each full batch three times as long as the batch took, within
	// the first half of its interval (so with the default a sweep may run
	// for half an hour): its deletes come spread out rather than in one
	// burst that the claims and submits of that moment wait behind. Past
	// half its interval a sweep runs its batches back to back, so pacing
	// leaves no work to the next one. SweepNow does not pause.
	Interval time.Duration
	// Limit is the rows one purge statement deletes. Default 1000.
	Limit int
	// OnError receives a failed sweep; the sweeper carries on. Default: logged.
	OnError func(error)
}

// sweeper runs retention sweeps on a timer. Its goroutine is owned by the
// Client and stopped by Close.
type sweeper struct {
	st       *engine.Store
	rules    []PurgeOptions
	mu       sync.Mutex   // held by a sweep, let go during a paced sweep's pauses
	floors   []sweepFloor // one per rule, under mu
	interval time.Duration
	idle     int // a paced sweep's pause, in multiples of the batch before it (sweepIdle)
	onError  func(error)

	cancel context.CancelFunc
	wg     sync.WaitGroup
	ctx    context.Context
}

func newSweeper(st *engine.Store, o RetentionOptions, log *slog.Logger) (*sweeper, error) {
	if len(o.Rules) == 0 {
		return nil, &ArgumentError{Op: "retention", Arg: "rules", Reason: "need at least one"}
	}
	if o.Interval < 0 {
		return nil, &ArgumentError{Op: "retention", Arg: "Interval", Reason: fmt.Sprintf("must be > 0, got %v", o.Interval)}
	}
	if o.Limit < 0 {
		return nil, &ArgumentError{Op: "retention", Arg: "Limit", Reason: fmt.Sprintf("must be >= 1, got %d", o.Limit)}
	}
	s := &sweeper{st: st, interval: o.Interval, idle: sweepIdle, onError: o.OnError}
	if s.interval == 0 {
		s.interval = time.Hour
	}
	limit := o.Limit
	if limit == 0 {
		limit = engine.DefaultPurgeLimit
	}
	for _, r := range o.Rules {
		p := PurgeOptions{OlderThan: r.OlderThan, Queue: r.Queue, Status: r.Status, Name: r.Name, Limit: limit}
		if err := engine.ValidatePurge(p); err != nil {
			return nil, err
		}
		s.rules = append(s.rules, p)
		s.floors = append(s.floors, sweepFloor{from: engine.NoPurgeFloor})
	}
	if s.onError == nil {
		s.onError = func(err error) { log.Error("cairnq: retention sweep failed", "err", err) }
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

func (s *sweeper) start() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(s.interval)
		defer t.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-s.st.Lost(): // the store logged it; every sweep would fail
				return
			case <-t.C:
				if _, err := s.sweep(s.ctx, false, true); err != nil && s.ctx.Err() == nil {
					s.onError(err)
				}
			}
		}
	}()
}

func (s *sweeper) stop() {
	s.cancel()
	s.wg.Wait()
}

// A sweep starts each rule where its last batch ended (on Postgres:
// engine.Store.PurgeFrom says why), and from the oldest at most every
// fullSweepEvery, for a task whose completion committed behind that.
const fullSweepEvery = time.Minute

// sweepFloor is where a rule's sweeps have purged up to.
type sweepFloor struct {
	from   int64     // completed_at_ms the next batch starts at
	fullAt time.Time // when a sweep last started from the oldest
}

// sweepIdle is how many times as long as a batch took a paced sweep
// waits after it: its deletes then take at most a quarter of one
// connection's time. Back to back, the 31 batches of a ten-second sweep
// at 3,080 tasks/s raised the p99 pickup of the seconds they ran in from
// about 7.5 to 14 ms (docs/benchmarks.md, "Sustained load"); River's
// cleaner sleeps between its batches too.
const sweepIdle = 3

// sweepPause is the wait after a full batch that took the given time, in
// a paced sweep that has run for sweptFor of its interval: idle times the
// batch, cut to what is left of the interval's first half, so that pacing
// never leaves work to the next sweep.
func sweepPause(idle int, took, sweptFor, interval time.Duration) time.Duration {
	return max(0, min(time.Duration(idle)*took, interval/2-sweptFor))
}

// sweep drains every rule once, in bounded batches, and returns how many
// tasks it purged. A paced sweep (the timer's) waits between batches as
// sweepPause says, without holding the floors' lock, so SweepNow, which
// is not paced, never waits for a pause; the floor it leaves is where the
// paced sweep carries on.
func (s *sweeper) sweep(ctx context.Context, fromOldest, paced bool) (int, error) {
	s.mu.Lock() // the timer's sweeps and SweepNow share the floors
	locked := true
	defer func() {
		if locked {
			s.mu.Unlock()
		}
	}()
	start := time.Now()
	n := 0
	for i, p := range s.rules {
		f := &s.floors[i]
		if fromOldest || time.Since(f.fullAt) >= fullSweepEvery {
			f.from, f.fullAt = engine.NoPurgeFloor, time.Now()
		}
		for {
			began := time.Now()
			ids, reached, err := s.st.PurgeFrom(ctx, p, f.from)
			f.from = reached
			n += len(ids)
			if err != nil {
				return n, err
			}
			if len(ids) < p.Limit {
				break
			}
			if !paced {
				continue
			}
			if pause := sweepPause(s.idle, time.Since(began), time.Since(start), s.interval); pause > 0 {
				s.mu.Unlock()
				locked = false
				if !sleepCtx(ctx, pause) {
					return n, ctx.Err()
				}
				s.mu.Lock()
				locked = true
				if err := ctx.Err(); err != nil { // closed while SweepNow held the lock
					return n, err
				}
			}
		}
	}
	return n, nil
}

// SweepNow runs the configured retention rules once, now, and returns how
// many tasks it purged. Without Options.Retention it purges nothing.
func (c *Client) SweepNow(ctx context.Context) (int, error) {
	if c.sweeper == nil {
		return 0, nil
	}
	return c.sweeper.sweep(ctx, true, false) // from the oldest: "now" misses nothing
}
