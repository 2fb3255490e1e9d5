package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/protocol"
)

// SubmitItemError names the item of a batch that failed it.
type SubmitItemError = cairnqtype.SubmitItemError

// MaxSubmitMany bounds how many tasks one SubmitMany call takes.
const MaxSubmitMany = cairnqtype.MaxSubmitMany

// insertManyBytes bounds the JSON one insert_many statement of a batch
// carries: a text[] argument is one value on the wire, and Postgres
// refuses a value past 1 GB, so a batch of large payloads goes in several
// statements (of the same transaction).
const insertManyBytes = 64 << 20

// manyBatch is a validated batch: each item's insert arguments, stamped
// with its id in the batch's order, and the keys it names.
type manyBatch struct {
	ps   []SubmitParams
	ins  []protocol.Args
	keys []string // distinct, for lock_keys
}

// prepareMany validates ps as Submit validates each (a bad item is a
// *SubmitItemError with its index), admits each queue once (SubmitParams.
// Admit, in the order the queues first appear) and mints the ids, in
// order, so that the tasks' ids sort as the batch does.
func (s *Store) prepareMany(ctx context.Context, ps []SubmitParams) (*manyBatch, error) {
	if len(ps) > MaxSubmitMany {
		return nil, argError("submit many", "batch", "has %d tasks, the limit is %d; split it into several calls", len(ps), MaxSubmitMany)
	}
	b := &manyBatch{ps: ps, ins: make([]protocol.Args, len(ps))}
	seen := map[string]bool{}
	for i, p := range ps {
		ins, err := submitArgs(p)
		if err != nil {
			return nil, &SubmitItemError{Index: i, Err: err}
		}
		b.ins[i] = ins
		if p.Key != "" && !seen[p.Key] {
			seen[p.Key] = true
			b.keys = append(b.keys, p.Key)
		}
	}
	admitted := map[string]bool{}
	for i, p := range ps {
		queue := b.ins[i]["queue"].(string)
		if p.Admit == nil || admitted[queue] {
			continue
		}
		admitted[queue] = true
		if err := p.Admit(ctx, queue); err != nil {
			return nil, &SubmitItemError{Index: i, Err: err}
		}
	}
	now := s.now() // after the waits: the ids carry the write's time
	for i, p := range ps {
		stampID(b.ins[i], p, now)
	}
	return b, nil
}

// SubmitMany stores the tasks ps in one transaction, each exactly as
// Submit would store it, and returns them in ps's order. The items apply
// in order, as that many Submits one after another would: an item whose
// key an earlier item of the batch used meets the task that item left
// (reuse returns it, replace cancels it, reject fails the batch). A bad
// item fails the whole batch with a *SubmitItemError naming its index,
// and nothing is written; a batch longer than MaxSubmitMany is an
// *ArgumentError. An empty batch writes nothing and returns no tasks.
//
// On SQLite the batch is one request to the writer. On Postgres the keys'
// locks are taken first, in one statement and a fixed order (so that two
// batches naming the same keys in different orders cannot deadlock), the
// unkeyed items go in one insert_many (more only past insertManyBytes),
// and each keyed item runs Submit's statements.
func (s *Store) SubmitMany(ctx context.Context, ps []SubmitParams) ([]*Task, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	b, err := s.prepareMany(ctx, ps)
	if err != nil || len(ps) == 0 {
		return []*Task{}, err
	}
	var tasks []*Task
	err = s.be.write(ctx, func(q querier) error {
		tasks, err = s.submitManyIn(ctx, q, b)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.queuedMany(tasks)
	return tasks, nil
}

// submitManySavepoint keeps a failed SubmitManyTx from leaving part of
// its batch in the application's transaction.
const submitManySavepoint = "cairnq_submit_many"

// SubmitManyTx is SubmitMany inside a transaction the application holds,
// through sess: the tasks exist for workers once the application commits.
// The batch runs under a savepoint of that transaction, so a batch that
// fails leaves nothing of itself in it, and (on Postgres, where an error
// aborts a transaction) leaves the transaction usable. sess must be in a
// transaction: a savepoint cannot be taken otherwise. Postgres only.
func (s *Store) SubmitManyTx(ctx context.Context, sess executor.Session, ps []SubmitParams) ([]*Task, error) {
	if err := s.needsPostgres(ctx, "SubmitManyTx", sess); err != nil {
		return nil, err
	}
	b, err := s.prepareMany(ctx, ps)
	if err != nil || len(ps) == 0 {
		return []*Task{}, err
	}
	if err := sess.Exec(ctx, "SAVEPOINT "+submitManySavepoint); err != nil {
		return nil, fmt.Errorf("cairnq: SubmitManyTx: taking a savepoint (is the session in a transaction?): %w", err)
	}
	tasks, err := s.submitManyIn(ctx, pgQuerier{sess}, b)
	if err != nil {
		undo := sess.Exec(ctx, "ROLLBACK TO SAVEPOINT "+submitManySavepoint+"; RELEASE SAVEPOINT "+submitManySavepoint)
		if undo != nil {
			return nil, errors.Join(err, fmt.Errorf("cairnq: SubmitManyTx: rolling back to the savepoint: %w", undo))
		}
		return nil, err
	}
	if err := sess.Exec(ctx, "RELEASE SAVEPOINT "+submitManySavepoint); err != nil {
		return nil, fmt.Errorf("cairnq: SubmitManyTx: releasing the savepoint: %w", err)
	}
	return tasks, nil
}

// submitManyIn writes b inside the transaction q belongs to.
func (s *Store) submitManyIn(ctx context.Context, q querier, b *manyBatch) ([]*Task, error) {
	out := make([]*Task, len(b.ps))
	pg := s.dialect == protocol.Postgres
	if pg {
		if len(b.keys) > 0 {
			if _, err := s.exec(ctx, q, stmtLockKeys, protocol.Args{"keys": pgArray(b.keys)}); err != nil {
				return nil, err
			}
		}
		if err := s.insertUnkeyedPG(ctx, q, b, out); err != nil {
			return nil, err
		}
	}
	for i, p := range b.ps {
		if pg && p.Key == "" {
			continue // written above
		}
		// On Postgres the key is locked already; on SQLite the writer's
		// transaction is the lock, and lock_key a no-op.
		t, err := s.submitIn(ctx, q, p.Key, p.Conflict, b.ins[i], !pg)
		if err != nil {
			return nil, &SubmitItemError{Index: i, Err: err}
		}
		out[i] = t
	}
	return out, nil
}

// insertUnkeyedPG writes b's unkeyed items with insert_many, in as few
// statements as insertManyBytes allows, and puts each task at its place
// in out.
func (s *Store) insertUnkeyedPG(ctx context.Context, q querier, b *manyBatch, out []*Task) error {
	var at []int // indexes of the chunk being gathered
	weight := 0
	flush := func() error {
		if len(at) == 0 {
			return nil
		}
		chunk := make([]protocol.Args, len(at))
		for j, i := range at {
			chunk[j] = b.ins[i]
		}
		args, ids := insertManyArgs(chunk)
		rows, err := s.execRows(ctx, q, stmtInsertMany, args)
		for j, r := range byID(ids, rows, err) {
			if r.Err != nil {
				return r.Err
			}
			if r.Value.rows == nil {
				return errors.New("cairnq: insert_many returned no row for " + ids[j])
			}
			if out[at[j]], err = taskAt(r.Value.rows, r.Value.i); err != nil {
				return err
			}
		}
		at, weight = at[:0], 0
		return nil
	}
	for i, p := range b.ps {
		if p.Key != "" {
			continue
		}
		w := insertWeight(b.ins[i])
		if len(at) > 0 && weight+w > insertManyBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		at, weight = append(at, i), weight+w
	}
	return flush()
}

// queuedMany wakes this process's idle workers for each queue that got a
// queued task.
func (s *Store) queuedMany(tasks []*Task) {
	woken := map[string]bool{}
	for _, t := range tasks {
		if t != nil && t.Status == StatusQueued && !woken[t.Queue] {
			woken[t.Queue] = true
			s.hub.Queued(t.Queue)
		}
	}
}
