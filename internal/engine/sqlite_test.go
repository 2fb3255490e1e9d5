package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/ncruces/go-sqlite3"
)

func openTestStore(t *testing.T, o SQLiteOptions) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := OpenSQLite(context.Background(), path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

// blockWriter parks the writer goroutine inside a write until release is
// closed, so the writes issued meanwhile queue up behind it.
func blockWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	entered := make(chan struct{})
	gate := make(chan struct{})
	go func() {
		s.be.write(context.Background(), func(querier) error {
			close(entered)
			<-gate
			return nil
		})
	}()
	<-entered
	return func() { close(gate) }
}

func TestGroupCommitSharesOneTransactionAndIsolatesFailures(t *testing.T) {
	t.Parallel()
	s, _ := openTestStore(t, SQLiteOptions{})
	ctx := context.Background()
	if _, err := s.Submit(ctx, SubmitParams{Name: "seed", SubmitOptions: cairnqtype.SubmitOptions{Key: "taken"}}); err != nil {
		t.Fatal(err)
	}
	be := s.be.(*sqliteBackend)
	release := blockWriter(t, s)
	before := be.commits.Load()

	const n = 20
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := SubmitParams{Name: "job", Payload: map[string]int{"i": i}}
			if i == 7 {
				p.Key, p.Conflict = "taken", cairnqtype.ConflictReject // fails inside the batch
			}
			if i == 8 {
				// Two statements, the second failing: its first must roll back too.
				p.Key = "fresh"
			}
			_, errs[i] = s.Submit(ctx, p)
		}()
	}
	// Let every submit reach the writer's queue before the writer resumes.
	for len(be.reqs) < n {
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()

	for i, err := range errs {
		switch {
		case i == 7 && !errors.Is(err, cairnqtype.ErrAlreadyExists):
			t.Errorf("submit %d: %v, want ErrAlreadyExists", i, err)
		case i != 7 && err != nil:
			t.Errorf("submit %d failed with its neighbour: %v", i, err)
		}
	}
	// One commit for the blocker, one for all twenty queued writes.
	if got := be.commits.Load() - before; got != 2 {
		t.Errorf("%d commits for 20 queued writes, want 2 (the blocker and one shared)", got)
	}
	stats, err := s.Stats(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := stats["default"].Queued; got != n { // seed + 19 successes
		t.Errorf("queued = %d, want %d", got, n)
	}
}

func TestGroupCommitRollsBackAFailedMultiStatementWrite(t *testing.T) {
	t.Parallel()
	s, _ := openTestStore(t, SQLiteOptions{})
	ctx := context.Background()
	be := s.be.(*sqliteBackend)
	release := blockWriter(t, s)
	var wg sync.WaitGroup
	var failing, passing error
	wg.Add(2)
	go func() {
		defer wg.Done()
		failing = s.be.write(ctx, func(q querier) error {
			if _, err := q.query(ctx, "INSERT INTO cairnq_meta (key, value) VALUES ('half', 'done')", nil); err != nil {
				return err
			}
			return errors.New("second statement failed")
		})
	}()
	go func() {
		defer wg.Done()
		passing = s.be.write(ctx, func(q querier) error {
			_, err := q.query(ctx, "INSERT INTO cairnq_meta (key, value) VALUES ('whole', 'done')", nil)
			return err
		})
	}()
	for len(be.reqs) < 2 {
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()
	if failing == nil || passing != nil {
		t.Fatalf("failing = %v, passing = %v", failing, passing)
	}
	var keys []string
	s.be.read(ctx, func(q querier) error {
		rows, err := q.query(ctx, "SELECT key FROM cairnq_meta WHERE key IN ('half', 'whole')", nil)
		for _, r := range rows {
			keys = append(keys, r["key"].(string))
		}
		return err
	})
	if fmt.Sprint(keys) != "[whole]" {
		t.Errorf("rows after the batch: %v, want only the passing write's", keys)
	}
}

func TestBusyWaitsThenFailsClearly(t *testing.T) {
	t.Parallel()
	s, path := openTestStore(t, SQLiteOptions{BusyTimeout: 150 * time.Millisecond})
	ctx := context.Background()

	other, err := sqlite3.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Exec("BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Submit(ctx, SubmitParams{Name: "x"})
	var be *cairnqtype.BusyError
	if !errors.Is(err, cairnqtype.ErrBusy) || !errors.As(err, &be) || be.Timeout != 150*time.Millisecond {
		t.Fatalf("submit while another process writes: %v, want BusyError", err)
	}

	// Released within the timeout, the write waits it out and lands.
	done := make(chan error, 1)
	go func() {
		_, err := s.Submit(ctx, SubmitParams{Name: "y"})
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // let the submit start waiting on the lock
	if err := other.Exec("COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("submit after the lock was released: %v", err)
	}
}

func TestConcurrentColdStartsMigrateOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tasks.db")
	ctx := context.Background()
	var wg sync.WaitGroup
	stores := make([]*Store, 4)
	errs := make([]error, 4)
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = OpenSQLite(ctx, path, SQLiteOptions{})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("opener %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	var n int64
	stores[0].be.read(ctx, func(q querier) error {
		rows, err := q.query(ctx, "SELECT count(*) AS n, count(DISTINCT name) AS d FROM cairnq_migrations", nil)
		if err == nil {
			n = rows[0]["n"].(int64)
			if d := rows[0]["d"].(int64); d != n {
				t.Errorf("ledger has duplicate names: %d rows, %d names", n, d)
			}
		}
		return err
	})
	if n != 9 {
		t.Errorf("ledger rows = %d, want 9", n)
	}
}

func TestPlannerStatisticsBootstrapped(t *testing.T) {
	t.Parallel()
	s, _ := openTestStore(t, SQLiteOptions{})
	ctx := context.Background()
	var rows int
	s.be.read(ctx, func(q querier) error {
		r, err := q.query(ctx, "SELECT 1 FROM sqlite_stat1 WHERE tbl = 'cairnq_tasks'", nil)
		rows = len(r)
		return err
	})
	if rows == 0 {
		t.Error("no sqlite_stat1 rows for cairnq_tasks after open")
	}
}

func TestTaskIDShape(t *testing.T) {
	t.Parallel()
	// The encoding alone: the generator's ids never go back to an
	// older millisecond than the process's last (TestTaskIDsNeverGoBack).
	const ms = 1795992839448
	r := [10]byte{0xff, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	id := encodeTaskID(ms, r)
	if !validTaskID(id) {
		t.Fatalf("%q is not a valid id", id)
	}
	// The fixture made by the TypeScript SDK at this millisecond starts so.
	if id[:15] != "task_01M8MR7S8R" {
		t.Errorf("time part of %q differs from the TypeScript SDK's task_01M8MR7S8R", id)
	}
	if encodeTaskID(ms+1, [10]byte{}) <= id {
		t.Error("a later id does not sort after an earlier one")
	}
	if now := newTaskID(time.Now()); !validTaskID(now) {
		t.Errorf("%q is not a valid id", now)
	}
	for _, bad := range []string{"task_01M8MR7S8RZRZV9ENPWTS3JPW", "job_01M8MR7S8RZRZV9ENPWTS3JPW0", "task_01M8MR7S8RZRZV9ENPWTS3JPWU", "task_81M8MR7S8RZRZV9ENPWTS3JPW0"} {
		if validTaskID(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Ids made within one millisecond sort in the order they were made, so a
// process's submits of one millisecond are claimed in that order. Not
// parallel: another test's id of another millisecond would start a new
// sequence in between.
func TestTaskIDsMonotonicWithinAMillisecond(t *testing.T) {
	at := time.UnixMilli(1795992839448)
	prev := newTaskID(at)
	for range 1000 {
		id := newTaskID(at)
		if id <= prev || id[:15] != prev[:15] {
			t.Fatalf("%s after %s: not the next id of the same millisecond", id, prev)
		}
		prev = id
	}
}

// An id minted with an older time than the last one's (a batch stamped
// before another submit minted at the next millisecond) still sorts
// after it: the batch's ids keep its order, which its claims follow.
func TestTaskIDsNeverGoBack(t *testing.T) {
	t0 := time.Now().Add(-10 * time.Second)
	first := newTaskID(t0)
	later := newTaskID(t0.Add(time.Millisecond))
	again := newTaskID(t0)
	if !(first < later && later < again) {
		t.Fatalf("ids %s, %s, %s: want each after the one before", first, later, again)
	}
}

// Complete answers with the status the task took: succeeded, or canceled
// when a cancel was requested while it ran.
func TestCompleteAnswersTheStatus(t *testing.T) {
	s, _ := openTestStore(t, SQLiteOptions{})
	ctx := context.Background()
	var ids []string
	for range 2 {
		task, err := s.Submit(ctx, SubmitParams{Name: "job"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	if got, err := s.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{cairnqtype.DefaultQueue}, WorkerID: "w", Limit: 2}); err != nil || len(got) != 2 {
		t.Fatalf("claim: %d %v", len(got), err)
	}
	if _, err := s.Cancel(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	for i, want := range []cairnqtype.Status{cairnqtype.StatusSucceeded, cairnqtype.StatusCanceled} {
		ref, err := s.Complete(ctx, ids[i], "w", "done")
		if err != nil || ref != (cairnqtype.TaskRef{ID: ids[i], Status: want}) {
			t.Errorf("Complete: %+v, %v; want status %s", ref, err, want)
		}
	}
	if _, err := s.Complete(ctx, ids[0], "w", nil); !errors.Is(err, cairnqtype.ErrLostLease) {
		t.Errorf("second Complete: %v", err)
	}
}
