package engine

import (
	"github.com/cairnq/cairnq-go/cairnqtype"

	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// statusCase is one GetStatus and what it must return.
type statusCase struct {
	id   string
	want cairnqtype.Status // "" for ErrNotFound
}

// statusCases submits three tasks, cancels one, and returns reads of
// them, repeats included, and of an id no task has.
func statusCases(t *testing.T, s *Store) []statusCase {
	t.Helper()
	ctx := t.Context()
	var ids []string
	for i := range 3 {
		task, err := s.Submit(ctx, SubmitParams{Name: fmt.Sprintf("status-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	if _, err := s.Cancel(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	var cases []statusCase
	for i := range 3 { // each task three times, and three ids of none
		cases = append(cases,
			statusCase{ids[0], cairnqtype.StatusQueued},
			statusCase{ids[1], cairnqtype.StatusCanceled},
			statusCase{ids[2], cairnqtype.StatusQueued},
			statusCase{fmt.Sprintf("task_nope%d", i), ""})
	}
	return cases
}

// checkStatus fails unless ref and err are what c wants.
func checkStatus(t *testing.T, c statusCase, ref cairnqtype.TaskRef, err error) {
	t.Helper()
	switch {
	case c.want == "" && !errors.Is(err, cairnqtype.ErrNotFound):
		t.Errorf("GetStatus(%s) = %+v, %v; want ErrNotFound", c.id, ref, err)
	case c.want != "" && (err != nil || ref != cairnqtype.TaskRef{ID: c.id, Status: c.want}):
		t.Errorf("GetStatus(%s) = %+v, %v; want %s", c.id, ref, err, c.want)
	}
}

// A read with none other in flight runs get_status at once; reads
// arriving while it runs go into get_status_many groups, and each caller
// gets its own task's status, or ErrNotFound.
func TestGetStatusGroupsConcurrentReads(t *testing.T) {
	s, g := openGatedPGOn(t, stmtGetStatus, stmtGetStatusMany)
	cases := statusCases(t, s)
	ctx := t.Context()
	refs := make([]cairnqtype.TaskRef, len(cases))
	errs := make([]error, len(cases))
	var wg sync.WaitGroup
	read := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			refs[i], errs[i] = s.GetStatus(ctx, cases[i].id)
		}()
	}
	read(0)
	<-g.arrived // the lone read, at the gate in its own goroutine
	read(1)
	<-g.arrived // the first grouped read, alone in its group, at the gate
	for i := 2; i < len(cases); i++ {
		read(i)
	}
	waitFor(t, "every later read queued behind the group", func() bool { return s.statusReads.Waiting() == len(cases)-2 })
	close(g.gateOpen)
	wg.Wait()
	if n := g.count(g.single); n != 1 {
		t.Errorf("get_status ran %d times, want 1 (the read that found none in flight)", n)
	}
	if n := g.count(g.many); n != 2 {
		t.Errorf("get_status_many ran %d times, want 2 (one read alone, then the %d queued)", n, len(cases)-2)
	}
	for i, c := range cases {
		checkStatus(t, c, refs[i], errs[i])
	}
	// With nothing in flight, the next read runs alone again.
	if ref, err := s.GetStatus(ctx, cases[0].id); err != nil || ref.Status != cases[0].want {
		t.Errorf("lone read after the groups: %+v, %v", ref, err)
	}
	if n := g.count(g.single); n != 2 {
		t.Errorf("get_status ran %d times after a lone read, want 2", n)
	}
}

// On SQLite, concurrent reads (grouped through the read connections)
// each get their own task's status.
func TestGetStatusConcurrentReadsSQLite(t *testing.T) {
	s, _ := openTestStore(t, SQLiteOptions{})
	cases := statusCases(t, s)
	var wg sync.WaitGroup
	for range 4 {
		for _, c := range cases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ref, err := s.GetStatus(t.Context(), c.id)
				checkStatus(t, c, ref, err)
			}()
		}
	}
	wg.Wait()
}

// A read after Close fails with ErrClosed, and a closed store closes
// again without harm.
func TestGetStatusAfterClose(t *testing.T) {
	s, _ := openTestStore(t, SQLiteOptions{})
	task, err := s.Submit(t.Context(), SubmitParams{Name: "closing"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetStatus(context.Background(), task.ID); !errors.Is(err, cairnqtype.ErrClosed) {
		t.Errorf("GetStatus after Close: %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
