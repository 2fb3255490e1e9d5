package engine

import (
	"encoding/json"
	"errors"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
)

// wireRow is a task as the protocol's columns hold it (MarshalJSON's wire
// shape), less the named columns.
func wireRow(t *testing.T, task *cairnqtype.Task, drop ...string) map[string]any {
	t.Helper()
	b, err := json.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range drop {
		delete(m, k)
	}
	return m
}

func claimOne(t *testing.T, s *Store, worker string, lease time.Duration) *cairnqtype.Task {
	t.Helper()
	got, err := s.Claim(t.Context(), cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: worker, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("claim by %s took %d tasks, want 1", worker, len(got))
	}
	return got[0]
}

// claimMovedBack is claimOne for the one task, its run_at moved back
// behind what the store claimed since: a Postgres store draws from the
// front it last claimed at (claim_front.go), and finds the task at its
// next full draw, within fullDrawEvery.
func claimMovedBack(t *testing.T, s *Store, worker string, lease time.Duration) *cairnqtype.Task {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := s.Claim(t.Context(), cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: worker, Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 {
			return got[0]
		}
		if len(got) > 1 || time.Now().After(deadline) {
			t.Fatalf("claim by %s took %d tasks, want 1", worker, len(got))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func claimNone(t *testing.T, s *Store, when string) {
	t.Helper()
	got, err := s.Claim(t.Context(), cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "idle"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("%s: claim took %s (%s, run_at %v)", when, got[0].ID, got[0].Status, got[0].RunAt)
	}
}

// A snoozed task is the row it was before the claim, save when it is due
// and when it was updated: what every SDK's claim reads as an ordinary
// queued task. The attempt is given back each time, so snoozing spends
// none of max_attempts.
func TestSnoozeUndoesTheClaim(t *testing.T) {
	bothInspectDBs(t, func(t *testing.T, db inspectDB) {
		s, err := db.open(t, false)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx := t.Context()
		sub, err := s.Submit(ctx, SubmitParams{Name: "poll", Payload: map[string]any{"n": 1}, SubmitOptions: cairnqtype.SubmitOptions{MaxAttempts: 1, Metadata: map[string]any{"owner": "a"}, CorrelationID: "corr"}})
		if err != nil {
			t.Fatal(err)
		}
		before := wireRow(t, sub, "run_at_ms", "updated_at_ms")

		for round := range 3 {
			var c *cairnqtype.Task
			if round == 0 {
				c = claimOne(t, s, "w1", time.Minute)
			} else {
				c = claimMovedBack(t, s, "w1", time.Minute)
			}
			if c.Attempt != 1 {
				t.Fatalf("round %d: claimed at attempt %d, want 1 (the snoozes gave theirs back)", round, c.Attempt)
			}
			half, msg := 0.5, "waiting on upstream"
			if _, err := s.Progress(ctx, c.ID, "w1", &half, &msg); err != nil {
				t.Fatal(err)
			}
			from := db.now(t)
			snoozed, err := s.Snooze(ctx, c.ID, "w1", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if got := wireRow(t, snoozed, "run_at_ms", "updated_at_ms"); !maps.EqualFunc(got, before, jsonSame) {
				t.Fatalf("round %d: snoozed row\n%v\nwant the row before the claim\n%v", round, got, before)
			}
			if due := snoozed.RunAt.UnixMilli(); due < from+time.Hour.Milliseconds() || due > db.now(t)+time.Hour.Milliseconds() {
				t.Fatalf("round %d: run_at %d, want now + 1h (now was %d)", round, due, from)
			}
			got, err := s.Get(ctx, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.EqualFunc(wireRow(t, got), wireRow(t, snoozed), jsonSame) {
				t.Fatalf("round %d: Get reads %v, the statement returned %v", round, wireRow(t, got), wireRow(t, snoozed))
			}
			claimNone(t, s, "snoozed an hour")
			// Bring it due again for the next round, as the hour passing would.
			db.exec(t, "UPDATE cairnq_tasks SET run_at_ms = run_at_ms - 7200000 WHERE id = '"+c.ID+"'")
		}
		c := claimMovedBack(t, s, "w2", time.Minute)
		if _, err := s.Complete(ctx, c.ID, "w2", map[string]int{"ok": 1}); err != nil {
			t.Fatal(err)
		}
		done, err := s.Get(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if done.Status != cairnqtype.StatusSucceeded || done.Attempt != 1 || done.MaxAttempts != 1 {
			t.Fatalf("after three snoozes: %s at attempt %d/%d, want succeeded at 1/1", done.Status, done.Attempt, done.MaxAttempts)
		}
	})
}

// Snooze is ownership-checked like every worker write: another worker, a
// second settlement and an expired lease are all refused with LostLease,
// and a negative delay is an ArgumentError; none of them writes.
func TestSnoozeRefusals(t *testing.T) {
	bothInspectDBs(t, func(t *testing.T, db inspectDB) {
		s, err := db.open(t, false)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx := t.Context()
		if _, err := s.Submit(ctx, SubmitParams{Name: "poll"}); err != nil {
			t.Fatal(err)
		}
		c := claimOne(t, s, "w1", time.Minute)
		unchanged := func(when string) {
			t.Helper()
			got, err := s.Get(ctx, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != cairnqtype.StatusRunning || got.Attempt != 1 || got.WorkerID != "w1" {
				t.Fatalf("%s: %s at attempt %d by %q, want still running at 1 by w1", when, got.Status, got.Attempt, got.WorkerID)
			}
		}
		_, err = s.Snooze(ctx, c.ID, "w1", -time.Second)
		var ae *cairnqtype.ArgumentError
		if !errors.As(err, &ae) || !errors.Is(err, cairnqtype.ErrInvalidArgument) || ae.Op != "snooze" || ae.Arg != "delay" {
			t.Fatalf("negative delay: %v, want an *ArgumentError for snooze's delay", err)
		}
		unchanged("negative delay")
		_, err = s.Snooze(ctx, c.ID, "w2", 0)
		var lost *cairnqtype.LostLeaseError
		if !errors.As(err, &lost) || lost.ID != c.ID || !errors.Is(err, cairnqtype.ErrLostLease) {
			t.Fatalf("snooze by another worker: %v, want a *LostLeaseError for %s", err, c.ID)
		}
		unchanged("another worker")

		if _, err := s.Snooze(ctx, c.ID, "w1", 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Snooze(ctx, c.ID, "w1", 0); !errors.Is(err, cairnqtype.ErrLostLease) {
			t.Fatalf("snoozing a task already back in the queue: %v, want LostLease", err)
		}

		// A zero delay is due at once; a lease that ran out refuses the snooze.
		c = claimOne(t, s, "w3", 50*time.Millisecond)
		if c.Attempt != 1 {
			t.Fatalf("claimed again at attempt %d, want 1", c.Attempt)
		}
		lease := c.LeaseUntil.UnixMilli()
		deadline := time.Now().Add(10 * time.Second)
		for db.now(t) <= lease {
			if time.Now().After(deadline) {
				t.Fatal("the database clock never passed the lease")
			}
			time.Sleep(5 * time.Millisecond) // polling the database clock
		}
		if _, err := s.Snooze(ctx, c.ID, "w3", 0); !errors.Is(err, cairnqtype.ErrLostLease) {
			t.Fatalf("snooze on an expired lease: %v, want LostLease", err)
		}
		got, err := s.Get(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != cairnqtype.StatusRunning || got.Attempt != 1 {
			t.Fatalf("refused snooze wrote: %s at attempt %d", got.Status, got.Attempt)
		}
	})
}

// A cancel requested while the attempt ran wins over the snooze, as over
// every other exit from running: canceled for good, history kept.
func TestSnoozeCancelWins(t *testing.T) {
	bothStores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		if _, err := s.Submit(ctx, SubmitParams{Name: "poll"}); err != nil {
			t.Fatal(err)
		}
		c := claimOne(t, s, "w1", time.Minute)
		msg := "halfway"
		if _, err := s.Progress(ctx, c.ID, "w1", nil, &msg); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Cancel(ctx, c.ID); err != nil {
			t.Fatal(err)
		}
		got, err := s.Snooze(ctx, c.ID, "w1", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != cairnqtype.StatusCanceled || got.Attempt != 1 || got.WorkerID != "w1" || got.Message == nil || *got.Message != msg ||
			got.CompletedAt.IsZero() || !got.LeaseUntil.IsZero() || !got.RunAt.Equal(c.RunAt) {
			t.Fatalf("snooze after a cancel request: %+v, want canceled at attempt 1 by w1, message kept, completed, no lease, run_at unchanged", got)
		}
		claimNone(t, s, "canceled")
	})
}

// Once its delay has passed, a snoozed task is claimed like any other, and
// not a moment before: on SQLite under the store's clock.
func TestSnoozeDueAtRunAtSQLite(t *testing.T) {
	t.Parallel()
	s, _ := openTestStore(t, SQLiteOptions{})
	var now atomic.Int64
	now.Store(time.Now().UnixMilli())
	s.now = func() time.Time { return time.UnixMilli(now.Load()) }
	ctx := t.Context()
	if _, err := s.Submit(ctx, SubmitParams{Name: "poll"}); err != nil {
		t.Fatal(err)
	}
	c := claimOne(t, s, "w1", time.Minute)
	got, err := s.Snooze(ctx, c.ID, "w1", 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := now.Load() + 90_000; got.RunAt.UnixMilli() != want {
		t.Fatalf("run_at %d, want %d", got.RunAt.UnixMilli(), want)
	}
	now.Add(90_000 - 1)
	claimNone(t, s, "a millisecond before run_at")
	now.Add(1)
	again := claimOne(t, s, "w2", time.Minute)
	if again.ID != c.ID || again.Attempt != 1 || again.WorkerID != "w2" {
		t.Fatalf("at run_at: claimed %s at attempt %d by %s, want %s at 1 by w2", again.ID, again.Attempt, again.WorkerID, c.ID)
	}
}

// jsonSame compares two decoded JSON values.
func jsonSame(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
