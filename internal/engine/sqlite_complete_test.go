package engine

import (
	"github.com/cairnq/cairnq-go/cairnqtype"

	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// completeQueued issues one Complete per entry of cs while the writer is
// blocked, so that all of them reach the writer's queue and run in one
// batch, and returns each one's outcome.
func completeQueued(t *testing.T, s *Store, cs []*Completion) ([]cairnqtype.TaskRef, []error) {
	t.Helper()
	be := s.be.(*sqliteBackend)
	release := blockWriter(t, s)
	refs := make([]cairnqtype.TaskRef, len(cs))
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var result any // the JSON text as the caller's own encoding
			if text, ok := c.Result.(string); ok {
				result = json.RawMessage(text)
			}
			refs[i], errs[i] = s.Complete(context.Background(), c.ID, c.WorkerID, result)
		}()
	}
	for len(be.reqs) < len(cs) {
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()
	return refs, errs
}

// claimed submits n tasks and claims them all as worker "w".
func claimed(t *testing.T, s *Store, n int) []string {
	t.Helper()
	ctx := context.Background()
	ids := make([]string, n)
	for i := range ids {
		task, err := s.Submit(ctx, SubmitParams{Name: "job"})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = task.ID
	}
	got, err := s.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{cairnqtype.DefaultQueue}, WorkerID: "w", Limit: n})
	if err != nil || len(got) != n {
		t.Fatalf("claim: %d %v", len(got), err)
	}
	return ids
}

// storedResult reads a task's result column as the database holds it.
func storedResult(t *testing.T, s *Store, id string) (string, bool) {
	t.Helper()
	var text string
	var ok bool
	err := s.be.read(context.Background(), func(q querier) error {
		rows, err := q.query(context.Background(), "SELECT result FROM cairnq_tasks WHERE id = ?1", []any{id})
		if err != nil || len(rows) == 0 {
			return err
		}
		text, ok = rows[0]["result"].(string)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return text, ok
}

// Completions that reach the writer together settle in one transaction,
// each exactly as complete.sql would settle it alone: the others' fate
// is not theirs (a lost lease, a cancel, a repeated id).
func TestSQLiteCompletionsSettleTogetherAndApart(t *testing.T) {
	t.Parallel()
	s, _ := openTestStore(t, SQLiteOptions{})
	ctx := context.Background()
	ids := claimed(t, s, 6)
	if _, err := s.Cancel(ctx, ids[2]); err != nil {
		t.Fatal(err)
	}
	odd := "quote\" backslash\\ newline\n tab\t \u0001 é 😀 <>&"
	oddJSON, err := encodeJSON("result", odd, "null")
	if err != nil {
		t.Fatal(err)
	}
	oddJSON = strings.ReplaceAll(oddJSON, `\u003c`, "<") // stored as given, HTML escapes or not
	cs := []*Completion{
		{ID: ids[0], WorkerID: "w", Result: `{"n":1}`},
		{ID: ids[1], WorkerID: "w", Result: nil},
		{ID: ids[2], WorkerID: "w", Result: `"dropped"`}, // cancel requested: canceled, result dropped
		{ID: ids[3], WorkerID: "someone-else"},           // not its lease
		{ID: ids[4], WorkerID: "w", Result: `1`},
		{ID: ids[4], WorkerID: "w", Result: `2`}, // the same attempt settled twice
		{ID: ids[5], WorkerID: "w", Result: oddJSON},
	}
	be := s.be.(*sqliteBackend)
	before := be.commits.Load()
	refs, errs := completeQueued(t, s, cs)
	if got := be.commits.Load() - before; got != 2 {
		t.Errorf("%d commits, want 2 (the blocker, and one for every completion)", got)
	}
	// The attempt settled twice: whichever reached the writer first wins,
	// and the other finds the lease gone, as they would one after the other.
	first := 4
	if errs[4] != nil {
		first = 5
	}
	want := []cairnqtype.Status{cairnqtype.StatusSucceeded, cairnqtype.StatusSucceeded, cairnqtype.StatusCanceled, "", "", "", cairnqtype.StatusSucceeded}
	want[first] = cairnqtype.StatusSucceeded
	for i, st := range want {
		if st == "" {
			if !errors.Is(errs[i], cairnqtype.ErrLostLease) {
				t.Errorf("completion %d: %+v, %v; want a lost lease", i, refs[i], errs[i])
			}
			continue
		}
		if errs[i] != nil || refs[i] != (cairnqtype.TaskRef{ID: cs[i].ID, Status: st}) {
			t.Errorf("completion %d: %+v, %v; want %s", i, refs[i], errs[i], st)
		}
	}
	for i, wantResult := range map[int]string{0: `{"n":1}`, 4: cs[first].Result.(string), 5: oddJSON} {
		id := ids[i]
		if got, _ := storedResult(t, s, id); got != wantResult {
			t.Errorf("task %d result %q, want %q", i, got, wantResult)
		}
	}
	for _, i := range []int{1, 2} {
		if got, ok := storedResult(t, s, ids[i]); ok {
			t.Errorf("task %d result %q, want none", i, got)
		}
	}
	for i, id := range ids {
		task, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		switch i {
		case 3:
			if task.Status != cairnqtype.StatusRunning || task.LeaseUntil.IsZero() {
				t.Errorf("task 3 (another's completion) is %s, lease %v; want running, leased", task.Status, task.LeaseUntil)
			}
		case 2:
			if task.Status != cairnqtype.StatusCanceled || task.Progress != nil || task.CompletedAt.IsZero() || !task.LeaseUntil.IsZero() {
				t.Errorf("task 2: %+v", task)
			}
		default:
			if task.Status != cairnqtype.StatusSucceeded || task.Progress == nil || *task.Progress != 1 ||
				task.CompletedAt.IsZero() || !task.LeaseUntil.IsZero() || task.WorkerID != "w" {
				t.Errorf("task %d: %+v", i, task)
			}
		}
	}
}

// refusingSettler makes every group statement fail as a whole, as SQLite
// does when one of its rows breaks a constraint.
type refusingSettler struct{ s *Store }

func (r refusingSettler) completeMany(q querier, cs []*Completion) error {
	if len(cs) > 1 {
		return errors.New("the group's statement was refused")
	}
	return r.s.completeMany(q, cs)
}

// When a group's statement fails as a whole, each completion runs alone,
// so the one SQLite refuses fails only itself, in the same transaction.
func TestSQLiteCompletionRefusedAloneInItsGroup(t *testing.T) {
	t.Parallel()
	s, _ := openTestStore(t, SQLiteOptions{})
	ctx := context.Background()
	ids := claimed(t, s, 3)
	be := s.be.(*sqliteBackend)
	be.settler = refusingSettler{s} // before any completion: the writer reads it only for them
	release := blockWriter(t, s)
	before := be.commits.Load()
	refs := make([]cairnqtype.TaskRef, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i != 1 {
				refs[i], errs[i] = s.Complete(ctx, id, "w", json.RawMessage(`true`))
				return
			}
			c := &Completion{ID: id, WorkerID: "w"}
			errs[i] = be.complete(ctx, c, func(querier) error { return errors.New("this row is refused") })
		}()
	}
	for len(be.reqs) < len(ids) {
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()
	for _, i := range []int{0, 2} {
		if errs[i] != nil || refs[i].Status != cairnqtype.StatusSucceeded {
			t.Errorf("completion %d failed with its neighbour: %+v, %v", i, refs[i], errs[i])
		}
	}
	if errs[1] == nil || errors.Is(errs[1], cairnqtype.ErrLostLease) {
		t.Errorf("the refused completion: %v, want its own refusal", errs[1])
	}
	if got := be.commits.Load() - before; got != 2 {
		t.Errorf("%d commits, want 2 (the blocker, and one for the group)", got)
	}
	if task, err := s.Get(ctx, ids[1]); err != nil || task.Status != cairnqtype.StatusRunning {
		t.Errorf("the refused task: %v %v, want still running", task, err)
	}
}

// Text a JSON string cannot carry unchanged (invalid UTF-8) never goes
// through complete_many: the group runs each completion alone.
func TestSQLiteCompletionsJSONRefusesInvalidUTF8(t *testing.T) {
	if _, ok := completionsJSON([]*Completion{{ID: "a", WorkerID: "w\xff"}}); ok {
		t.Error("invalid UTF-8 in a worker id was encoded")
	}
	if _, ok := completionsJSON([]*Completion{{ID: "a", WorkerID: "w", Result: "\"\xff\""}}); ok {
		t.Error("invalid UTF-8 in a result was encoded")
	}
	got, ok := completionsJSON([]*Completion{{ID: "a", WorkerID: "w", Result: "\"x\\n\u0001\""}, {ID: "b", WorkerID: "w"}})
	var back [][3]*string
	if !ok || json.Unmarshal([]byte(got), &back) != nil || len(back) != 2 ||
		*back[0][2] != "\"x\\n\u0001\"" || back[1][2] != nil || *back[1][0] != "b" {
		t.Errorf("completionsJSON = %s, %v", got, ok)
	}
}
