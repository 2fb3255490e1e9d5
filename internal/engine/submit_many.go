package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/protocol"
)

// MaxSubmitMany bounds how many tasks one SubmitMany call takes.
const MaxSubmitMany = cairnqtype.MaxSubmitMany

// insertManyBytes bounds the JSON one insert_many statement of a batch
// carries: a text[] argument is one value on the wire, and Postgres
// refuses a value past 1 GB, so a batch of large payloads goes in several
// statements (of the same transaction).
const insertManyBytes = 64 << 20

// manyBatch is a validated batch: each item's row, stamped with its id
// in the batch's order, and the keys it names.
type manyBatch struct {
	ps   []SubmitParams
	ins  []*insertRow
	keys []string // distinct, for lock_keys
	// maxBytes bounds one insert_many's JSON: insertManyBytes (tests
	// lower it).
	maxBytes int
	// copiedAt is the moment (clock_ms) writeManyPG read for the rows it
	// wrote by COPY, 0 when they went by insert_many: a write's keys
	// copied after them take the same moment (copyKeys).
	copiedAt int64
}

// prepareMany validates ps as Submit validates each (a bad item is a
// *SubmitItemError with its index), admits each queue once (SubmitParams.
// Admit, in the order the queues first appear) and mints the ids, in
// order, so that the tasks' ids sort as the batch does.
func (s *Store) prepareMany(ctx context.Context, ps []SubmitParams) (*manyBatch, error) {
	if len(ps) > MaxSubmitMany {
		return nil, argError("submit many", "batch", "has %d tasks, the limit is %d; split it into several calls", len(ps), MaxSubmitMany)
	}
	b := &manyBatch{ps: ps, ins: make([]*insertRow, len(ps)), maxBytes: insertManyBytes}
	seen := map[string]bool{}
	for i, p := range ps {
		if err := batchCtx(ctx, i); err != nil {
			return nil, err
		}
		ins, err := submitArgs(p)
		if err != nil {
			return nil, &cairnqtype.SubmitItemError{Index: i, Err: err}
		}
		b.ins[i] = ins
		if p.Key != "" && !seen[p.Key] {
			seen[p.Key] = true
			b.keys = append(b.keys, p.Key)
		}
	}
	admitted := map[string]bool{}
	for i, p := range ps {
		queue := b.ins[i].queue
		if p.Admit == nil || admitted[queue] {
			continue
		}
		admitted[queue] = true
		if err := p.Admit(ctx, queue); err != nil {
			return nil, &cairnqtype.SubmitItemError{Index: i, Err: err}
		}
	}
	now := s.now() // after the waits: the ids carry the write's time
	for i, p := range ps {
		stampID(b.ins[i], p, now)
	}
	return b, nil
}

// batchCtx is ctx's error, read every 256th item of a batch: encoding
// ten thousand values takes long enough for a deadline to pass.
func batchCtx(ctx context.Context, i int) error {
	if i%256 != 0 {
		return nil
	}
	return ctx.Err()
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
// On SQLite the batch is one request to the writer. On Postgres it is a
// handful of statements whatever its size (submitManyPG): the keys' locks
// are taken first, in one statement and a fixed order, so that two
// batches naming the same keys in different orders cannot deadlock.
func (s *Store) SubmitMany(ctx context.Context, ps []SubmitParams) ([]*cairnqtype.Task, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	b, err := s.prepareMany(ctx, ps)
	if err != nil || len(ps) == 0 {
		return []*cairnqtype.Task{}, err
	}
	var tasks []*cairnqtype.Task
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

// savepointTimeout bounds the undo and the release of SubmitManyTx's
// savepoint, which run past the caller's context: a hung connection must
// not hold the call forever.
const savepointTimeout = 10 * time.Second

// SubmitManyTx is SubmitMany inside a transaction the application holds,
// through sess: the tasks exist for workers once the application commits.
// The batch runs under a savepoint of that transaction, so a batch that
// fails leaves nothing of itself in it, and (on Postgres, where an error
// aborts a transaction) leaves the transaction usable. sess must be in a
// transaction: a savepoint cannot be taken otherwise. Postgres only.
func (s *Store) SubmitManyTx(ctx context.Context, sess executor.Session, ps []SubmitParams) ([]*cairnqtype.Task, error) {
	if err := s.needsPostgres(ctx, "SubmitManyTx", sess); err != nil {
		return nil, err
	}
	b, err := s.prepareMany(ctx, ps)
	if err != nil || len(ps) == 0 {
		return []*cairnqtype.Task{}, err
	}
	if err := sess.Exec(ctx, "SAVEPOINT "+submitManySavepoint); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("cairnq: SubmitManyTx: taking a savepoint: %w", err)
		}
		return nil, fmt.Errorf("cairnq: SubmitManyTx: taking a savepoint (is the session in a transaction?): %w", err)
	}
	tasks, err := s.submitManyIn(ctx, pgQuerier{sess}, b)
	if err == nil {
		err = ctx.Err() // a deadline that passed after the last statement ends the call too
	}
	if err != nil {
		// The undo runs even when ctx has ended (a deadline hit between
		// two of the batch's statements): without it the application
		// could commit half the batch.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), savepointTimeout)
		undo := sess.Exec(uctx, "ROLLBACK TO SAVEPOINT "+submitManySavepoint+"; RELEASE SAVEPOINT "+submitManySavepoint)
		cancel()
		if undo != nil {
			return nil, errors.Join(err, fmt.Errorf("cairnq: SubmitManyTx: rolling back to the savepoint: %w", undo))
		}
		return nil, err
	}
	// Not under ctx: once the batch is in, a deadline passing now must not
	// leave it in the application's transaction beside an error. A release
	// cut short by savepointTimeout breaks the transaction, which then
	// commits nothing: the call and the transaction still agree.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), savepointTimeout)
	defer cancel()
	if err := sess.Exec(rctx, "RELEASE SAVEPOINT "+submitManySavepoint); err != nil {
		return nil, fmt.Errorf("cairnq: SubmitManyTx: releasing the savepoint: %w", err)
	}
	return tasks, nil
}

// submitManyIn writes b inside the transaction q belongs to. On SQLite
// each item runs Submit's own statements (in process, they cost little);
// on Postgres the batch is planned (submitManyPG).
func (s *Store) submitManyIn(ctx context.Context, q querier, b *manyBatch) ([]*cairnqtype.Task, error) {
	if s.dialect == protocol.Postgres {
		return s.submitManyPG(ctx, q, b)
	}
	out := make([]*cairnqtype.Task, len(b.ps))
	for i, p := range b.ps {
		// The writer runs a started request to its end, so the batch ends
		// itself at ctx's end; its savepoint then keeps nothing of it.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t, err := s.submitIn(ctx, q, p.Key, p.Conflict, b.ins[i])
		if err != nil {
			return nil, &cairnqtype.SubmitItemError{Index: i, Err: err}
		}
		out[i] = t
	}
	return out, nil
}

// submitManyPG writes b in a handful of statements whatever its size:
// lock_keys (every key, in one fixed order), get_by_keys (what each key
// points at), insert_many or COPY (every new task: writeManyPG), cancel
// for each live task a replace supersedes, and upsert_keys (where each
// key points after the batch). Which items write a task is decided in
// between, in Go, by Submit's own rule (submitIn) applied item after
// item to what the keys point at as the batch goes, so the batch does
// what the same Submits one after another would.
func (s *Store) submitManyPG(ctx context.Context, q querier, b *manyBatch) ([]*cairnqtype.Task, error) {
	current := map[string]*cairnqtype.Task{} // the task each key points at, as the batch goes
	if len(b.keys) > 0 {
		keys := protocol.Args{"keys": pgArray(b.keys)}
		if _, err := s.exec(ctx, q, stmtLockKeys, keys); err != nil {
			return nil, err
		}
		rows, err := s.execRows(ctx, q, stmtGetByKeys, keys)
		if err != nil {
			return nil, err
		}
		for i := range rows.len() {
			key, _, err := asString("task_key", rows.value(i, "task_key"))
			if err != nil {
				return nil, err
			}
			if current[key], err = taskAt(rows, i); err != nil {
				return nil, err
			}
		}
	}
	out := make([]*cairnqtype.Task, len(b.ps))
	writes := make([]int, 0, len(b.ps)) // the items that write a task, in order
	var superseded []*cairnqtype.Task   // live tasks a replace cancels
	var reused []int                    // items that met a task of the batch
	pending := map[string]bool{}        // the ids a key points at that the batch writes
	for i, p := range b.ps {
		if p.Key == "" {
			writes = append(writes, i)
			continue
		}
		if t, done, err := conflictOutcome(p, current[p.Key], &superseded); err != nil {
			return nil, &cairnqtype.SubmitItemError{Index: i, Err: err}
		} else if done {
			out[i] = t
			if pending[t.ID] {
				reused = append(reused, i)
			}
			continue
		}
		writes = append(writes, i)
		// Until insert_many returns it, the task is what insert_task
		// writes: queued, under its minted id.
		id := b.ins[i].id
		current[p.Key] = &cairnqtype.Task{ID: id, Status: cairnqtype.StatusQueued}
		pending[id] = true
	}
	if err := s.writeManyPG(ctx, q, b, writes, out); err != nil {
		return nil, err
	}
	var written map[string]*cairnqtype.Task // by id, where keys need it
	if len(b.keys) > 0 {
		written = make(map[string]*cairnqtype.Task, len(pending))
		for _, i := range writes {
			if b.ps[i].Key != "" {
				written[out[i].ID] = out[i]
			}
		}
		for _, i := range reused {
			out[i] = written[out[i].ID]
		}
	}
	for _, t := range superseded {
		if _, err := s.exec(ctx, q, stmtCancel, protocol.Args{"id": t.ID}); err != nil {
			return nil, err
		}
	}
	var keys, ids []string
	for _, k := range b.keys {
		if t := current[k]; t != nil && written[t.ID] != nil {
			keys, ids = append(keys, k), append(ids, t.ID)
		}
	}
	if len(keys) > 0 {
		if _, err := s.exec(ctx, q, stmtUpsertKeys, protocol.Args{"keys": pgArray(keys), "task_ids": pgArray(ids)}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// conflictOutcome is submitIn's decision for keyed item p whose key
// points at existing (nil: the key is free): done with the task to
// return (a reuse), an error (a reject), or neither, when p writes a new
// task; a live task that new one supersedes is added to superseded.
func conflictOutcome(p SubmitParams, existing *cairnqtype.Task, superseded *[]*cairnqtype.Task) (t *cairnqtype.Task, done bool, err error) {
	if existing == nil {
		return nil, false, nil
	}
	reused, cancel, err := keyConflict(p.Key, p.Conflict, existing)
	if err != nil || reused != nil {
		return reused, reused != nil, err
	}
	if cancel {
		*superseded = append(*superseded, existing)
	}
	return nil, false, nil
}

// insertManyPG writes the tasks of b's items at with insert_many, in as
// few statements as b.maxBytes allows, each task into out at its item's
// index.
func (s *Store) insertManyPG(ctx context.Context, q querier, b *manyBatch, at []int, out []*cairnqtype.Task) error {
	for len(at) > 0 {
		n, weight := 0, 0
		for n < len(at) && (n == 0 || weight+b.ins[at[n]].weight() <= b.maxBytes) {
			weight += b.ins[at[n]].weight()
			n++
		}
		chunk := make([]*insertRow, n)
		for j, i := range at[:n] {
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
			t, err := insertedTask(r.Value.rows, r.Value.i, chunk[j])
			if err != nil {
				return err
			}
			out[at[j]] = t
		}
		at = at[n:]
	}
	return nil
}

// queuedMany wakes this process's idle workers for each queue that got a
// queued task.
func (s *Store) queuedMany(tasks []*cairnqtype.Task) {
	woken := map[string]bool{}
	for _, t := range tasks {
		if t != nil && t.Status == cairnqtype.StatusQueued && !woken[t.Queue] {
			woken[t.Queue] = true
			s.hub.Queued(t.Queue)
		}
	}
}
