package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/executor/sqlexec"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
	"github.com/cairnq/cairnq-go/protocol"
)

// countingExecutor is a real executor that counts the statements run
// through it, and through its transactions, by their SQL.
type countingExecutor struct {
	executor.Executor
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingExecutor) count(sql string) {
	c.mu.Lock()
	c.calls[sql]++
	c.mu.Unlock()
}

func (c *countingExecutor) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	c.count(sql)
	return c.Executor.Query(ctx, sql, args...)
}

func (c *countingExecutor) Tx(ctx context.Context, fn func(ctx context.Context, s executor.Session) error) error {
	return c.Executor.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		return fn(ctx, countingSession{s, c})
	})
}

type countingSession struct {
	executor.Session
	c *countingExecutor
}

func (s countingSession) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	s.c.count(sql)
	return s.Session.Query(ctx, sql, args...)
}

// snapshot returns the counts so far by statement name, and resets them.
func (c *countingExecutor) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	set := protocol.Statements(protocol.Postgres)
	for _, name := range set.Names() {
		if n := c.calls[set.Get(name).SQL]; n > 0 {
			out[name] = n
		}
	}
	c.calls = map[string]int{}
	return out
}

// openCountingPG opens a migrated Postgres store through database/sql,
// its statements counted, both closed after tb.
func openCountingPG(tb testing.TB) (*Store, *countingExecutor) {
	tb.Helper()
	db, err := sql.Open("pgx", pgtest.DSN(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	ex := &countingExecutor{Executor: sqlexec.New(db, nil), calls: map[string]int{}}
	s, err := OpenPostgres(context.Background(), ex, PostgresOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s, ex
}

// A Postgres batch is a handful of statements whatever its size, and a
// batch of large values is split only where insert_many's bound says.
func TestSubmitManyPostgresStatements(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, ex := openCountingPG(t)
	for i := range 3 { // live tasks for the batch's replaces to supersede
		if _, err := s.Submit(ctx, SubmitParams{Name: "pre", SubmitOptions: cairnqtype.SubmitOptions{Key: fmt.Sprintf("k%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	var ps []SubmitParams
	for i := range 200 {
		p := SubmitParams{Name: "many", Payload: i}
		switch i % 4 {
		case 1:
			p.Key = fmt.Sprintf("k%d", i%40) // ten keys, each five times: one write, four reuses
		case 2:
			p.Key, p.Conflict = fmt.Sprintf("k%d", i%3), cairnqtype.ConflictReplace
		}
		ps = append(ps, p)
	}
	ex.snapshot()
	tasks, err := s.SubmitMany(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	got := ex.snapshot()
	// Every replace supersedes the live task its key points at: the
	// three from before, then each one the batch wrote for k0..k2.
	want := map[string]int{stmtLockKeys: 1, stmtGetByKeys: 1, stmtInsertMany: 1, stmtUpsertKeys: 1, stmtCancel: 50}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("a batch of %d items ran %v; want %v", len(ps), got, want)
	}
	for i, task := range tasks {
		if task == nil || task.Name != "many" && task.Name != "pre" {
			t.Fatalf("task %d: %+v", i, task)
		}
	}

	b, err := s.prepareMany(ctx, ps[:5:5])
	if err != nil {
		t.Fatal(err)
	}
	// Items 0, 3 and 4 are unkeyed, 1 reuses k1's live task and 2
	// replaces k2's: four writes, each its own insert_many.
	b.maxBytes = 1
	err = s.be.write(ctx, func(q querier) (err error) {
		tasks, err = s.submitManyIn(ctx, q, b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := ex.snapshot()[stmtInsertMany]; n != 4 {
		t.Errorf("a batch of 4 writes under a 1-byte bound ran insert_many %d times, want 4", n)
	}
	for _, i := range []int{0, 2, 3, 4} {
		if string(tasks[i].Payload) != fmt.Sprint(i) {
			t.Errorf("task %d has payload %s, want %d", i, tasks[i].Payload, i)
		}
	}
	if string(tasks[1].Payload) == "1" {
		t.Errorf("item 1 wrote a task; want it to reuse k1's")
	}
}

// TestSubmitManyDeadlineMidWriteSQLite: a batch whose context ends after
// the writer has started it ends there, writing nothing, rather than run
// to its end and return nil (the writer runs a started request to its
// end, so the batch itself must look). The context ends inside the
// request the writer runs just before the batch, in the same transaction.
func TestSubmitManyDeadlineMidWriteSQLite(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "q.db"), SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	be := s.be.(*sqliteBackend)
	ps := make([]SubmitParams, 2000)
	for i := range ps {
		ps[i] = SubmitParams{Name: "bulk"}
	}
	// The writer holds a first request until the other two wait behind
	// it, so that it takes them as one batch.
	hold, held := make(chan struct{}), make(chan struct{})
	go be.write(ctx, func(querier) error { close(held); <-hold; return nil })
	<-held
	bctx, expire := context.WithCancelCause(ctx)
	go be.write(ctx, func(querier) error { expire(context.DeadlineExceeded); return nil })
	for len(be.reqs) < 1 {
		time.Sleep(time.Millisecond)
	}
	got := make(chan error, 1)
	go func() { _, err := s.SubmitMany(bctx, ps); got <- err }()
	for len(be.reqs) < 2 {
		time.Sleep(time.Millisecond)
	}
	close(hold)
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Errorf("SubmitMany whose context ended mid-write: %v, want the context's error", err)
	}
	tasks, err := s.List(ctx, cairnqtype.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 0 {
		t.Errorf("%d tasks written; want none", len(tasks))
	}
}
