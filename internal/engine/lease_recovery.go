package engine

import (
	"context"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/protocol"
)

// Lease recovery requeues (or, out of attempts, fails) the running tasks
// whose lease expired. It is a service of the claim, not a goroutine of
// its own: it runs in the claim's transaction, after the probe saw an
// expired lease (an idle worker) or once a poll interval (a busy one),
// so that a task it recovers can be claimed in the same commit, and on
// SQLite it costs no writer commit of its own. This file holds all of it:
// what a worker's claims remember of their looks (LeaseLook, owned by
// its claim loop and passed in ClaimRequest.Leases), how a store paces
// the looks of all its workers (readPace), and the statement
// (recoverLeases). The claim (claimSession) asks it whether to recover.

// Lease recovery reads cairnq_tasks_lease_idx for leases expired, and
// under a held snapshot that index keeps an entry for every task claimed
// since, each one's lease long past: the read grows with the hold as the
// full claim did. So does the probe's look for an expired lease
// (has_expired), which reads the same entries, and an idle worker probes
// on every submit it hears. So a store paces both as one read
// (leaseReads): its workers' recoveries and looks come at most every
// lookEvery between them and are spaced like full draws (spacing), so
// they take at most a twentieth of the time and come at least every
// maxDrawGap. A poll whose look or recovery the pace left out owes one
// by when it allows (LeaseLook.Due), and the worker polls then;
// if the pace refuses that poll too, another worker of the store has
// read since, which pays the debt. A probe or claim without the worker's
// LeaseLook (Store.Claim) is never paced.
const lookEvery = time.Second

// readPace paces a store's reads for an expired lease.
type readPace struct {
	mu   sync.Mutex
	at   time.Time     // when the last read started (or was reserved)
	cost time.Duration // how long the last read took
}

// take reports whether a read may start at now, at least lookEvery after
// the last and spaced by its cost, and if so reserves it, so that of the
// workers sharing the store one reads; if not, next is when one may.
func (r *readPace) take(now time.Time) (ok bool, next time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next = r.at.Add(max(lookEvery, spacing(r.cost)))
	if now.Before(next) {
		return false, next
	}
	r.at = now
	return true, time.Time{}
}

// ran records a read that started at start and took took.
func (r *readPace) ran(start time.Time, took time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at, r.cost = start, took
}

// LeaseLook is what a worker's claims remember of their looks for an
// expired lease. An idle worker's probe looks for one at every poll
// (paced per store on Postgres: claim_front.go); a busy worker, which
// skips the probe, recovers leases once every Every (its poll interval:
// as often as an idle one), paced the same way. When the pace leaves a
// look out, Due says by when the worker should poll again, so that an
// expired lease waits no longer than that unless another worker of the
// store read for one. A LeaseLook recovers at its first claim; with
// Every zero, at every claim. Not safe for concurrent use: one claim
// loop owns it.
type LeaseLook struct {
	// Every is how often a busy worker recovers leases.
	Every time.Duration
	// recoveredAt is when leases were last recovered.
	recoveredAt time.Time
	// due is set when the pace left out a look or a recovery.
	due time.Time
}

// Due is when a look the pace left out is owed: the worker's idle sleep
// ends by then. Zero when none is owed.
func (l *LeaseLook) Due() time.Time { return l.due }

// skipRecover reports whether a claim leaves recovery out.
func (l *LeaseLook) skipRecover(busy bool) bool {
	return busy && time.Since(l.recoveredAt) < l.Every
}

// owed reports whether a look the pace left out of an earlier claim is
// due. False on a nil LeaseLook.
func (l *LeaseLook) owed() bool {
	return l != nil && !l.due.IsZero() && !time.Now().Before(l.due)
}

// after records what a claim that succeeded did: whether a claim
// session ran, whether it was to recover leases, and the look its pace
// left due. A no-op on a nil LeaseLook.
func (l *LeaseLook) after(owed, ran, skipRecover bool, lookDue time.Time) {
	if l == nil {
		return
	}
	// Leases were recovered, or the probe looked and saw none expired
	// (the pace may have left either out: lookDue).
	recovered := ran && !skipRecover && lookDue.IsZero()
	if recovered {
		l.recoveredAt = time.Now()
	}
	switch {
	case owed && (!ran || !lookDue.IsZero()):
		// Paid: the pace refused this claim's look once it was due, so
		// another worker of the store read for expired leases since. Or
		// no claim session ran, and the next that does looks, or owes
		// anew.
		l.due = time.Time{}
	case !lookDue.IsZero():
		l.due = lookDue
	case recovered:
		l.due = time.Time{}
	}
}

// recoverLeases requeues (or fails) the tasks whose lease expired, and
// returns them.
func (s *Store) recoverLeases(ctx context.Context, q querier, base protocol.Args) ([]*cairnqtype.Task, error) {
	start := time.Now()
	rows, err := s.exec(ctx, q, stmtRecoverLeases, base)
	if s.dialect == protocol.Postgres {
		s.leaseReads.ran(start, time.Since(start))
	}
	if err != nil {
		return nil, err
	}
	return rowsToTasks(rows)
}
