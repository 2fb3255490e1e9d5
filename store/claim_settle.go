package store

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

// settlement is the completions one claim settles.
type settlement struct {
	cs []*storeaccess.Completion
}

// settleIn settles st's completions on q, inside the caller's
// transaction, and records each one's outcome. A completion SQLite's
// complete_many cannot take as JSON text runs alone, as the writer's
// grouped completions do. It may run again when the transaction is
// retried; each run sets every outcome afresh.
func (s *Store) settleIn(q querier, st *settlement) error {
	status := map[string]Status{}
	if s.dialect == protocol.Postgres {
		ids := make([]string, len(st.cs))
		workers := make([]string, len(st.cs))
		results := make([]any, len(st.cs))
		for i, c := range st.cs {
			ids[i], workers[i], results[i] = c.ID, c.WorkerID, c.Result
		}
		rows, err := s.exec(context.Background(), q, protocol.StmtCompleteMany,
			protocol.Args{"ids": pgArray(ids), "worker_ids": pgArray(workers), "results": pgArrayNullable(results)})
		if err != nil {
			return err
		}
		for _, r := range rows {
			ref, err := rowToRef(r)
			if err != nil {
				return err
			}
			status[ref.ID] = ref.Status
		}
	} else {
		cs := make([]*sqliteCompletion, len(st.cs))
		for i, c := range st.cs {
			cs[i] = &sqliteCompletion{id: c.ID, workerID: c.WorkerID, result: c.Result}
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
		if err != nil {
			return err
		}
		for _, c := range cs {
			if c.err == nil {
				status[c.id] = c.status
			}
		}
	}
	for _, c := range st.cs {
		if got, ok := status[c.ID]; ok {
			c.Status, c.Err = string(got), nil
		} else {
			c.Status, c.Err = "", &LostLeaseError{ID: c.ID}
		}
	}
	return nil
}

// announce tells this process's waiters about the settled tasks.
func (st *settlement) announce(s *Store) {
	if st == nil {
		return
	}
	for _, c := range st.cs {
		if c.Err == nil {
			s.settledRef(TaskRef{ID: c.ID, Status: Status(c.Status)})
		}
	}
}

// settleCompletions settles cs in a transaction of their own: a worker's
// completions its claim loop could not carry.
func (s *Store) settleCompletions(ctx context.Context, cs []*storeaccess.Completion) error {
	if len(cs) == 0 {
		return nil
	}
	st := &settlement{cs: cs}
	err := s.be.write(ctx, func(q querier) error { return s.settleIn(q, st) })
	if err == nil {
		st.announce(s)
	}
	return err
}
