package engine

import (
	"strings"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/protocol"
)

// A Postgres claim scans cairnq_tasks_claim_idx from the start of its
// queue. The entries at the start are the tasks claimed most recently:
// vacuum removes them, and a scan that finds them dead marks them so the
// next one skips them, but neither can happen while a snapshot older than
// them lives (a long transaction, a report on a replica with
// hot_standby_feedback). Then every claim visits the heap row of every
// task claimed since the snapshot began, and at 5,000 tasks/s the claim
// rate fell to a sixth within three minutes (docs/benchmarks.md,
// "Sustained load").
//
// So a worker remembers where its draws found the front, per draw
// shape, and draws from where the front stood frontLag ago
// (claim_window.sql): a task whose due time was read before the draws
// that passed it but committed after them (a group of inserts waiting on
// its commit) is still ahead of that. It still draws in full at least
// every fullDrawEvery, and sooner once a draw came back short (the queue
// may be drained but for a task behind the front), but never so often
// that full draws take more than 1/fullDrawShare of the time (and never
// less often than maxDrawGap).

const (
	// frontLag is how far behind its newest position a front is read. A
	// draw from it passes the entries of what was claimed in that time,
	// dead or not: at 5,000 tasks/s under a held snapshot, 5,000 heap
	// visits, about a millisecond.
	frontLag = time.Second
	// fullDrawEvery bounds how long a task committed behind the front (a
	// long transaction's submit, a scheduler's late slot) waits.
	fullDrawEvery = time.Second
	// fullDrawShare: a full draw that took d waits fullDrawShare*d
	// before the next, so a slow one (the scan the window exists to
	// spare) costs a twentieth of the worker's time, not all of it.
	fullDrawShare = 20
	// maxDrawGap caps that spacing, so a task behind the front waits at
	// most this long even while full draws are slow; the same cap holds
	// the reads for an expired lease (leaseReads).
	maxDrawGap = 10 * time.Second
)

// spacing is how long after a full draw (or a read for expired leases)
// that took cost the next may run.
func spacing(cost time.Duration) time.Duration { return min(fullDrawShare*cost, maxDrawGap) }

// claimFronts holds one front per draw shape (queue and names).
type claimFronts struct {
	mu  sync.Mutex
	by  map[string]*claimFront
	lag time.Duration // frontLag; tests shorten it
}

// claimFront is where a draw shape's draws found its queue's front, the
// newest last, each the highest priority a draw took and, of the tasks
// it took at that priority, the first in claim order (run_at_ms, then id).
type claimFront struct {
	seen     []frontSeen
	fullAt   time.Time     // when the last full draw started
	fullCost time.Duration // how long it took
	short    bool          // the last draw took fewer than its limit
}

// frontSeen is one draw's front.
type frontSeen struct {
	at       time.Time
	priority int
	floor    frontFloor
}

// frontFloor is a claim-order position within one priority.
type frontFloor struct {
	runAtMS int64
	id      string
}

func (f frontFloor) before(g frontFloor) bool {
	return f.runAtMS < g.runAtMS || (f.runAtMS == g.runAtMS && f.id < g.id)
}

// frontKey names a draw shape; "" for one the window cannot serve (several
// queues: no equality seeks the index past the front).
func frontKey(queues, names []string) string {
	if len(queues) != 1 {
		return ""
	}
	// NUL separates: no name holds one (ValidateName).
	if names == nil {
		return queues[0] + "\x00"
	}
	return queues[0] + "\x00\x00" + strings.Join(names, "\x00")
}

// plan says how the draw shape key draws at now: windowed (from priority
// and floor) or, when it reports false, a full draw.
func (f *claimFronts) plan(key string, now time.Time) (windowed bool, priority int, floor frontFloor) {
	if key == "" {
		return false, 0, frontFloor{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.by[key]
	if c == nil {
		return false, 0, frontFloor{}
	}
	since, spaced := now.Sub(c.fullAt), spacing(c.fullCost)
	if since >= max(fullDrawEvery, spaced) || (c.short && since >= spaced) {
		return false, 0, frontFloor{}
	}
	i := c.settled(now, f.lag)
	if i < 0 {
		return false, 0, frontFloor{}
	}
	c.seen = c.seen[i:]
	return true, c.seen[0].priority, c.seen[0].floor
}

// settled is the index of the newest front seen at least lag before now,
// or -1; the fronts before it are of no more use.
func (c *claimFront) settled(now time.Time, lag time.Duration) int {
	i := len(c.seen) - 1
	for i >= 0 && now.Sub(c.seen[i].at) < lag {
		i--
	}
	return i
}

// observe records a draw of shape key that started at start and took
// took: full or windowed, its limit and the tasks it claimed. A draw that
// claimed nothing leaves the front where it was.
func (f *claimFronts) observe(key string, full bool, start time.Time, took time.Duration, limit int, tasks []*cairnqtype.Task) {
	if key == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.by == nil {
		f.by = map[string]*claimFront{}
	}
	c := f.by[key]
	if c == nil {
		c = &claimFront{}
		f.by[key] = c
	}
	if full {
		c.fullAt, c.fullCost = start, took
	}
	c.short = len(tasks) < limit
	if len(tasks) == 0 {
		return
	}
	// RETURNING gives no order: the front is the highest priority taken,
	// and the first task in claim order taken at it.
	seen := frontSeen{at: start, priority: tasks[0].Priority, floor: floorOf(tasks[0])}
	for _, t := range tasks[1:] {
		switch at := floorOf(t); {
		case t.Priority > seen.priority:
			seen.priority, seen.floor = t.Priority, at
		case t.Priority == seen.priority && at.before(seen.floor):
			seen.floor = at
		}
	}
	i := c.settled(start, f.lag)
	if i > 0 {
		c.seen = c.seen[i:]
	}
	if full && i >= 0 {
		// A full draw sees the true front. Where it took tasks behind
		// the settled front, at that front's priority (a long
		// transaction's submit, a late batch), that front and the newer
		// ones at that priority move back to the earliest of them: else
		// each full draw would take only its limit of them. A settled
		// front moved back is as safe to read as it was: a task due
		// before a front a lag old is itself a lag old. A task behind
		// only a newer front committed within a lag of its due time, and
		// the draws from the settled front take it; moving the newer
		// fronts back for it too (out-of-order group commits, many a
		// second under load) made every draw walk the last second's
		// claims. The draw's own front waits out the lag like any other:
		// inserts due before it may still be committing
		// (docs/benchmarks.md, "Sustained load").
		settled := c.seen[0]
		if at, ok := earliestAt(tasks, settled.priority); ok && at.before(settled.floor) {
			for k := range c.seen {
				if e := &c.seen[k]; e.priority == settled.priority && at.before(e.floor) {
					e.floor = at
				}
			}
		}
	}
	c.seen = append(c.seen, seen)
}

// earliestAt is the first position in claim order of the tasks at
// priority, if any is.
func earliestAt(tasks []*cairnqtype.Task, priority int) (at frontFloor, ok bool) {
	for _, t := range tasks {
		if t.Priority != priority {
			continue
		}
		if f := floorOf(t); !ok || f.before(at) {
			at, ok = f, true
		}
	}
	return at, ok
}

func floorOf(t *cairnqtype.Task) frontFloor { return frontFloor{t.RunAt.UnixMilli(), t.ID} }

// args are the window statements' arguments for a front at priority with
// floor f.
func (f frontFloor) args(priority int) protocol.Args {
	return protocol.Args{"priority": int64(priority), "floor_ms": f.runAtMS, "floor_id": f.id}
}
