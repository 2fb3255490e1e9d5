package conformance

// The bulk submit check (submit_many): a batch goes through the executor
// as a handful of statements (lock_keys, insert_many, Submit's keyed
// statements) in one transaction, or under a savepoint of the
// application's own.

import (
	"context"
	"errors"
	"fmt"
	"sync"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
)

// submitMany: a batch of keyed and unkeyed items comes back in order,
// each task as stored; a bad item fails it whole, writing nothing;
// SubmitManyTx commits and rolls back with the executor's transaction,
// holding the keys' advisory locks; two batches naming the same keys in
// opposite orders do not deadlock.
func (s *suite) submitMany(r reporter) {
	e := s.setup(r)
	c := s.client(r, e)
	items := make([]cairnq.SubmitItem, 30)
	for i := range items {
		o := cairnq.SubmitOptions{Queue: fmt.Sprintf("certify-%d", i%3), Priority: i - 15, MaxAttempts: 1 + i%4,
			Metadata: map[string]any{"i": i}}
		if i%5 == 0 {
			o.Key = fmt.Sprintf("certify-many-%d", i%15) // each key twice: the second reuses the first's task
		}
		if i%4 == 1 {
			o.ParentID, o.RootID, o.CorrelationID = "task_parent", "task_root", fmt.Sprintf("corr \"%d\"", i)
		}
		items[i] = cairnq.SubmitItem{Name: fmt.Sprintf("certify.many-%d", i), Payload: map[string]any{"i": i, "s": "naïve \"q\" {,} NULL"}, Options: o}
	}
	tasks, err := c.SubmitMany(e.ctx, items)
	if err != nil {
		r.Fatalf("SubmitMany of %d items failed: %v. Fix the failing named checks first (params_bind, int8_normalized, tx_commits)", len(items), err)
	}
	firstOfKey := map[string]int{}
	for i, it := range items {
		want := i
		if k := it.Options.Key; k != "" {
			if j, ok := firstOfKey[k]; ok {
				want = j
			} else {
				firstOfKey[k] = i
			}
		}
		got, err := c.Get(e.ctx, tasks[i].ID)
		if err != nil {
			r.Fatalf("Get(%s) of batch item %d: %v", tasks[i].ID, i, err)
		}
		o := items[want].Options
		if got.Name != items[want].Name || tasks[i].Name != got.Name || got.Queue != o.Queue || got.Priority != o.Priority ||
			got.MaxAttempts != o.MaxAttempts || got.ParentID != o.ParentID || got.CorrelationID != o.CorrelationID ||
			got.Status != cairnq.StatusQueued {
			r.Errorf("batch item %d: SubmitMany returned %+v, Get reads %+v; want item %d's task with every option it was given", i, tasks[i], got, want)
		}
	}
	if n := count(r, e.ctx, e.ex, "cairnq_tasks"); n != int64(len(items)-3) {
		r.Errorf("the database holds %d tasks after a batch of %d items of which 3 reuse an earlier item's key; want %d", n, len(items), len(items)-3)
	}

	bad := append(items[:2:2], cairnq.SubmitItem{Name: "certify.many", Options: cairnq.SubmitOptions{Key: "certify-many-0", Conflict: cairnq.ConflictReject}})
	_, err = c.SubmitMany(e.ctx, bad)
	var ie *cairnq.SubmitItemError
	if !errors.As(err, &ie) || ie.Index != 2 || !errors.Is(err, cairnq.ErrAlreadyExists) {
		r.Errorf("a batch whose item 2 meets a taken key with the reject strategy returned %v; want a *SubmitItemError with index 2 wrapping ErrAlreadyExists", err)
	}
	if n := count(r, e.ctx, e.ex, "cairnq_tasks"); n != int64(len(items)-3) {
		r.Errorf("a failed batch changed the task count to %d: Tx must roll back when fn returns an error (see tx_rolls_back_on_error)", n)
	}

	s.submitManyTx(r, e, c)
	s.submitManyNoDeadlock(r, e, c)
}

// submitManyTx: SubmitManyTx inside the executor's Tx holds the keys'
// locks, and its tasks exist exactly when the transaction commits.
func (s *suite) submitManyTx(r reporter, e env, c *cairnq.Client) {
	r.Helper()
	items := []cairnq.SubmitItem{{Name: "certify.tx-many"}, {Name: "certify.tx-many", Options: cairnq.SubmitOptions{Key: "certify-tx-a"}},
		{Name: "certify.tx-many", Options: cairnq.SubmitOptions{Key: "certify-tx-b"}}}
	before := count(r, e.ctx, e.ex, "cairnq_tasks")
	errRollback := errors.New("certify: roll back")
	err := e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		if _, err := c.SubmitManyTx(ctx, sess, items); err != nil {
			return err
		}
		row := one(r, ctx, sess, "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
		if n, err := int8Value(column(r, row, "n")); err != nil || n != 2 {
			r.Errorf("inside the transaction of a batch naming two keys, the session holds %d advisory locks (%v); want 2. Fix: every statement of a Tx session must run on the transaction's one connection (see tx_is_one_connection)", n, err)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		r.Fatalf("SubmitManyTx inside Tx failed: %v. Fix: the session must run Exec (SAVEPOINT) and Query inside the transaction", err)
	}
	if n := count(r, e.ctx, e.ex, "cairnq_tasks"); n != before {
		r.Errorf("a rolled-back SubmitManyTx left %d tasks", n-before)
	}
	err = e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		_, err := c.SubmitManyTx(ctx, sess, items)
		return err
	})
	if err != nil {
		r.Fatalf("SubmitManyTx inside Tx failed: %v", err)
	}
	if n := count(r, e.ctx, e.ex, "cairnq_tasks"); n != before+3 {
		r.Errorf("a committed SubmitManyTx of 3 items left %d tasks, want 3", n-before)
	}
}

// submitManyNoDeadlock runs two keyed batches at once, a few rounds, with
// their keys in opposite orders.
func (s *suite) submitManyNoDeadlock(r reporter, e env, c *cairnq.Client) {
	r.Helper()
	const keys, rounds = 20, 5
	batch := func(reversed bool) []cairnq.SubmitItem {
		items := make([]cairnq.SubmitItem, keys)
		for i := range items {
			k := i
			if reversed {
				k = keys - 1 - i
			}
			items[i] = cairnq.SubmitItem{Name: "certify.order", Options: cairnq.SubmitOptions{Key: fmt.Sprintf("certify-order-%d", k), Conflict: cairnq.ConflictReplace}}
		}
		return items
	}
	for round := range rounds {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j := range 2 {
			wg.Go(func() { _, errs[j] = c.SubmitMany(e.ctx, batch(j == 1)) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			r.Fatalf("round %d of two batches naming the same keys in opposite orders: %v. Fix: run each Tx on one connection and pass statements through unchanged", round, err)
		}
	}
}
