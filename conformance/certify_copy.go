package conformance

// The COPY check (copy_rows): executor.Copier, which the store uses for
// the new tasks of a large SubmitMany batch or of a workflow's steps, and
// for those steps' new keys.

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
)

// copyRows checks executor.Copier where a transaction's session has it:
// the table holds exactly the rows given (NULLs, integers, JSON text as
// jsonb keeps it), a COPY the server refuses aborts the transaction and
// leaves nothing, a COPY whose transaction rolls back leaves nothing,
// and a batch large enough for the store to COPY comes back as it reads
// back.
func (s *suite) copyRows(r reporter) {
	e := s.setup(r)
	c := s.client(r, e) // migrates the schema
	const fix = "Fix: run COPY FROM STDIN on the session's own connection and transaction, each value as given (in COPY's text form: a backslash, tab, newline or carriage return escaped, NULL as \\N; pgx: PgConn().CopyFrom, which prepares nothing, so it works behind a transaction-mode pooler; lib/pq: pq.CopyIn)"
	columns := []string{"id", "name", "status", "payload", "max_attempts", "run_at_ms", "parent_id", "created_at_ms", "updated_at_ms"}
	rows := [][]any{
		{"task_copy_1", "certify.copy", "queued", `{"b": 1, "a" :[1.50, null]}`, int32(2), int64(1700000000000), nil, int64(1700000000000), int64(1700000000001)},
		{"task_copy_2", "certify.copy \"q\" {,} NULL \\N \\. a\\b\tc\nd\re", "queued", `"naïve \\ \t"`, int32(3), int64(1), "task_copy_1", int64(2), int64(3)},
	}
	var supported bool
	err := e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		cp, ok := sess.(executor.Copier)
		if !ok {
			return nil
		}
		supported = true
		n, err := cp.CopyFrom(ctx, "cairnq_tasks", columns, &sliceRows{rows: rows})
		if err != nil {
			return fmt.Errorf("CopyFrom of %d rows: %w. %s", len(rows), err, fix)
		}
		if n != int64(len(rows)) {
			return fmt.Errorf("CopyFrom of %d rows reported %d. %s", len(rows), n, fix)
		}
		return nil
	})
	if !supported {
		r.Skipf("%s's transaction sessions are not an executor.Copier, so a large SubmitMany batch or workflow step write runs insert_many and upsert_keys (slower, never different). Implement CopyFrom to write them by COPY", s.name)
	}
	if err != nil {
		r.Fatalf("%v", err)
	}
	got, err := e.ex.Query(e.ctx, "SELECT id, name, status, payload::text AS payload, max_attempts, run_at_ms, parent_id, created_at_ms, updated_at_ms FROM cairnq_tasks ORDER BY id")
	if err != nil {
		r.Fatalf("reading the copied rows: %v", err)
	}
	want := []executor.Row{
		{"id": "task_copy_1", "name": "certify.copy", "status": "queued", "payload": `{"a": [1.50, null], "b": 1}`, "max_attempts": int64(2),
			"run_at_ms": int64(1700000000000), "parent_id": nil, "created_at_ms": int64(1700000000000), "updated_at_ms": int64(1700000000001)},
		{"id": "task_copy_2", "name": "certify.copy \"q\" {,} NULL \\N \\. a\\b\tc\nd\re", "status": "queued", "payload": `"naïve \\ \t"`, "max_attempts": int64(3),
			"run_at_ms": int64(1), "parent_id": "task_copy_1", "created_at_ms": int64(2), "updated_at_ms": int64(3)},
	}
	if len(got) != len(want) {
		r.Fatalf("the table holds %d rows after a COPY of %d. %s", len(got), len(want), fix)
	}
	for i := range want {
		for col, w := range want[i] {
			if g := got[i][col]; !sameCopied(g, w) {
				r.Errorf("copied row %d column %s reads %s, want %v. %s", i, col, describe(g), w, fix)
			}
		}
	}

	// A row the server refuses (the status CHECK) fails the COPY and,
	// with it, the transaction: nothing of it stays.
	bad := [][]any{{"task_copy_3", "certify.copy", "queued", "{}", int32(1), int64(1), nil, int64(1), int64(1)},
		{"task_copy_4", "certify.copy", "bogus", "{}", int32(1), int64(1), nil, int64(1), int64(1)}}
	errCopied := errors.New("the COPY was accepted")
	err = e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		if _, err := sess.(executor.Copier).CopyFrom(ctx, "cairnq_tasks", columns, &sliceRows{rows: bad}); err != nil {
			return err
		}
		return errCopied
	})
	if err == nil || errors.Is(err, errCopied) {
		r.Errorf("a COPY of a row the status CHECK refuses returned %v; want the server's error. %s", err, fix)
	}
	if n := count(r, e.ctx, e.ex, "cairnq_tasks"); n != 2 {
		r.Errorf("a refused COPY left the table with %d rows, want the 2 before it: its transaction must roll back", n)
	}

	// A COPY belongs to the session's transaction: rolled back, it
	// leaves nothing, as a failed SubmitMany or SubmitManyTx must.
	errRollback := errors.New("roll back")
	more := [][]any{{"task_copy_5", "certify.copy", "queued", "{}", int32(1), int64(1), nil, int64(1), int64(1)}}
	err = e.ex.Tx(e.ctx, func(ctx context.Context, sess executor.Session) error {
		if _, err := sess.(executor.Copier).CopyFrom(ctx, "cairnq_tasks", columns, &sliceRows{rows: more}); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		r.Errorf("a transaction holding a COPY that then returned an error ended with %v; want that error", err)
	}
	if n := count(r, e.ctx, e.ex, "cairnq_tasks"); n != 2 {
		r.Errorf("a COPY in a transaction that rolled back left the table with %d rows, want the 2 before it: CopyFrom must run in the session's own transaction. %s", n, fix)
	}

	// A batch the store writes by COPY returns each task as it reads back.
	items := make([]cairnq.SubmitItem, 300)
	for i := range items {
		items[i] = cairnq.SubmitItem{Name: "certify.copy", Payload: map[string]any{"i": i, "s": "naïve"},
			Options: cairnq.SubmitOptions{Priority: i % 5, Metadata: map[string]any{"z": 1, "a": []any{i}}}}
	}
	tasks, err := c.SubmitMany(e.ctx, items)
	if err != nil {
		r.Fatalf("SubmitMany of %d items: %v. %s", len(items), err, fix)
	}
	for i, tk := range tasks {
		stored, err := c.Get(e.ctx, tk.ID)
		if err != nil {
			r.Fatalf("Get(%s): %v", tk.ID, err)
		}
		if !reflect.DeepEqual(tk, stored) {
			r.Errorf("batch item %d: SubmitMany returned %+v, the stored row reads %+v. %s", i, tk, stored, fix)
			return
		}
	}
}

// sameCopied reports whether v, a value as the executor returned it, is
// want: an int64, a string, or nil (NULL).
func sameCopied(v, want any) bool {
	switch w := want.(type) {
	case nil:
		return v == nil
	case int64:
		n, ok, err := executor.Int64(v)
		return ok && err == nil && n == w
	default:
		t, ok, err := executor.Text(v)
		return ok && err == nil && t == w
	}
}

// sliceRows yields rows as executor.CopyRows.
type sliceRows struct {
	rows [][]any
	next int
}

func (s *sliceRows) Next() bool             { s.next++; return s.next <= len(s.rows) }
func (s *sliceRows) Values() ([]any, error) { return s.rows[s.next-1], nil }
func (s *sliceRows) Err() error             { return nil }
