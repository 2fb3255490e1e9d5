package cairnq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// copyCounting is the pgx executor with its transactions' COPYs counted:
// the real executor underneath, so what the store writes is what pgx
// writes.
type copyCounting struct {
	*cairnqpgx.Executor
	copies, rows atomic.Int64
	keyRows      atomic.Int64 // of the rows, those copied into cairnq_task_keys
	// onKeys, when set, runs around each COPY into cairnq_task_keys.
	onKeys func(ctx context.Context, copy func() (int64, error)) (int64, error)
}

type copyCountingSession struct {
	*cairnqpgx.Session
	ex *copyCounting
}

func (s copyCountingSession) CopyFrom(ctx context.Context, table string, columns []string, rows executor.CopyRows) (int64, error) {
	s.ex.copies.Add(1)
	run := func() (int64, error) { return s.Session.CopyFrom(ctx, table, columns, rows) }
	var n int64
	var err error
	if table == "cairnq_task_keys" && s.ex.onKeys != nil {
		n, err = s.ex.onKeys(ctx, run)
	} else {
		n, err = run()
	}
	s.ex.rows.Add(n)
	if table == "cairnq_task_keys" {
		s.ex.keyRows.Add(n)
	}
	return n, err
}

func (e *copyCounting) Tx(ctx context.Context, fn func(ctx context.Context, s executor.Session) error) error {
	return e.Executor.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		return fn(ctx, copyCountingSession{s.(*cairnqpgx.Session), e})
	})
}

// openCopyCounting is a Postgres client over copyCounting.
func openCopyCounting(t *testing.T) (*cairnq.Client, *copyCounting) {
	t.Helper()
	pe, err := cairnqpgx.Open(context.Background(), pgtest.DSN(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ex := &copyCounting{Executor: pe}
	c, err := cairnq.OpenPostgres(context.Background(), ex, &cairnq.PostgresOptions{CloseExecutor: true})
	if err != nil {
		pe.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, ex
}

// bigBatch is manyItems repeated reps times, each repetition's keys its
// own, with JSON jsonb rewrites (key order, duplicates, spacing, numbers)
// and, every eleventh item, JSON the store leaves to the server to print
// (a non-ASCII \u escape), now and then a payload too long to print
// (read back) holding what COPY's text form escapes.
func bigBatch(reps int) []cairnq.SubmitItem {
	var items []cairnq.SubmitItem
	for r := range reps {
		for _, it := range manyItems() {
			if it.Options.Key != "" {
				it.Options.Key = fmt.Sprintf("%s-%d", it.Options.Key, r)
			}
			switch n := len(items); {
			case n%11 == 5:
				it.Payload = json.RawMessage(`{"s": "caf\u00e9", "n": 1}`)
			case n%97 == 50: // read back for its length
				it.Payload = map[string]string{"long": strings.Repeat("x\ty\\z\n", 4<<10)}
			case n%7 == 3:
				it.Payload = json.RawMessage(`{"zz": 1.50,"a" :[true,null, 1e2, -0], "a": {"y":1,"x":2}}`)
				it.Options.Metadata = json.RawMessage(` {"k\"":"\t<>&","":0.0e-3} `)
			}
			items = append(items, it)
		}
	}
	return items
}

// A batch large enough for COPY writes its tasks by COPY, and returns
// each as reading it back does, field for field: the time of the clock
// read and the JSON as jsonb prints it, printed by the store or read
// back from the server. Its keys behave as the small
// batches' (TestSubmitManyWritesWhatSubmitWrites): an item reusing an
// earlier item's key returns that item's task.
func TestSubmitManyByCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, ex := openCopyCounting(t)
	items := bigBatch(50) // 600 items, 100 of them keyed
	items = append(items, items[4])
	tasks, err := c.SubmitMany(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	if ex.copies.Load() != 1 || ex.rows.Load() != int64(len(items)-1) {
		t.Fatalf("the batch made %d COPYs of %d rows; want one, of its %d new tasks", ex.copies.Load(), ex.rows.Load(), len(items)-1)
	}
	// One moment for the whole batch, the JSON read back included: the
	// claims take it in its order.
	for i, tk := range tasks {
		if !tk.CreatedAt.Equal(tasks[0].CreatedAt) {
			t.Fatalf("item %d was created at %v, item 0 at %v: want one moment for the batch", i, tk.CreatedAt, tasks[0].CreatedAt)
		}
	}
	if tasks[len(items)-1].ID != tasks[4].ID {
		t.Errorf("the batch's last item, keyed as item 4, returned %s, not item 4's %s", tasks[len(items)-1].ID, tasks[4].ID)
	}
	sameAsStored(t, c, tasks)
	if n := countTasks(t, c); n != len(items)-1 {
		t.Errorf("the database holds %d tasks; want %d (the last item reuses a key)", n, len(items)-1)
	}
	// The same items through Submit one by one store the same columns.
	for _, i := range []int{0, 3, 5, 16, 101} {
		it := items[i]
		opts := it.Options
		opts.Key = ""
		single, err := c.Submit(ctx, it.Name, it.Payload, &opts)
		if err != nil {
			t.Fatal(err)
		}
		sameAsSubmitted(t, i, tasks[i], single)
	}
}

// SubmitManyTx takes COPY too, inside the application's transaction: the
// batch commits and rolls back with it.
func TestSubmitManyTxByCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, ex := openCopyCounting(t)
	items := bigBatch(30)
	errRollback := errors.New("roll back")
	for _, commit := range []bool{false, true} {
		var tasks []*cairnq.Task
		err := ex.Tx(ctx, func(ctx context.Context, sess executor.Session) (err error) {
			if tasks, err = c.SubmitManyTx(ctx, sess, items); err != nil || commit {
				return err
			}
			return errRollback
		})
		if commit && err != nil || !commit && !errors.Is(err, errRollback) {
			t.Fatalf("commit %v: %v", commit, err)
		}
		want := 0
		if commit {
			want = len(items)
		}
		if n := countTasks(t, c); n != want {
			t.Errorf("commit %v: the database holds %d tasks; want %d", commit, n, want)
		}
		if !commit {
			continue
		}
		sameAsStored(t, c, tasks)
	}
	if ex.copies.Load() != 2 {
		t.Errorf("two batches made %d COPYs; want 2", ex.copies.Load())
	}
}
