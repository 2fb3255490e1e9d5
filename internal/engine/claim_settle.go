package engine

import (
	"context"

	"github.com/cairnq/cairnq-go/internal/storeaccess"
	"github.com/cairnq/cairnq-go/protocol"
)

// A busy worker's settlements can ride on its next claim
// (ClaimHints.Settle): complete_many runs ahead of the claim in the
// claim's transaction. On SQLite, where every write goes through one
// writer, that makes a worker's cycle one request and one commit where
// it was one per finished call plus the claim's.

// settleIn settles cs on q (in the caller's transaction, if any) and
// records each one's outcome. A completion SQLite's complete_many cannot
// take as JSON text runs alone, as the writer's grouped completions do.
// It may run again when the transaction is retried; each run sets every
// outcome afresh.
func (s *Store) settleIn(ctx context.Context, q querier, cs []*storeaccess.Completion) error {
	if s.dialect == protocol.Postgres {
		group := make([]completion, len(cs))
		for i, c := range cs {
			group[i] = completion{id: c.ID, workerID: c.WorkerID, result: c.Result}
		}
		for i, res := range s.completeManyPG(ctx, q, group) {
			if res.err != nil {
				return res.err
			}
			cs[i].Status, cs[i].Err = "", &LostLeaseError{ID: cs[i].ID}
			if res.rows != nil {
				ref, err := refAt(res.rows, res.i)
				if err != nil {
					return err
				}
				cs[i].Status, cs[i].Err = string(ref.Status), nil
			}
		}
		return nil
	}
	group := make([]*sqliteCompletion, len(cs))
	for i, c := range cs {
		group[i] = &sqliteCompletion{id: c.ID, workerID: c.WorkerID, result: c.Result}
	}
	err := s.completeMany(q, group)
	if err == errNotJSONText {
		for _, c := range group {
			if err := s.completeOne(q, c); err != nil {
				return err
			}
		}
		err = nil
	}
	if err != nil {
		return err
	}
	for i, c := range group {
		cs[i].Status, cs[i].Err = string(c.status), c.err
	}
	return nil
}

// announce tells this process's waiters about the settled tasks of cs.
func (s *Store) announce(cs []*storeaccess.Completion) {
	for _, c := range cs {
		if c.Err == nil {
			s.settledRef(TaskRef{ID: c.ID, Status: Status(c.Status)})
		}
	}
}

// settleCompletions settles cs in a write of their own: on SQLite a
// worker's completions its claim loop could not carry, on Postgres those
// of its settler, there one statement outside any explicit transaction.
func (s *Store) settleCompletions(ctx context.Context, cs []*storeaccess.Completion) error {
	if len(cs) == 0 {
		return nil
	}
	write := s.be.write
	if s.dialect == protocol.Postgres { // settleIn runs one complete_many there
		write = s.be.writeSingle
	}
	err := write(ctx, func(q querier) error { return s.settleIn(ctx, q, cs) })
	if err == nil {
		s.announce(cs)
	}
	return err
}
