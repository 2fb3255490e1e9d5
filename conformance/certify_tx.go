package conformance

// The transaction checks (tx_*): a Tx session is one transaction on one
// connection, committed when fn returns nil and rolled back otherwise.

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairnq/cairnq-go/executor"
)

// txTable makes the table the tx checks write to.
func txTable(r reporter, e env) {
	r.Helper()
	exec(r, e, "CREATE TABLE cairnq_certify_tx (v text NOT NULL)")
}

func insertTx(ctx context.Context, sess executor.Session, v string) error {
	rows, err := sess.Query(ctx, "INSERT INTO cairnq_certify_tx (v) VALUES ($1)", v)
	if err == nil && len(rows) != 0 {
		err = fmt.Errorf("an INSERT without RETURNING returned %d rows, want none", len(rows))
	}
	return err
}

// poolUsable checks the executor still runs statements, a few times over
// so that a connection returned to the pool in a broken state is met.
func poolUsable(r reporter, e env, after string) {
	r.Helper()
	for range 8 {
		if _, err := e.ex.Query(e.ctx, "SELECT 1 AS x"); err != nil {
			r.Fatalf("after %s, a statement on the executor failed: %v. Fix: end the transaction (roll back) before its connection goes back to the pool", after, err)
		}
	}
}

// txCommits: Tx commits when fn returns nil.
func (s *suite) txCommits(r reporter) {
	e := s.setup(r)
	txTable(r, e)
	err := e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		if err := insertTx(ctx, sess, "query"); err != nil {
			return err
		}
		return sess.Exec(ctx, "INSERT INTO cairnq_certify_tx (v) VALUES ('exec')")
	})
	if err != nil {
		r.Fatalf("Tx returned %v for a fn that returned nil. Fix: commit and return nil", err)
	}
	if n := count(r, e.ctx, e.ex, "cairnq_certify_tx"); n != 2 {
		r.Errorf("after Tx returned nil, the executor sees %d of the 2 rows fn inserted: Tx must commit when fn returns nil", n)
	}
}

// txRollsBackOnError: Tx rolls back when fn returns an error, and returns
// that error.
func (s *suite) txRollsBackOnError(r reporter) {
	e := s.setup(r)
	txTable(r, e)
	failure := errors.New("conformance: fn fails on purpose")
	err := e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		if err := insertTx(ctx, sess, "rolled back"); err != nil {
			return err
		}
		return failure
	})
	if !errors.Is(err, failure) {
		r.Errorf("Tx returned %v, not the error fn returned. Fix: return fn's error unchanged (or wrapped with %%w): the store finds ErrLostLease and its other sentinels in it with errors.Is", err)
	}
	if n := count(r, e.ctx, e.ex, "cairnq_certify_tx"); n != 0 {
		r.Errorf("Tx committed although fn returned an error: the row fn inserted is visible afterwards. Fix: Tx must roll back when fn returns a non-nil error")
	}
	// A statement that fails aborts the transaction; the connection must
	// still come back usable.
	err = e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		_, err := sess.Query(ctx, "SELECT * FROM cairnq_certify_missing")
		return err
	})
	if err == nil {
		r.Errorf("Tx returned nil although fn returned the error of a failed statement. Fix: roll back and return fn's error")
	}
	poolUsable(r, e, "a Tx whose statement failed")
}

// panicValue is what txRollsBackOnPanic panics with.
type panicValue struct{ note string }

// txRollsBackOnPanic: Tx rolls back when fn panics, and re-panics.
func (s *suite) txRollsBackOnPanic(r reporter) {
	e := s.setup(r)
	txTable(r, e)
	boom := &panicValue{"conformance: fn panics on purpose"}
	var recovered any
	var err error
	func() {
		defer func() { recovered = recover() }()
		err = e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
			if err := insertTx(ctx, sess, "rolled back"); err != nil {
				return err
			}
			panic(boom)
		})
	}()
	switch {
	case recovered == nil:
		r.Errorf("Tx returned (%v) although fn panicked: it swallowed the panic. Fix: roll back in a deferred function, then let the panic continue (re-panic with the recovered value)", err)
	case recovered != boom:
		r.Errorf("Tx re-panicked with %v, not fn's panic value. Fix: re-panic with exactly the value recover() returned", recovered)
	}
	if n := count(r, e.ctx, e.ex, "cairnq_certify_tx"); n != 0 {
		r.Errorf("Tx committed although fn panicked: the row fn inserted is visible afterwards. Fix: roll back in a deferred function when fn does not return")
	}
	poolUsable(r, e, "a Tx whose fn panicked")
}

// txIsOneConnection: every statement of a Tx session runs in the one
// transaction, which sees its own uncommitted writes; nothing else does.
func (s *suite) txIsOneConnection(r reporter) {
	e := s.setup(r)
	txTable(r, e)
	const fix = "Fix: run every statement of the session fn receives on the transaction's own connection (its pgx.Tx, *sql.Tx, ...), never on the pool"
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	err := e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		txid := func() (int64, error) {
			rows, err := sess.Query(ctx, "SELECT txid_current() AS txid")
			if err != nil || len(rows) != 1 {
				return 0, fmt.Errorf("txid_current(): %d rows, %v", len(rows), err)
			}
			return int8Value(rows[0]["txid"])
		}
		first, err := txid()
		if err != nil {
			return err
		}
		if err := insertTx(ctx, sess, "uncommitted"); err != nil {
			return err
		}
		rows, err := sess.Query(ctx, "SELECT count(*) AS n FROM cairnq_certify_tx")
		if err != nil || len(rows) != 1 {
			return fmt.Errorf("count in the session: %d rows, %v", len(rows), err)
		}
		if n, err := int8Value(rows[0]["n"]); err != nil || n != 1 {
			fail("the Tx session does not see the row it just inserted (count %d, %v): its statements ran on different connections. %s", n, err, fix)
		}
		if second, err := txid(); err != nil {
			return err
		} else if second != first {
			fail("two statements of one Tx session ran in different transactions (txid %d, then %d). %s", first, second, fix)
		}
		// Outside the transaction, on another pooled connection.
		octx, cancel := context.WithTimeout(ctx, notifyTimeout)
		defer cancel()
		rows, err = e.ex.Query(octx, "SELECT count(*) AS n FROM cairnq_certify_tx")
		if err != nil || len(rows) != 1 {
			fail("while a Tx was open, a statement on the executor failed (%d rows, %v): the pool must have a connection besides the transaction's", len(rows), err)
			return nil
		}
		if n, err := int8Value(rows[0]["n"]); err != nil || n != 0 {
			fail("a statement outside the transaction saw the row the Tx session inserted before commit (count %d, %v): the session ran it outside the transaction, in autocommit. %s", n, err, fix)
		}
		return nil
	})
	if err != nil {
		r.Fatalf("Tx failed: %v", err)
	}
	for _, p := range problems {
		r.Errorf("%s", p)
	}
	if n := count(r, e.ctx, e.ex, "cairnq_certify_tx"); n != 1 {
		r.Errorf("after the Tx committed, the executor sees %d rows, want 1", n)
	}
}
