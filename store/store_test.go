package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
	"github.com/cairnq/cairnq-go/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// onBoth runs test on the Store of a fresh SQLite client and of a fresh
// Postgres one.
func onBoth(t *testing.T, test func(t *testing.T, s *store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		c, err := cairnq.Open(context.Background(), filepath.Join(t.TempDir(), "store.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		test(t, c.Store())
	})
	t.Run("postgres", func(t *testing.T) {
		ctx := context.Background()
		ex, err := cairnqpgx.Open(ctx, pgtest.DSN(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := cairnq.OpenPostgres(ctx, ex, &cairnq.PostgresOptions{CloseExecutor: true})
		if err != nil {
			ex.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		test(t, c.Store())
	})
}

// claimOne submits a task named name and claims it as worker.
func claimOne(t *testing.T, s *store.Store, name, worker string) *cairnqtype.Task {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Submit(ctx, name, map[string]int{"n": 1}, &cairnqtype.SubmitOptions{Queue: "q-" + name}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"q-" + name}, WorkerID: worker, Lease: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %d tasks, %v", len(got), err)
	}
	return got[0]
}

// Each call does what its documentation says, on both backends.
func TestStoreCallsAsDocumented(t *testing.T) {
	onBoth(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()

		// Submit with a key, then the same key again: reuse hands back the
		// first task.
		first, err := s.Submit(ctx, "mail", nil, &cairnqtype.SubmitOptions{Key: "k1"})
		if err != nil {
			t.Fatal(err)
		}
		again, err := s.Submit(ctx, "mail", nil, &cairnqtype.SubmitOptions{Key: "k1"})
		if err != nil || again.ID != first.ID {
			t.Fatalf("keyed resubmit: %v, %v; want task %s", again, err, first.ID)
		}
		if got, err := s.GetByKey(ctx, "k1"); err != nil || got.ID != first.ID {
			t.Fatalf("GetByKey: %v, %v", got, err)
		}
		if ref, err := s.GetStatus(ctx, first.ID); err != nil || ref.Status != cairnqtype.StatusQueued {
			t.Fatalf("GetStatus: %+v, %v", ref, err)
		}
		if _, err := s.Get(ctx, "task_01J00000000000000000000000"); !errors.Is(err, cairnqtype.ErrNotFound) {
			t.Fatalf("Get of no task: %v, want ErrNotFound", err)
		}
		if ts, err := s.List(ctx, nil); err != nil || len(ts) != 1 {
			t.Fatalf("List(nil): %d tasks, %v", len(ts), err)
		}
		st, err := s.Stats(ctx, "empty-queue")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := st["empty-queue"]; !ok {
			t.Fatalf("Stats leaves out the queue asked for: %v", st)
		}

		// HeartbeatBatch: a held lease is present (false: no cancel), a lost
		// one absent.
		held := claimOne(t, s, "held", "w1")
		other := claimOne(t, s, "other", "w2")
		beats, err := s.HeartbeatBatch(ctx, []string{held.ID, other.ID}, "w1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if cancel, ok := beats[held.ID]; !ok || cancel {
			t.Errorf("HeartbeatBatch: held lease %v, %v; want present, false", cancel, ok)
		}
		if _, ok := beats[other.ID]; ok {
			t.Error("HeartbeatBatch reports a lease the worker does not hold")
		}
		if _, err := s.Heartbeat(ctx, other.ID, "w1", time.Minute); !errors.Is(err, cairnqtype.ErrLostLease) {
			t.Errorf("Heartbeat of another's lease: %v, want ErrLostLease", err)
		}
		frac, msg := 0.5, "halfway"
		if got, err := s.Progress(ctx, held.ID, "w1", &frac, &msg); err != nil || got.Progress == nil || *got.Progress != 0.5 {
			t.Fatalf("Progress: %+v, %v", got, err)
		}
		if got, err := s.Progress(ctx, held.ID, "w1", nil, nil); err != nil || got.Progress == nil || *got.Progress != 0.5 ||
			got.Message == nil || *got.Message != msg {
			t.Fatalf("Progress(nil, nil) cleared what was stored: %+v, %v", got, err)
		}
		if ref, err := s.Complete(ctx, held.ID, "w1", map[string]bool{"ok": true}); err != nil || ref.Status != cairnqtype.StatusSucceeded {
			t.Fatalf("Complete: %+v, %v", ref, err)
		}

		// A cancel asked of a running task shows on its heartbeats, and its
		// completion settles it canceled.
		asked := claimOne(t, s, "asked", "w4")
		if _, err := s.Cancel(ctx, asked.ID); err != nil {
			t.Fatal(err)
		}
		if beats, err := s.HeartbeatBatch(ctx, []string{asked.ID}, "w4", time.Minute); err != nil || !beats[asked.ID] {
			t.Errorf("HeartbeatBatch after a cancel: %v, %v; want true", beats, err)
		}
		if got, err := s.Heartbeat(ctx, asked.ID, "w4", time.Minute); err != nil || !got.CancelRequested() {
			t.Errorf("Heartbeat after a cancel: %+v, %v; want the cancel shown", got, err)
		}
		if ref, err := s.Complete(ctx, asked.ID, "w4", "dropped"); err != nil || ref.Status != cairnqtype.StatusCanceled {
			t.Errorf("Complete after a cancel: %+v, %v; want canceled", ref, err)
		}

		// Cancel and Retry of a task they do not apply to: nil, nil.
		if got, err := s.Cancel(ctx, held.ID); got != nil || err != nil {
			t.Errorf("Cancel of a succeeded task: %v, %v; want nil, nil", got, err)
		}
		if got, err := s.Retry(ctx, held.ID, false); got != nil || err != nil {
			t.Errorf("Retry of a succeeded task: %v, %v; want nil, nil", got, err)
		}

		// Fail, retryable with attempts left: queued again; not retryable:
		// failed, and Retry with resetAttempt starts its count over.
		env := cairnqtype.ErrorEnvelope{Type: "Boom", Message: "boom", Retryable: true}
		if got, err := s.Fail(ctx, other.ID, "w2", env, true, 0); err != nil || got.Status != cairnqtype.StatusQueued {
			t.Fatalf("retryable Fail: %+v, %v; want queued", got, err)
		}
		doomed := claimOne(t, s, "doomed", "w5")
		if got, err := s.Fail(ctx, doomed.ID, "w5", env, false, 0); err != nil || got.Status != cairnqtype.StatusFailed {
			t.Fatalf("Fail for good: %+v, %v; want failed", got, err)
		}
		if got, err := s.Retry(ctx, doomed.ID, true); err != nil || got.Status != cairnqtype.StatusQueued || got.Attempt != 0 {
			t.Fatalf("Retry(resetAttempt) of a failed task: %+v, %v; want queued at attempt 0", got, err)
		}
		// Snooze gives the attempt back.
		again2 := claimOne(t, s, "snoozed", "w3")
		got, err := s.Snooze(ctx, again2.ID, "w3", time.Hour)
		if err != nil || got.Status != cairnqtype.StatusQueued || got.Attempt != again2.Attempt-1 {
			t.Fatalf("Snooze: %+v, %v; want queued with attempt %d", got, err, again2.Attempt-1)
		}
		if _, err := s.Snooze(ctx, again2.ID, "w3", -time.Second); !errors.Is(err, cairnqtype.ErrInvalidArgument) {
			t.Errorf("Snooze with a negative delay: %v, want an ArgumentError", err)
		}

		// Cancel of a queued task cancels it; Retry brings it back.
		canceled, err := s.Cancel(ctx, first.ID)
		if err != nil || canceled.Status != cairnqtype.StatusCanceled {
			t.Fatalf("Cancel of a queued task: %+v, %v", canceled, err)
		}
		if got, err := s.RetryByKey(ctx, "k1", true); err != nil || got.Status != cairnqtype.StatusQueued {
			t.Fatalf("RetryByKey: %+v, %v", got, err)
		}

		// Purge takes the succeeded task once it finished before now (a
		// millisecond may have to pass).
		var ids []string
		for deadline := time.Now().Add(5 * time.Second); len(ids) == 0 && time.Now().Before(deadline); {
			if ids, err = s.Purge(ctx, &cairnqtype.PurgeOptions{Status: cairnqtype.StatusSucceeded}); err != nil {
				t.Fatal(err)
			}
			if len(ids) == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		if len(ids) != 1 || ids[0] != held.ID {
			t.Fatalf("Purge: %v; want [%s]", ids, held.ID)
		}
		if _, err := s.Get(ctx, held.ID); !errors.Is(err, cairnqtype.ErrNotFound) {
			t.Errorf("Get of a purged task: %v, want ErrNotFound", err)
		}
	})
}

// SubmitTx and CompleteTx need Postgres.
func TestStoreTxCallsNeedPostgres(t *testing.T) {
	c, err := cairnq.Open(context.Background(), filepath.Join(t.TempDir(), "tx.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := c.Store()
	if s.Dialect() != "sqlite" {
		t.Fatalf("Dialect %q", s.Dialect())
	}
	if _, err := s.SubmitTx(context.Background(), nil, "x", nil, nil); !errors.Is(err, cairnqtype.ErrUnsupported) {
		t.Errorf("SubmitTx on SQLite: %v, want ErrUnsupported", err)
	}
	if _, err := s.CompleteTx(context.Background(), nil, "task_x", "w", nil); !errors.Is(err, cairnqtype.ErrUnsupported) {
		t.Errorf("CompleteTx on SQLite: %v, want ErrUnsupported", err)
	}
}

// The engine stays internal: nothing a program outside the module can
// reach on a Store (an exported field or method, what a method takes or
// returns) is of the engine's package, so no program can get the engine
// from a Store or put one under it, and nothing asks for a key.
func TestStoreExposesNoEngine(t *testing.T) {
	const engine = "github.com/cairnq/cairnq-go/internal/engine"
	typ := reflect.TypeFor[*store.Store]()
	var seen []string
	check := func(where string, ty reflect.Type) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Map {
			ty = ty.Elem()
		}
		if ty.PkgPath() == engine {
			t.Errorf("%s is the engine's %s", where, ty.Name())
		}
		seen = append(seen, where)
	}
	for i := range typ.Elem().NumField() {
		if f := typ.Elem().Field(i); f.IsExported() {
			check("field "+f.Name, f.Type)
		}
	}
	for i := range typ.NumMethod() {
		m := typ.Method(i)
		for j := 1; j < m.Type.NumIn(); j++ {
			check(m.Name+"'s argument", m.Type.In(j))
		}
		for j := range m.Type.NumOut() {
			check(m.Name+"'s result", m.Type.Out(j))
		}
	}
	if len(seen) < 20 {
		t.Fatalf("checked only %d places; is Store's API there?", len(seen))
	}
}
