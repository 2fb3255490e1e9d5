// Package maintenance holds the background services a Client and its
// Workers run beside the claims: the retention sweeps (Retention) and a
// worker's sweep of workflows (WorkflowSweep). Each is a goroutine owned
// by its starter, over the engine's statements, testable without a
// Client or a Worker.
package maintenance

import (
	"context"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/wake"
)

// Retention runs a Client's retention sweeps on a timer: each rule's
// purge in bounded batches, from where its last batch ended, paced so
// that its deletes come spread out. Its goroutine is owned by whoever
// calls Start, and stopped by Stop.
type Retention struct {
	st       *engine.Store
	rules    []cairnqtype.PurgeOptions
	mu       sync.Mutex   // held by a sweep, let go during a paced sweep's pauses
	floors   []sweepFloor // one per rule, under mu
	interval time.Duration
	// Idle is a paced sweep's pause, in multiples of the batch before it
	// (sweepIdle); tests set it before Start.
	Idle    int
	onError func(error)

	cancel context.CancelFunc
	wg     sync.WaitGroup
	ctx    context.Context
}

// NewRetention returns the sweeps of rules (checked, each with its
// Limit) every interval, each failed one told to onError.
func NewRetention(st *engine.Store, rules []cairnqtype.PurgeOptions, interval time.Duration, onError func(error)) *Retention {
	s := &Retention{st: st, rules: rules, interval: interval, Idle: sweepIdle, onError: onError}
	for range rules {
		s.floors = append(s.floors, sweepFloor{from: engine.NoPurgeFloor})
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// Start starts the timer's sweeps.
func (s *Retention) Start() {
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
				if _, err := s.Sweep(s.ctx, false, true); err != nil && s.ctx.Err() == nil {
					s.onError(err)
				}
			}
		}
	}()
}

// Stop stops them, waiting for a sweep in flight.
func (s *Retention) Stop() {
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

// Sweep drains every rule once, in bounded batches, and returns how many
// tasks it purged: from the oldest when fromOldest, else from where the
// last batch ended (and from the oldest at most every fullSweepEvery). A
// paced sweep (the timer's) waits between batches as sweepPause says,
// without holding the floors' lock, so an unpaced one (SweepNow) never
// waits for a pause; the floor it leaves is where the paced sweep
// carries on.
func (s *Retention) Sweep(ctx context.Context, fromOldest, paced bool) (int, error) {
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
			if pause := sweepPause(s.Idle, time.Since(began), time.Since(start), s.interval); pause > 0 {
				s.mu.Unlock()
				locked = false
				if !wake.Sleep(ctx, pause) {
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
