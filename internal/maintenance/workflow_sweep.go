package maintenance

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/wake"
)

// sweepBatch is how many due records one sweep claims at most.
const sweepBatch = 16

// endedPage is how many records of ended workflows one read of a look
// over them takes at most.
const endedPage = 256

// A sweep then looks over the workflows that ended (lookEnded): its
// store's full look over every record of a failed or canceled workflow
// when it is due (Store.LookEndedFull: one for all the store's workers,
// about every 5 minutes), then the worker's read of the records that
// ended since its last (recentLook). A worker's first read starts
// endedFirst ago, by its own clock.
const (
	endedSlack = 5 * time.Second
	endedFirst = time.Minute
)

// recentLook is where a worker's reads of the records that ended since
// its last stand. A read goes on from head, after the last record read.
// But an end's completed_at_ms is taken when its transaction began (on
// SQLite, when its write did), so it may commit after ends taken later,
// which a read already passed. So every endedSlack a read starts back at
// floor, before every record that may have committed unread, and then
// moves floor up past what has settled: a record that ended more than
// endedSlack before the read began had committed by then (an end commits
// within endedSlack of its transaction's start; one that commits later
// is left to the full look). When the read began, by the clock that
// wrote completed_at_ms, is not asked of the database: it is at least
// an end read before plus the time since the read that read it returned
// (low). So a record is read as it comes and then by at most two reads
// from floor, and once nothing has ended for endedSlack, no read reads
// an end it read before.
type recentLook struct {
	head, floor engine.EndedFrom
	floorAt     time.Time // when a read next starts from floor; zero: no read yet
	lowMS       int64     // an end read, at lowAt by the worker's clock
	lowAt       time.Time // zero: no end read yet
}

// read reads the records that ended since the last read (walk, from
// where it starts to where it stopped), at now and with the clock clock.
func (l *recentLook) read(clock func() time.Time, walk func(from engine.EndedFrom) engine.EndedFrom) {
	now := clock()
	if l.floorAt.IsZero() {
		l.head = engine.EndedFrom{MS: now.Add(-endedFirst).UnixMilli()}
		l.floor, l.floorAt = l.head, now
	}
	if now.Before(l.floorAt) {
		l.ended(l.head, walk(l.head), clock())
		return
	}
	l.floorAt = now.Add(endedSlack)
	low, known := l.low(now)
	end := walk(l.floor)
	l.ended(l.floor, end, clock())
	if !known {
		return
	}
	// Every record that ended before settle had committed when the walk
	// began, and the walk read those after floor, up to end.
	settle := engine.EndedFrom{MS: low - endedSlack.Milliseconds()}
	if endedBefore(end, settle) {
		settle = end
	}
	if endedBefore(l.floor, settle) {
		l.floor = settle
	}
}

// ended records a walk from from that stopped at end and returned at
// at: if it read a record, the last it read is end.
func (l *recentLook) ended(from, end engine.EndedFrom, at time.Time) {
	if endedBefore(l.head, end) {
		l.head = end
	}
	if end == from {
		return
	}
	if ms, known := l.low(at); !known || end.MS > ms {
		l.lowMS, l.lowAt = end.MS, at
	}
}

// low is the least the clock that wrote completed_at_ms can read at now
// (by the worker's clock, at or after lowAt), if an end was read.
func (l *recentLook) low(now time.Time) (ms int64, known bool) {
	if l.lowAt.IsZero() {
		return 0, false
	}
	return l.lowMS + now.Sub(l.lowAt).Milliseconds(), true
}

// endedBefore reports whether a comes before b in the order records end.
func endedBefore(a, b engine.EndedFrom) bool {
	return a.MS < b.MS || (a.MS == b.MS && a.ID < b.ID)
}

// WorkflowSweep is a worker's sweep of its store's workflows: every
// Every (with a tenth of jitter, so that a fleet started together does
// not sweep in step) it advances the records that are due, then looks
// over the workflows that ended (lookEnded). Its goroutine is the one
// that calls Run.
type WorkflowSweep struct {
	// Store is the store whose workflows it sweeps.
	Store *engine.Store
	// WorkerID is who the sweep claims due records as.
	WorkerID string
	// Every is the time between sweeps, at least a millisecond.
	Every time.Duration
	// Unread is told of each record the sweep left alone, with why.
	// Required.
	Unread func(ctx context.Context, record, reason string)
	// Report is told of a sweep that failed, but not of one that was
	// stopping, nor of a store that serves nothing more (the store said
	// so, and the worker ends with it). Required.
	Report func(error)
}

// Run sweeps until ctx ends. A sweep that filled its batch runs again at
// once.
func (s *WorkflowSweep) Run(ctx context.Context) {
	var look recentLook
	for {
		if !wake.Sleep(ctx, s.Every+rand.N(s.Every/10+1)) {
			return
		}
		for ctx.Err() == nil {
			sw, err := s.Store.SweepWorkflows(ctx, s.WorkerID, sweepBatch)
			for id, why := range sw.Unread {
				s.Unread(ctx, id, why)
			}
			if err != nil {
				s.report(ctx, err)
				break
			}
			if sw.Records < sweepBatch {
				break
			}
		}
		s.lookEnded(ctx, &look)
	}
}

// lookEnded advances the workflows that ended failed or canceled and
// whose steps moved since, whoever moved them: a canceled workflow's
// steps still live are asked to stop (another SDK's plain cancel of the
// record reached none of them), and a failed workflow one of whose steps
// was retried goes on (Client.Retry revives it at once; another SDK's
// retry at the step's settlement by a Go worker, or here).
func (s *WorkflowSweep) lookEnded(ctx context.Context, look *recentLook) {
	if looked, err := s.Store.LookEndedFull(ctx, s.WorkerID, endedPage); looked {
		s.report(ctx, err)
	}
	look.read(time.Now, func(from engine.EndedFrom) engine.EndedFrom {
		return s.walkEnded(ctx, from)
	})
}

// walkEnded reads the records that ended after from, page after page
// until one comes back short (or fails), and returns where it stopped.
func (s *WorkflowSweep) walkEnded(ctx context.Context, from engine.EndedFrom) engine.EndedFrom {
	for ctx.Err() == nil {
		sw, err := s.Store.SweepEndedSince(ctx, s.WorkerID, from, endedPage)
		from = sw.Next
		s.report(ctx, err)
		if sw.Read < endedPage {
			break
		}
	}
	return from
}

func (s *WorkflowSweep) report(ctx context.Context, err error) {
	if err != nil && ctx.Err() == nil && !engine.Gone(err) {
		s.Report(err)
	}
}
