package engine

import (
	"github.com/cairnq/cairnq-go/cairnqtype"

	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// The full look over the ended workflows (LookEndedFull) reads every
// record of a failed workflow, then of a canceled one, for a step moved
// long after its workflow ended (another SDK's retry, run by another
// SDK's worker), which no other look reads. It costs as much as there
// are such records (on Postgres, 1.4 s for 50,000 failed records of 4
// steps), so a store takes one for all its workers:
//
//   - Its workers' sweeps ask for it at each sweep; the first ask that
//     finds it due takes it, and the others find it not due. It is next
//     due endedFullEvery after the last began (with a tenth of jitter),
//     or fullDrawShare times as long as the last took if that is later,
//     so that however many records there are the looks take at most a
//     twentieth of one connection's time. A look cut short by its
//     worker's stop is due again at once, for another worker of the
//     store. A worker started less than endedFullEvery after its store's
//     last look takes none of its own.
//   - A store's first is due at a random point of the endedFullSpread
//     after its workers' first ask: the processes of a fleet started
//     together (each its own store) spread theirs rather than all read at
//     once, and stay spread. Each process still takes its own look every
//     endedFullEvery. A lock across processes would not spare that: a
//     transaction-scoped advisory lock on Postgres would pin a
//     connection in an open transaction for the whole look, and only keep
//     two looks from overlapping, not the second from following the
//     first; sharing when the last look ran would need a table the
//     protocol does not have.
const (
	endedFullEvery  = 5 * time.Minute
	endedFullSpread = time.Minute
)

// endedFull paces a store's full looks over the ended workflows.
type endedFull struct {
	mu        sync.Mutex
	next      time.Time     // when the next is due; zero: none asked for yet
	spread    time.Duration // over how long the first falls, if spreadSet
	spreadSet bool          // else endedFullSpread
	taken     atomic.Int64  // looks begun, for tests and diagnostics
}

// take reports whether a full look may begin at now, and if so reserves
// it, so that of the workers sharing the store one looks.
func (p *endedFull) take(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next.IsZero() {
		spread := endedFullSpread
		if p.spreadSet {
			spread = p.spread
		}
		p.next = now
		if spread > 0 {
			p.next = now.Add(rand.N(spread))
		}
	}
	if now.Before(p.next) {
		return false
	}
	p.next = now.Add(endedFullEvery) // reserved: ran sets the true next
	p.taken.Add(1)
	return true
}

// ran records a full look that began at start and took took; whole is
// false if it was cut short, and then the next is due at once.
func (p *endedFull) ran(start time.Time, took time.Duration, whole bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !whole {
		p.next = start
		return
	}
	p.next = start.Add(max(endedFullEvery, fullDrawShare*took) + rand.N(endedFullEvery/10))
}

// LookEndedFull takes the store's full look over the ended workflows, as
// workerID, if it is due and no other worker of the store is taking it:
// it reads every record of a failed workflow, then of a canceled one, in
// reads of page (SweepEndedByStatus), and advances those whose steps
// moved since. It reports whether it looked, and the errors it met on
// the way (each read's; a read that fails ends that status's walk).
func (s *Store) LookEndedFull(ctx context.Context, workerID string, page int) (looked bool, err error) {
	start := time.Now()
	if !s.endedFull.take(start) {
		return false, nil
	}
	var errs []error
	for _, status := range []cairnqtype.Status{cairnqtype.StatusFailed, cairnqtype.StatusCanceled} {
		from := OldestEnded()
		for ctx.Err() == nil {
			sw, err := s.SweepEndedByStatus(ctx, workerID, status, from, page)
			if err != nil {
				errs = append(errs, err)
			}
			if from = sw.Next; sw.Read < page {
				break
			}
		}
	}
	s.endedFull.ran(start, time.Since(start), ctx.Err() == nil)
	return true, errors.Join(errs...)
}

// EndedFullLooks reports how many full looks over the ended workflows
// the store's workers began (LookEndedFull). It is introspection for
// tests and diagnostics.
func (s *Store) EndedFullLooks() int64 { return s.endedFull.taken.Load() }

// SpreadEndedFull sets over how long after its workers' next ask the
// store's next full look falls at random, as its first does
// (endedFullSpread unless set; zero: at that ask). It is for tests.
func (s *Store) SpreadEndedFull(d time.Duration) {
	s.endedFull.mu.Lock()
	defer s.endedFull.mu.Unlock()
	s.endedFull.spread, s.endedFull.spreadSet = d, true
	s.endedFull.next = time.Time{}
}
