package engine

import (
	"database/sql/driver"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/protocol"
)

func TestReadPace(t *testing.T) {
	var r readPace
	now := time.Unix(1000, 0)
	after := func(d time.Duration) time.Time { return now.Add(d) }
	if ok, _ := r.take(now); !ok {
		t.Fatal("a first read waits")
	}
	// take reserved the read: of the workers sharing the store, one reads.
	if ok, next := r.take(after(time.Millisecond)); ok || !next.Equal(after(lookEvery)) {
		t.Fatalf("take right after a reserved read = %v, next %v; want false, next %v", ok, next, after(lookEvery))
	}
	// A read that took 200ms is followed fullDrawShare times that later.
	r.ran(now, 200*time.Millisecond)
	if ok, next := r.take(after(2 * time.Second)); ok || !next.Equal(after(4*time.Second)) {
		t.Fatalf("take 2s after a 200ms read = %v, next %v; want false, next %v", ok, next, after(4*time.Second))
	}
	if ok, _ := r.take(after(4 * time.Second)); !ok {
		t.Fatal("no read once the spacing passed")
	}
	// However slow, reads come at least every maxDrawGap.
	r.ran(after(4*time.Second), time.Hour)
	if ok, next := r.take(after(5 * time.Second)); ok || !next.Equal(after(4*time.Second+maxDrawGap)) {
		t.Fatalf("take after an hour-long read = %v, next %v; want false, next %v", ok, next, after(4*time.Second+maxDrawGap))
	}
	// A fast read is followed lookEvery later.
	r.ran(after(6*time.Second), 0)
	if ok, _ := r.take(after(6*time.Second + lookEvery)); !ok {
		t.Fatal("no read lookEvery after a fast one")
	}
}

// An idle worker's probe (claimHints.PaceLook) leaves out its look for an
// expired lease while the store read for one too recently, and says when
// one is due; a probe without PaceLook (Store.Claim's, or the worker's
// once that look is due) always looks, and so does a paced one once the
// pace allows. A busy worker's recovery is paced the same way. On SQLite
// the look costs one index seek and is never left out.
func TestProbePacesItsLookForExpiredLeases(t *testing.T) {
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			ctx := t.Context()
			var s *Store
			if backend == "postgres" {
				s, _, _ = openClaimLogPG(t)
			} else {
				s, _ = openTestStore(t, SQLiteOptions{})
			}
			// A task whose worker vanished: its lease runs out (the
			// database's clock is this machine's).
			lose := func(queue string) *cairnqtype.Task {
				t.Helper()
				p := SubmitParams{Name: "job"}
				p.Queue = queue
				task, err := s.Submit(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				got, err := s.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{queue}, WorkerID: "gone", Lease: 20 * time.Millisecond})
				if err != nil || len(got) != 1 || got[0].ID != task.ID {
					t.Fatalf("claim = %v, %v; want %s", got, err, task.ID)
				}
				waitFor(t, "the lease to run out", func() bool { return time.Now().After(got[0].LeaseUntil.Add(time.Millisecond)) })
				return task
			}
			status := func(task *cairnqtype.Task) cairnqtype.Status {
				t.Helper()
				got, err := s.Get(ctx, task.ID)
				if err != nil {
					t.Fatal(err)
				}
				return got.Status
			}
			// A worker's poll of a queue with nothing in it: idle (its
			// probe paced or not), or busy (no probe; a recovery).
			pollWith := func(h claimHints) sessionResult {
				t.Helper()
				res, err := s.claimSession(ctx, cairnqtype.ClaimParams{Queues: []string{"idle"}, WorkerID: "w"}, h, true, func(draw drawFunc) error {
					_, err := draw(nil, 1)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			poll := func(pace bool) sessionResult { t.Helper(); return pollWith(claimHints{PaceLook: pace}) }
			busy := func() sessionResult { t.Helper(); return pollWith(claimHints{SkipProbe: true}) }

			lost := lose("lost")
			// The store read for an expired lease just now, and that read
			// was slow: the next waits maxDrawGap.
			looked := time.Now()
			s.leaseReads.ran(looked, time.Hour)
			res := poll(true)
			if backend == "sqlite" {
				if !res.Ran || !res.LookDue.IsZero() || status(lost) != cairnqtype.StatusQueued {
					t.Fatalf("paced poll on SQLite = %+v, task %s; want it to look and recover the task", res, status(lost))
				}
				return
			}
			if want := looked.Add(maxDrawGap); res.Ran || !res.LookDue.Equal(want) {
				t.Fatalf("paced poll right after a look = %+v; want no claim and a look due at %v", res, want)
			}
			if got := status(lost); got != cairnqtype.StatusRunning {
				t.Fatalf("a poll that did not look recovered the task: %s", got)
			}
			// The look that was due: a poll without PaceLook.
			if res := poll(false); !res.Ran || !res.LookDue.IsZero() || status(lost) != cairnqtype.StatusQueued {
				t.Fatalf("unpaced poll = %+v, task %s; want it to look and recover the task", res, status(lost))
			}

			// Once the pace allows, a paced poll looks too.
			lost = lose("lost again")
			s.leaseReads.ran(time.Now().Add(-time.Minute), 100*time.Millisecond)
			if res := poll(true); !res.Ran || !res.LookDue.IsZero() || status(lost) != cairnqtype.StatusQueued {
				t.Fatalf("paced poll a minute after the last look = %+v, task %s; want it to look and recover the task", res, status(lost))
			}

			// A busy worker's recovery is paced with the looks.
			lost = lose("lost while busy")
			looked = time.Now()
			s.leaseReads.ran(looked, time.Hour)
			if res, want := busy(), looked.Add(maxDrawGap); !res.LookDue.Equal(want) || status(lost) != cairnqtype.StatusRunning {
				t.Fatalf("busy poll right after a look = %+v, task %s; want the recovery left out, due at %v", res, status(lost), want)
			}
			s.leaseReads.ran(time.Now().Add(-time.Minute), 0)
			if res := busy(); !res.Ran || !res.LookDue.IsZero() || status(lost) != cairnqtype.StatusQueued {
				t.Fatalf("busy poll a minute after the last look = %+v, task %s; want it to recover the task", res, status(lost))
			}
		})
	}
}

// Why the look is paced: while a snapshot older than them lives, the
// lease index keeps an entry for every task claimed since, and once
// their leases have passed the look reads every one of them (a task's
// running version is dead but not removable). A probe that leaves the
// look out reads only its queue's front, under its own plan and under
// the generic one a cached statement takes after five calls.
func TestProbeWithoutTheLookSkipsLeasesAHeldSnapshotKeeps(t *testing.T) {
	ctx := t.Context()
	s, _, db := openClaimLogPG(t)
	holdHorizon(t, db)

	const settled, lease = 20000, 3 * time.Second
	submitJobs(t, s, settled)
	// Settled within their leases, which then run out.
	var last time.Time
	claimJobs(t, s, settled, lease, func(got []*cairnqtype.Task) {
		cs := make([]*Completion, len(got))
		for i, task := range got {
			cs[i] = &Completion{ID: task.ID, WorkerID: "w"}
			last = task.LeaseUntil
		}
		if err := s.SettleCompletions(ctx, cs); err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.Err != nil {
				t.Fatalf("settling %s: %v", c.ID, c.Err)
			}
		}
	})
	waitFor(t, "the leases to run out", func() bool { return time.Now().After(last.Add(time.Millisecond)) })
	if _, err := db.ExecContext(ctx, "ANALYZE cairnq_tasks"); err != nil {
		t.Fatal(err)
	}
	submitJobs(t, s, 10)
	// Where the windowed probe reads from: the newest front.
	front := newestFront(t, s)

	for _, c := range []struct {
		stmt   string
		window protocol.Args
	}{
		{stmtClaimableProbe, nil},
		{stmtClaimableProbeWindow, front.floor.args(front.priority)},
	} {
		buffers := map[string]int{}
		for _, look := range []bool{true, false} {
			a := withArgs(protocol.Args{"queues": s.list([]string{"default"}), "names": nil, "look_for_expired": look}, c.window)
			if c.window != nil {
				a["queues"] = protocol.One("default")
			}
			_, args, err := s.compile(c.stmt, a)
			if err != nil {
				t.Fatal(err)
			}
			literals := make([]string, len(args))
			for i, v := range args {
				literals[i] = pgLiteral(t, v)
			}
			buffers[fmt.Sprint("looking ", look, ", own plan")] = explainBuffers(t, s, db, c.stmt, a)
			buffers[fmt.Sprint("looking ", look, ", generic plan")] = explainGenericBuffers(t, s, db, c.stmt, a, literals...)
		}
		t.Logf("%s buffers read: %v", c.stmt, buffers)
		for _, plan := range []string{"own plan", "generic plan"} {
			looking, not := buffers["looking true, "+plan], buffers["looking false, "+plan]
			if looking < settled/100 {
				t.Fatalf("%s looking read %d buffers past %d dead entries (%s): the test no longer holds the horizon", c.stmt, looking, settled, plan)
			}
			switch {
			case c.window == nil && looking-not < settled/100:
				// The full probe reads its queue from the start, past
				// the claimed tasks' queued versions, look or not.
				t.Errorf("%s without the look read %d buffers (%s; looking: %d), want %d fewer at least", c.stmt, not, plan, looking, settled/100)
			case c.window != nil && (not > 100 || not*4 > looking):
				t.Errorf("%s without the look read %d buffers (%s; looking: %d), want under 100 and a quarter of the look's", c.stmt, not, plan, looking)
			}
		}
	}
}

// pgLiteral writes a bound argument as the SQL literal EXECUTE takes.
func pgLiteral(t *testing.T, v any) string {
	t.Helper()
	switch v := v.(type) {
	case nil:
		return "NULL"
	case bool, int64:
		return fmt.Sprint(v)
	case string:
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	case driver.Valuer:
		text, err := v.Value()
		if err != nil {
			t.Fatal(err)
		}
		if text == nil {
			return "NULL"
		}
		return pgLiteral(t, text)
	}
	t.Fatalf("no literal for %T", v)
	return ""
}
