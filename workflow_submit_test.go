package cairnq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
	"github.com/jackc/pgx/v5"
)

// onBothBackendsRaw runs test on a fresh SQLite file and a fresh
// Postgres database, each with exec, which runs SQL on the database
// through a connection of its own, as another SDK would.
func onBothBackendsRaw(t *testing.T, test func(t *testing.T, c *cairnq.Client, exec func(sql string))) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "tasks.db")
		c, err := cairnq.Open(context.Background(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		test(t, c, func(sql string) { execSQL(t, path, sql) })
	})
	t.Run("postgres", func(t *testing.T) {
		c, dsn := openPostgresDSN(t, nil)
		test(t, c, func(sql string) {
			conn, err := pgx.Connect(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			if _, err := conn.Exec(context.Background(), sql); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// Workflows submitted together are written in one transaction: each
// record must get its own first steps (one to four of them here, and a
// hundred in one, which is written alone), each step its own task, and
// none a step of another's.
func TestWorkflowSubmitsTogether(t *testing.T) {
	firsts := func(i int) int {
		if i == 0 {
			return 100
		}
		return 1 + i%4
	}
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		const n = 24
		recs := make([]string, n)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var steps []cairnq.WorkflowStep
				var names []string
				for j := range firsts(i) {
					name := fmt.Sprintf("w%d-first%d", i, j)
					names = append(names, name)
					steps = append(steps, cairnq.WorkflowStep{Step: name, Task: "wf.quick", Payload: map[string]int{"wf": i, "step": j}})
				}
				steps = append(steps, cairnq.WorkflowStep{Step: "last", Task: "wf.quick", After: names})
				rec, err := c.SubmitWorkflow(ctx, steps, nil)
				if err != nil {
					errs <- err
					return
				}
				recs[i] = rec.ID
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for i, rec := range recs {
			for j := range firsts(i) {
				name := fmt.Sprintf("w%d-first%d", i, j)
				task := stepTask(t, c, rec, name)
				var p map[string]int
				if err := json.Unmarshal(task.Payload, &p); err != nil || p["wf"] != i || p["step"] != j {
					t.Fatalf("workflow %d's step %s is task %s with payload %s (%v)", i, name, task.ID, task.Payload, err)
				}
				if task.ParentID != rec || task.RootID != rec || task.Status != cairnq.StatusQueued {
					t.Fatalf("step %s: parent %s root %s status %s, want record %s, queued", name, task.ParentID, task.RootID, task.Status, rec)
				}
			}
			if states := stepStates(t, c, rec); states["last"] != cairnq.StepWaiting || len(states) != 1+firsts(i) {
				t.Fatalf("workflow %d: steps %v, want %d firsts queued and last waiting", i, states, firsts(i))
			}
		}
		w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 4, WorkflowSweep: cairnq.NoWorkflowSweep})
		handleQuick(t, w, nil)
		startWorker(t, w)
		for _, rec := range recs {
			if final := waitWorkflow(t, c, rec); final.Status != cairnq.StatusSucceeded {
				t.Fatalf("workflow %s %+v", final.Status, final.Error)
			}
		}
	})
}

// A workflow whose steps all succeeded ends with its record claimed and
// completed in one statement (workflow_finish): the row must be what a
// claim and a completion by the worker leave, its result each step's
// task, and GetWorkflow must read it.
func TestWorkflowFinishedRecordRow(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		ctx := context.Background()
		w := newWorker(t, c, &cairnq.WorkerOptions{WorkflowSweep: cairnq.NoWorkflowSweep})
		handleQuick(t, w, nil)
		startWorker(t, w)
		rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
			{Step: "a", Task: "wf.quick"},
			{Step: "b", Task: "wf.quick", After: []string{"a"}},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		final := waitWorkflow(t, c, rec.ID)
		if final.Status != cairnq.StatusSucceeded || final.Attempt != 1 || final.WorkerID != w.ID() ||
			!final.LeaseUntil.IsZero() || final.CompletedAt.IsZero() || final.Progress == nil || *final.Progress != 1 ||
			final.RunAt.After(final.CompletedAt) {
			t.Fatalf("record %+v, want succeeded by %s on attempt 1, no lease, progress 1", final, w.ID())
		}
		var result struct {
			Steps map[string]struct{ ID, Status string }
		}
		if err := json.Unmarshal(final.Result, &result); err != nil {
			t.Fatal(err)
		}
		for _, step := range []string{"a", "b"} {
			if got := result.Steps[step]; got.ID != stepTask(t, c, rec.ID, step).ID || got.Status != string(cairnq.StatusSucceeded) {
				t.Fatalf("result %s, step %s: %+v", final.Result, step, got)
			}
		}
		wf, err := c.GetWorkflow(ctx, rec.ID)
		if err != nil || wf.Status != cairnq.StatusSucceeded {
			t.Fatalf("GetWorkflow: %+v %v", wf, err)
		}
	})
}

// A record whose own key is gone (deleted by hand, or by an SDK that
// knows nothing of it) is read through its id: its steps still advance
// it to its end, and GetWorkflow reads it.
func TestWorkflowRecordKeyGone(t *testing.T) {
	onBothBackendsRaw(t, func(t *testing.T, c *cairnq.Client, exec func(string)) {
		ctx := context.Background()
		release := startQuickAndHeld(t, c, cairnq.NoWorkflowSweep)
		rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{
			{Step: "a", Task: "wf.held"},
			{Step: "b", Task: "wf.quick", After: []string{"a"}},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		exec("DELETE FROM cairnq_task_keys WHERE key = '" + cairnq.StepKey(rec.ID, "") + "'")
		if wf, err := c.GetWorkflow(ctx, rec.ID); err != nil || len(wf.Steps) != 2 {
			t.Fatalf("GetWorkflow of a record without its key: %+v %v", wf, err)
		}
		close(release)
		if final := waitWorkflow(t, c, rec.ID); final.Status != cairnq.StatusSucceeded {
			t.Fatalf("workflow %s %+v", final.Status, final.Error)
		}
	})
}

// commitAnswerLost is an executor whose next transaction that inserts
// tasks commits and then reports its answer lost, as a connection that
// dies after COMMIT reached the server would.
type commitAnswerLost struct {
	executor.Executor
	armed atomic.Bool
}

func (l *commitAnswerLost) Tx(ctx context.Context, fn func(ctx context.Context, s executor.Session) error) error {
	inserted := false
	err := l.Executor.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		return fn(ctx, insertSpy{s, &inserted})
	})
	if err == nil && inserted && l.armed.CompareAndSwap(true, false) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// insertSpy notes whether its session inserted tasks.
type insertSpy struct {
	executor.Session
	inserted *bool
}

func (s insertSpy) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	if strings.Contains(sql, "INSERT INTO cairnq_tasks") {
		*s.inserted = true
	}
	return s.Session.Query(ctx, sql, args...)
}

// A group of submits whose commit landed but whose answer was lost: every
// caller is told its outcome is uncertain (ErrUnavailable), none a
// duplicate key of a write tried again, and every workflow is there.
func TestWorkflowSubmitGroupAnswerLost(t *testing.T) {
	ctx := context.Background()
	ex, err := cairnqpgx.Open(ctx, pgtest.DSN(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	lost := &commitAnswerLost{Executor: ex}
	c, err := cairnq.OpenPostgres(ctx, lost, &cairnq.PostgresOptions{CloseExecutor: true})
	if err != nil {
		ex.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	lost.armed.Store(true)
	const n = 16
	errs := make(chan error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{{Step: "a", Task: "wf.quick"}}, nil)
			errs <- err
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err == nil {
			continue
		}
		failed++
		if !errors.Is(err, cairnq.ErrUnavailable) {
			t.Errorf("a submit whose commit landed: %v, want ErrUnavailable", err)
		}
	}
	if failed == 0 {
		t.Fatal("no submit saw the lost answer")
	}
	recs, err := c.List(ctx, &cairnq.ListOptions{Name: cairnq.WorkflowName, Limit: 100})
	if err != nil || len(recs) != n {
		t.Fatalf("%d records (%v), want %d: every commit landed", len(recs), err, n)
	}
}
