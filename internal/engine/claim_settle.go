package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/workflowspec"
	"github.com/cairnq/cairnq-go/protocol"
)

// claimHints are what a worker's claim (Claims) tells its session.
type claimHints struct {
	// SkipProbe opens the claim transaction without the read-only probe
	// first. A worker whose last poll found work sets it: the probe exists
	// to keep idle workers off the write lock, and a busy one would pay
	// for it on every claim.
	SkipProbe bool
	// SkipRecover leaves expired leases for a later claim. A busy worker
	// sets it between recoveries: it claims many times a second, and
	// leases run for seconds at least.
	SkipRecover bool
	// Settle are finished attempts the claim settles before it draws, each
	// as Store.Complete would, in the claim's transaction: on SQLite a busy
	// worker's settlements ride on its next claim, one request and one
	// commit for both. The claim sets each one's outcome when it returns
	// without an error; with one, none of them was settled by it (as
	// uncertainly as any write whose reply was lost).
	Settle []*Completion
	// PaceLook lets the probe leave out its look for an expired lease
	// when the store read for one more recently than the pace allows
	// (Postgres; claim_front.go). The session's LookDue then says by
	// when a poll that looks is owed. An idle worker sets it: it probes
	// on every submit it hears, and under a held snapshot each look
	// reads every lease that ran out since. (A busy worker's recovery,
	// SkipProbe without SkipRecover, is paced the same way.)
	PaceLook bool
	// Limits are the global limits of the names the session draws, by
	// name: not a hint but a bound. A draw of one limited name takes the
	// name's lock, counts its running tasks and claims no more than the
	// limit leaves room for (claim_limit.go); the session then runs as one
	// transaction. The caller draws limited names in name order among
	// themselves, so that two sessions take the names' locks in one order.
	Limits map[string]GlobalLimit
}

// sessionResult is what claimSession reports besides its error.
type sessionResult struct {
	// Capped reports that a global limit bound a draw (limitedDraw): its
	// name's tasks may be queued beyond what the draw took.
	Capped bool
	// Ran reports that the claim transaction ran: the probe found work,
	// or there was none.
	Ran bool
	// LookDue is set when the pace left out the probe's look for an
	// expired lease (claimHints.PaceLook) or a busy worker's recovery: a
	// worker polls again by then, so that an expired lease waits no
	// longer than that unless another worker of the store read for one.
	LookDue time.Time
}

// A busy worker's settlements can ride on its next claim
// (claimHints.Settle): complete_many runs ahead of the claim in the
// claim's transaction. On SQLite, where every write goes through one
// writer, that makes a worker's cycle one request and one commit where
// it was one per finished call plus the claim's.

// settleIn settles cs on q (in the caller's transaction, if any) and
// records each one's outcome. A completion SQLite's complete_many cannot
// take as JSON text runs alone, as the writer's grouped completions do.
// It may run again when the transaction is retried; each run sets every
// outcome afresh.
func (s *Store) settleIn(ctx context.Context, q querier, cs []*Completion) error {
	var steps []string // the workflows' keys, for their locks
	for _, c := range cs {
		c.Advanced = Advanced{}
		if c.Step != nil {
			steps = append(steps, workflowspec.WorkflowKey(c.Step.Record))
		}
	}
	if len(steps) > 0 && s.dialect == protocol.Postgres {
		// The workflows' locks before the steps' rows, as every writer of
		// a workflow takes them, and before the workers' row locks: a
		// worker's heartbeat must not wait while this waits for a lock.
		if _, err := s.exec(ctx, q, stmtLockKeys, protocol.Args{"keys": pgArray(steps)}); err != nil {
			return err
		}
	}
	// The workers' row locks around complete_many, on Postgres only: on
	// SQLite this runs in the single writer, which orders every
	// statement already, and a heartbeat holding its row lock while it
	// waits for the writer would wait for this forever.
	unlock := func() {}
	if s.dialect == protocol.Postgres {
		locks := make([]sync.Locker, len(cs))
		for i, c := range cs {
			locks[i] = c.Rows
		}
		unlock = lockRows(locks)
	}
	// On Postgres a group of steps writes their succeeded keys in its
	// completion's statement (complete_steps), not in the advance's.
	marked := len(steps) > 0 && s.dialect == protocol.Postgres
	err := s.completeIn(ctx, q, cs, marked)
	unlock()
	if err != nil || len(steps) == 0 {
		return err
	}
	return s.advanceCompletedSteps(ctx, q, cs, marked)
}

// advanceCompletedSteps advances the workflows of the steps among cs
// that settleIn settled: each one that succeeded from its dependents
// (advanceFromSteps), each one the row ended otherwise (a cancel that won
// the success) by the full advance. marked says the successes' succeeded
// keys are written already (complete_steps).
func (s *Store) advanceCompletedSteps(ctx context.Context, q querier, cs []*Completion, marked bool) error {
	var as []*stepAdvance
	var of []*Completion
	for _, c := range cs {
		switch {
		case c.Step == nil || c.Err != nil || !c.Status.IsTerminal():
		case c.Status == cairnqtype.StatusSucceeded:
			as, of = append(as, &stepAdvance{mark: *c.Step, workerID: c.WorkerID, marked: marked}), append(of, c)
		default:
			var err error
			if c.Advanced, err = s.advanceHeldIn(ctx, q, "settle step", c.Step.Record, c.WorkerID, nil); err != nil {
				return err
			}
		}
	}
	if len(as) == 0 {
		return nil
	}
	if err := s.advanceFromSteps(ctx, q, "settle step", as); err != nil {
		return err
	}
	for i, a := range as {
		of[i].Advanced = a.adv
	}
	return nil
}

// completeIn runs complete_many for cs on q (complete_steps when
// marked) and records each one's outcome.
func (s *Store) completeIn(ctx context.Context, q querier, cs []*Completion, marked bool) error {
	if s.dialect == protocol.Postgres {
		for i, res := range s.completeManyPG(ctx, q, cs, marked) {
			if res.Err != nil {
				return res.Err
			}
			cs[i].Status, cs[i].Err = "", &cairnqtype.LostLeaseError{ID: cs[i].ID}
			if res.Value.rows != nil {
				ref, err := refAt(res.Value.rows, res.Value.i)
				if err != nil {
					return err
				}
				cs[i].Status, cs[i].Err = ref.Status, nil
			}
		}
		return nil
	}
	err := s.completeMany(q, cs)
	if err == errNotJSONText {
		for _, c := range cs {
			if err := s.completeOne(q, c); err != nil {
				return err
			}
		}
		err = nil
	}
	return err
}

// announce tells this process's waiters about the settled tasks of cs.
func (s *Store) announce(cs []*Completion) {
	for _, c := range cs {
		if c.Err == nil {
			s.settledRef(cairnqtype.TaskRef{ID: c.ID, Status: c.Status})
			s.afterAdvance(c.Advanced)
		}
	}
}

// SettleCompletions settles cs in a write of their own: on SQLite a
// worker's completions its claim loop could not carry, on Postgres those
// its completer gathered, there one statement outside any explicit
// transaction unless a workflow's step is among them (its advance and
// its workflow's lock need one).
func (s *Store) SettleCompletions(ctx context.Context, cs []*Completion) error {
	if len(cs) == 0 {
		return nil
	}
	write := s.be.write
	if s.dialect == protocol.Postgres && !slices.ContainsFunc(cs, func(c *Completion) bool { return c.Step != nil }) {
		write = s.be.writeSingle // settleIn runs one complete_many there
	}
	err := write(ctx, func(q querier) error { return s.settleIn(ctx, q, cs) })
	if err == nil {
		s.announce(cs)
	}
	return err
}
