package completer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
	"github.com/cairnq/cairnq-go/internal/testkit/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// watched is a store whose grouped writes are counted, and whose writes
// fail with fail's errors first, one a call, while it holds any.
type watched struct {
	*engine.Store
	grouped atomic.Int32
	mu      sync.Mutex
	fail    []error
}

func (w *watched) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.fail) == 0 {
		return nil
	}
	err := w.fail[0]
	w.fail = w.fail[1:]
	return err
}

func (w *watched) Settle(ctx context.Context, st engine.Settlement) (engine.Settled, error) {
	if err := w.failure(); err != nil {
		return engine.Settled{}, err
	}
	return w.Store.Settle(ctx, st)
}

func (w *watched) SettleCompletions(ctx context.Context, cs []*engine.Completion) error {
	w.grouped.Add(1)
	return w.Store.SettleCompletions(ctx, cs)
}

// bothStores runs fn on a fresh store of each dialect.
func bothStores(t *testing.T, fn func(t *testing.T, s *watched)) {
	storetest.Both(t, func(t *testing.T, s *engine.Store) { fn(t, &watched{Store: s}) })
}

// claimed submits n tasks and claims them as worker w1.
func claimed(t *testing.T, s *watched, n int) []*cairnqtype.Task {
	t.Helper()
	for i := range n {
		if _, err := s.Submit(t.Context(), engine.SubmitParams{Name: "work", Payload: i}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Claim(t.Context(), cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w1", Limit: n, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("claimed %d tasks, want %d", len(got), n)
	}
	return got
}

// outcome is what a Recorder was told.
type outcome struct {
	written engine.Settlement
	out     engine.Settled
	err     error
	handed  bool
}

// recorder sends what it is told to its channel.
type recorder chan outcome

func (r recorder) Settled(st engine.Settlement, out engine.Settled, err error, handed bool) {
	r <- outcome{written: st, out: out, err: err, handed: handed}
}

func status(t *testing.T, s *watched, id string) cairnqtype.Status {
	t.Helper()
	got, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return got.Status
}

// The inline form writes every outcome on the caller's goroutine and
// tells done before Settle returns; a success whose result is not JSON
// fails for good instead, and done is told the failure written.
func TestInlineWritesEachOutcome(t *testing.T) {
	bothStores(t, func(t *testing.T, s *watched) {
		ctx := t.Context()
		c := Inline(Config{Store: s, Lease: time.Minute})
		tasks := claimed(t, s, 4)
		settlements := []engine.Settlement{
			{Outcome: engine.Succeeded, Result: "ok"},
			{Outcome: engine.Failed, Error: cairnqtype.ErrorEnvelope{Type: "E", Code: "e", Message: "boom"}},
			{Outcome: engine.Snoozed, Delay: time.Hour},
			{Outcome: engine.Succeeded, Result: make(chan int)},
		}
		want := []cairnqtype.Status{cairnqtype.StatusSucceeded, cairnqtype.StatusFailed, cairnqtype.StatusQueued, cairnqtype.StatusFailed}
		for i, st := range settlements {
			st.Task, st.WorkerID = tasks[i], "w1"
			got := make(chan outcome, 1)
			if c.Settle(ctx, st, recorder(got), true) {
				t.Fatalf("settlement %d handed over by the inline form", i)
			}
			var o outcome
			select {
			case o = <-got:
			default:
				t.Fatalf("settlement %d: Settle returned before done was told", i)
			}
			if o.err != nil || o.out.Status != want[i] || status(t, s, tasks[i].ID) != want[i] {
				t.Fatalf("settlement %d: %v, status %s; want %s", i, o.err, o.out.Status, want[i])
			}
		}
		row, err := s.Get(ctx, tasks[3].ID)
		if err != nil {
			t.Fatal(err)
		}
		if row.Error == nil || row.Error.Code != "unserializable_result" {
			t.Fatalf("a result that is no JSON stored error %+v, want unserializable_result", row.Error)
		}
	})
}

// A write that fails for a reason that may pass is tried again; one that
// would fail the same way is not, and done is told its error.
func TestSettleRetriesWhatMayPass(t *testing.T) {
	bothStores(t, func(t *testing.T, s *watched) {
		ctx := t.Context()
		var busy []time.Duration
		c := Inline(Config{Store: s, Lease: time.Minute, Busy: func(_ context.Context, d time.Duration) { busy = append(busy, d) }})
		tasks := claimed(t, s, 2)
		s.fail = []error{&cairnqtype.BusyError{}, &cairnqtype.BusyError{}}
		got := make(chan outcome, 1)
		c.Settle(ctx, engine.Settlement{Task: tasks[0], WorkerID: "w1", Outcome: engine.Succeeded}, recorder(got), false)
		if o := <-got; o.err != nil || len(busy) != 2 || busy[1] <= busy[0] {
			t.Fatalf("after two busy refusals: %v, back-offs %v; want written, after two growing back-offs", o.err, busy)
		}
		refused := &cairnqtype.ArgumentError{Op: "settle", Arg: "x", Reason: "bad"}
		s.fail = []error{refused}
		c.Settle(ctx, engine.Settlement{Task: tasks[1], WorkerID: "w1", Outcome: engine.Succeeded}, recorder(got), false)
		if o := <-got; !errors.Is(o.err, refused) || status(t, s, tasks[1].ID) != cairnqtype.StatusRunning {
			t.Fatalf("a refusal that would repeat: %v, want it told once and nothing written", o.err)
		}
		lost := engine.Settlement{Task: tasks[1], WorkerID: "someone else", Outcome: engine.Failed}
		c.Settle(ctx, lost, recorder(got), false)
		if o := <-got; !errors.Is(o.err, cairnqtype.ErrLostLease) {
			t.Fatalf("a settlement without the lease: %v, want ErrLostLease", o.err)
		}
	})
}

// The store's own form: on SQLite plain successes ride on the claim
// loop's next claim once the loop opens the ride, on Postgres they are
// handed to the batch goroutine; either way fewer writes than successes,
// each told its outcome once. What the form cannot group is written
// inline.
func TestStoreFormGroupsPlainSuccesses(t *testing.T) {
	bothStores(t, func(t *testing.T, s *watched) {
		ctx := t.Context()
		c := New(Config{Store: s, Lease: time.Minute, Wake: func() {}})
		if c.RidesClaims() != s.SettleOnClaim() {
			t.Fatalf("RidesClaims %v on a store that settles on claims: %v", c.RidesClaims(), s.SettleOnClaim())
		}
		c.Start(ctx)
		c.OpenRide(true)
		const n = 20
		tasks := claimed(t, s, n+1)
		got := make(chan outcome, n+1)
		var handed atomic.Int32
		var wg sync.WaitGroup
		for _, task := range tasks[:n] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if c.Settle(ctx, engine.Settlement{Task: task, WorkerID: "w1", Outcome: engine.Succeeded, Result: 1}, recorder(got), true) {
					handed.Add(1)
				}
			}()
		}
		if c.RidesClaims() {
			// The claim loop's part: carry what waits, here in writes of
			// their own, until every success is told.
			for len(got) < n {
				if !c.SettleWaiting(ctx) {
					time.Sleep(time.Millisecond)
				}
			}
		}
		wg.Wait()
		if failure := make(chan outcome, 1); !c.Settle(ctx, engine.Settlement{Task: tasks[n], WorkerID: "w1", Outcome: engine.Failed}, recorder(failure), true) {
			if o := <-failure; o.err != nil || o.out.Status != cairnqtype.StatusFailed {
				t.Fatalf("a failure: %v, status %s; want written inline", o.err, o.out.Status)
			}
		} else {
			t.Fatal("a failure handed over")
		}
		<-c.Stop()
		c.EndClaims()
		for range n {
			o := <-got
			if o.err != nil || o.out.Status != cairnqtype.StatusSucceeded || o.written.Outcome != engine.Succeeded {
				t.Fatalf("a grouped success: %v, status %s, written as %v", o.err, o.out.Status, o.written.Outcome)
			}
			if o.handed == s.SettleOnClaim() {
				t.Fatalf("a grouped success told handed over %v on a store that settles on claims: %v", o.handed, s.SettleOnClaim())
			}
		}
		for _, task := range tasks[:n] {
			if st := status(t, s, task.ID); st != cairnqtype.StatusSucceeded {
				t.Fatalf("task %s %s, want succeeded", task.ID, st)
			}
		}
		if g := s.grouped.Load(); g == 0 || g >= n {
			t.Fatalf("%d successes in %d grouped writes, want fewer writes than successes and more than none", n, g)
		}
		if s.SettleOnClaim() == (handed.Load() > 0) {
			t.Fatalf("%d successes handed over to be told later; want none where they ride (SQLite), some where the batch goroutine writes them", handed.Load())
		}
		t.Logf("%d successes in %d grouped writes, %d handed over", n, s.grouped.Load(), handed.Load())
	})
}

// Successes still waiting for a claim when the loop ends are written on
// their own; once the ride is closed, nothing waits for a claim.
func TestEndClaimsWritesWhatWaits(t *testing.T) {
	s, err := engine.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "tasks.db"), engine.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := &watched{Store: s}
	ctx := t.Context()
	woken := make(chan struct{}, 1)
	c := New(Config{Store: w, Lease: time.Minute, Wake: func() { woken <- struct{}{} }})
	c.Start(ctx)
	c.OpenRide(true)
	tasks := claimed(t, w, 2)
	got := make(chan outcome, 2)
	go c.Settle(ctx, engine.Settlement{Task: tasks[0], WorkerID: "w1", Outcome: engine.Succeeded}, recorder(got), false)
	<-woken // it waits for the next claim
	c.EndClaims()
	if o := <-got; o.err != nil || o.out.Status != cairnqtype.StatusSucceeded {
		t.Fatalf("a success waiting when the loop ended: %v, status %s; want written on its own", o.err, o.out.Status)
	}
	c.Settle(ctx, engine.Settlement{Task: tasks[1], WorkerID: "w1", Outcome: engine.Succeeded}, recorder(got), false)
	if o := <-got; o.err != nil || len(woken) != 0 {
		t.Fatalf("a success after the loop ended: %v, woke the loop: %v", o.err, len(woken) != 0)
	}
	if w.grouped.Load() != 0 {
		t.Fatalf("%d grouped writes, want none", w.grouped.Load())
	}
}

// What may pass and what would repeat.
func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{&cairnqtype.LostLeaseError{ID: "t"}, false},
		{&cairnqtype.ArgumentError{}, false},
		{cairnqtype.ErrClosed, false},
		{fmt.Errorf("x: %w", cairnqtype.ErrDatabaseReplaced), false},
		{context.Canceled, false},
		{&cairnqtype.BusyError{}, true},
		{cairnqtype.ErrUnavailable, true},
		{sqlState("40P01"), true},
		{sqlState("57014"), true},
		{sqlState("23505"), false},
		{errors.New("no state"), true},
	} {
		if got := Transient(c.err); got != c.want {
			t.Errorf("Transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

type sqlState string

func (s sqlState) Error() string    { return "sqlstate " + string(s) }
func (s sqlState) SQLState() string { return string(s) }
