package engine

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/executor/sqlexec"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
	"github.com/cairnq/cairnq-go/protocol"
)

func TestClaimFrontPlan(t *testing.T) {
	const lag = 100 * time.Millisecond
	f := claimFronts{lag: lag}
	now := time.Unix(1000, 0)
	after := func(d time.Duration) time.Time { return now.Add(d) }
	key := frontKey([]string{"q"}, nil)
	if w, _, _ := f.plan(key, now); w {
		t.Fatal("a shape never drawn draws windowed")
	}
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }
	// A full draw that took 1ms and filled its limit.
	f.observe(key, true, now, time.Millisecond, 5, []*cairnqtype.Task{
		{ID: "a", Priority: 0, RunAt: at(50)}, {ID: "b", Priority: 2, RunAt: at(90)}, {ID: "d", Priority: 2, RunAt: at(70)},
		{ID: "c", Priority: 2, RunAt: at(70)}, {ID: "e", Priority: 1, RunAt: at(10)},
	})
	// The first front waits out the lag like any other: a group of
	// inserts due before it may not have committed yet.
	if w, _, _ := f.plan(key, after(lag/2)); w {
		t.Fatal("drew from a first front younger than the lag")
	}
	first := frontFloor{70, "c"}
	if w, p, floor := f.plan(key, after(500*time.Millisecond)); !w || p != 2 || floor != first {
		t.Fatalf("plan after a full draw = %v, %d, %v; want windowed from priority 2, floor %v", w, p, floor, first)
	}
	if w, _, _ := f.plan(key, after(fullDrawEvery)); w {
		t.Fatal("no full draw fullDrawEvery after the last")
	}
	// A later draw's front is read once it is lag old.
	f.observe(key, false, after(600*time.Millisecond), time.Millisecond, 1, []*cairnqtype.Task{{ID: "x", Priority: 2, RunAt: at(80)}})
	if _, _, floor := f.plan(key, after(600*time.Millisecond+lag/2)); floor != first {
		t.Fatalf("floor %v before the newer front is lag old, want %v", floor, first)
	}
	second := frontFloor{80, "x"}
	if _, _, floor := f.plan(key, after(600*time.Millisecond+lag)); floor != second {
		t.Fatalf("floor %v once the newer front is lag old, want %v", floor, second)
	}
	// A draw that came back short (empty) leaves the front, and brings
	// the next full draw forward to fullDrawShare times the last one's
	// cost: already passed here.
	f.observe(key, false, after(760*time.Millisecond), time.Millisecond, 1, nil)
	if w, _, _ := f.plan(key, after(770*time.Millisecond)); w {
		t.Fatal("no full draw after a short one once fullDrawShare times the last full draw's cost passed")
	}
	// A slow full draw spaces the next by fullDrawShare times its cost,
	// beyond fullDrawEvery, short or not.
	f.observe(key, true, now, 200*time.Millisecond, 1, nil)
	if w, _, floor := f.plan(key, after(3*time.Second)); !w || floor != second {
		t.Fatalf("a full draw of 200ms: plan 3s after = %v, %v; want windowed from %v", w, floor, second)
	}
	if w, _, _ := f.plan(key, after(fullDrawShare*200*time.Millisecond)); w {
		t.Fatal("no full draw fullDrawShare times a slow one's cost after it")
	}
	// A full draw that finds the front behind the window's (tasks that
	// committed behind it) moves the window back at once; one that finds
	// it ahead waits out the lag like any other.
	f.observe(key, true, after(5*time.Second), time.Millisecond, 1, []*cairnqtype.Task{{ID: "z", Priority: 2, RunAt: at(60)}})
	if w, _, floor := f.plan(key, after(5*time.Second+time.Millisecond)); !w || floor != (frontFloor{60, "z"}) {
		t.Fatalf("plan after a full draw behind the window = %v, %v; want windowed from {60 z}", w, floor)
	}
	f.observe(key, true, after(5500*time.Millisecond), time.Millisecond, 1, []*cairnqtype.Task{{ID: "y", Priority: 2, RunAt: at(90)}})
	if _, _, floor := f.plan(key, after(5500*time.Millisecond+lag/2)); floor != (frontFloor{60, "z"}) {
		t.Fatalf("a full draw ahead of the window was read before the lag: floor %v", floor)
	}
	if _, _, floor := f.plan(key, after(5500*time.Millisecond+lag)); floor != (frontFloor{90, "y"}) {
		t.Fatalf("floor %v a lag after a full draw ahead, want {90 y}", floor)
	}
	// A front at a higher priority is not behind: the window reads the
	// higher priorities whole, and a moment-old front must wait its lag.
	f.observe(key, true, after(5700*time.Millisecond), time.Millisecond, 1, []*cairnqtype.Task{{ID: "x", Priority: 3, RunAt: at(95)}})
	if _, p, floor := f.plan(key, after(5700*time.Millisecond+lag/2)); p != 2 || floor != (frontFloor{90, "y"}) {
		t.Fatalf("a higher priority's new front was read before the lag: priority %d, floor %v", p, floor)
	}
	// However slow the full draws, the next comes within maxDrawGap.
	f.observe(key, true, after(6*time.Second), time.Minute, 1, []*cairnqtype.Task{{ID: "y", Priority: 2, RunAt: at(90)}})
	if w, _, _ := f.plan(key, after(6*time.Second+maxDrawGap)); w {
		t.Fatal("no full draw maxDrawGap after a very slow one")
	}
	if frontKey([]string{"a", "b"}, nil) != "" {
		t.Fatal("several queues have a front")
	}
	if frontKey([]string{"q"}, []string{"a"}) == frontKey([]string{"q"}, nil) {
		t.Fatal("a draw of one name shares the front of a draw of any")
	}
}

// claimLog is a real executor that records whether each claim ran from a
// front (claim_window, claimable_probe_window) or in full.
type claimLog struct {
	executor.Executor
	mu                 sync.Mutex
	windowed, fullDraw int
}

func (c *claimLog) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	c.count(sql)
	return c.Executor.Query(ctx, sql, args...)
}

func (c *claimLog) count(sql string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case strings.Contains(sql, "(run_at_ms, id) >= "): // claim_window, claimable_probe_window
		c.windowed++
	case strings.HasPrefix(sql, "UPDATE cairnq_tasks AS task SET status = 'running'"):
		c.fullDraw++
	}
}

func (c *claimLog) counts() (windowed, full int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.windowed, c.fullDraw
}

// openClaimLogPG opens a Postgres store over a fresh database, its claims
// counted, and the database/sql handle beside it.
func openClaimLogPG(t *testing.T) (*Store, *claimLog, *sql.DB) {
	t.Helper()
	db, err := sql.Open("pgx", pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	log := &claimLog{Executor: sqlexec.New(db, nil)}
	s, err := OpenPostgres(t.Context(), log, PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	// Every draw reads the newest front, so each claim of a test is one
	// the front serves; frontLag is TestClaimFrontPlan's.
	s.fronts.lag = 0
	return s, log, db
}

// Draws from a known front take tasks in exactly the order full draws
// would: a higher priority submitted after the front was set comes
// first, and a lower one once the front's priority is drained.
func TestClaimFromFrontKeepsClaimOrder(t *testing.T) {
	ctx := t.Context()
	s, log, _ := openClaimLogPG(t)
	submit := func(label string, priority int) {
		t.Helper()
		p := SubmitParams{Name: "job", Payload: map[string]string{"label": label}}
		p.Priority = priority
		if _, err := s.Submit(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	claimOne := func() string {
		t.Helper()
		got, err := s.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w", Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("claimed %d tasks, want 1", len(got))
		}
		var p struct{ Label string }
		if err := json.Unmarshal(got[0].Payload, &p); err != nil {
			t.Fatal(err)
		}
		return p.Label
	}
	for _, l := range []string{"a", "b", "c"} {
		submit(l, 0)
	}
	submit("low", -1)
	var order []string
	order = append(order, claimOne()) // a full draw sets the front
	submit("urgent", 5)
	for range 4 {
		order = append(order, claimOne())
	}
	if want := "a urgent b c low"; strings.Join(order, " ") != want {
		t.Fatalf("claim order %q, want %q", strings.Join(order, " "), want)
	}
	windowed, full := log.counts()
	if windowed == 0 {
		t.Fatalf("no claim drew from the front (%d full draws)", full)
	}
}

// A task committed behind the front (here: moved there) is not lost: the
// next full draw, at most fullDrawEvery later, takes it.
func TestClaimFromFrontFindsATaskBehindIt(t *testing.T) {
	ctx := t.Context()
	s, log, db := openClaimLogPG(t)
	for range 3 {
		if _, err := s.Submit(ctx, SubmitParams{Name: "job"}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func() []*cairnqtype.Task {
		t.Helper()
		got, err := s.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := claim(); len(got) != 3 {
		t.Fatalf("first claim took %d tasks, want 3", len(got))
	}
	behind, err := s.Submit(ctx, SubmitParams{Name: "job"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "UPDATE cairnq_tasks SET run_at_ms = run_at_ms - 60000 WHERE id = $1", behind.ID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := claim()
		if len(got) == 1 && got[0].ID == behind.ID {
			break
		}
		if len(got) != 0 {
			t.Fatalf("claimed %v, want only the task behind the front", got)
		}
		if time.Now().After(deadline) {
			w, f := log.counts()
			t.Fatalf("the task behind the front was never claimed (%d windowed, %d full draws)", w, f)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if w, _ := log.counts(); w == 0 {
		t.Fatal("no claim drew from the front")
	}
}

// The point of the front: while a snapshot older than the claimed tasks
// lives, vacuum cannot remove their claim-index entries, and a full draw
// reads every one; a draw from the front reads past none of them.
func TestClaimFromFrontSkipsEntriesAHeldSnapshotKeeps(t *testing.T) {
	s, _, db := openClaimLogPG(t)
	holdHorizon(t, db)

	// Enough claimed tasks that their heap pages (about 40 rows each)
	// outnumber what one claim's own update touches.
	const claimed, queued = 20000, 10
	submitJobs(t, s, claimed)
	claimJobs(t, s, claimed, 0, nil)
	submitJobs(t, s, queued)
	// The newest front, which a windowed draw right after the last claim
	// reads (the lag is 0). Not frontPlan's answer now: when the claims
	// took over fullDrawEvery under load, the next draw is due in full.
	newest := newestFront(t, s)
	priority, floor := newest.priority, newest.floor
	base := protocol.Args{
		"queues": protocol.One("default"), "names": nil, "worker_id": "w2",
		"lease_ms": int64(30000), "limit": int64(1),
	}
	full := explainBuffers(t, s, db, stmtClaim, base)
	front := explainBuffers(t, s, db, stmtClaimWindow, withArgs(base, floor.args(priority)))
	t.Logf("buffers read: full draw %d, from the front %d", full, front)
	if full < claimed/50 {
		t.Fatalf("the full draw read %d buffers past %d dead entries: the test no longer holds the horizon", full, claimed)
	}
	if front > 100 || front*4 > full {
		t.Fatalf("the draw from the front read %d buffers (full draw: %d), want under 100 and a quarter of the full draw's", front, full)
	}
}

// newestFront is the front the default queue's last draw found, as
// claimJobs leaves it.
func newestFront(t *testing.T, s *Store) frontSeen {
	t.Helper()
	s.fronts.mu.Lock()
	defer s.fronts.mu.Unlock()
	c := s.fronts.by[s.frontKey([]string{"default"}, nil)]
	if c == nil || len(c.seen) == 0 {
		t.Fatal("no front after the claims")
	}
	return c.seen[len(c.seen)-1]
}

// holdHorizon holds an xid on a connection of db until the test ends,
// as a long report would: from then on vacuum removes no row version
// newer than it, and no scan may mark their index entries dead.
func holdHorizon(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx := t.Context()
	holder, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Closing a sql.Conn returns it to the pool as it is.
		_, _ = holder.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		_ = holder.Close()
	})
	if _, err := holder.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.ExecContext(ctx, "SELECT txid_current()"); err != nil {
		t.Fatal(err)
	}
}

// submitJobs submits n tasks named job, in batches as large as SubmitMany
// takes.
func submitJobs(t *testing.T, s *Store, n int) {
	t.Helper()
	for n > 0 {
		ps := make([]SubmitParams, min(n, MaxSubmitMany))
		for i := range ps {
			ps[i] = SubmitParams{Name: "job"}
		}
		if _, err := s.SubmitMany(t.Context(), ps); err != nil {
			t.Fatal(err)
		}
		n -= len(ps)
	}
}

// claimJobs claims n tasks of the default queue as worker w, in draws of
// up to 1,000 with the given lease (0: the default), handing each draw to
// each when it is not nil.
func claimJobs(t *testing.T, s *Store, n int, lease time.Duration, each func([]*cairnqtype.Task)) {
	t.Helper()
	for claimed := 0; claimed < n; {
		got, err := s.Claim(t.Context(), cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w", Limit: min(n-claimed, 1000), Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			t.Fatalf("claimed %d of %d", claimed, n)
		}
		if each != nil {
			each(got)
		}
		claimed += len(got)
	}
}

// A sweep's purge starts at its floor and says how far it got; Purge
// itself reads no floor.
func TestPurgeFromStartsAtTheFloor(t *testing.T) {
	ctx := t.Context()
	s, _, db := openClaimLogPG(t)
	ids := make([]string, 3)
	for i := range ids {
		task, err := s.Submit(ctx, SubmitParams{Name: "job"})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = task.ID
		if _, err := db.ExecContext(ctx, "UPDATE cairnq_tasks SET status = 'succeeded', completed_at_ms = $2 WHERE id = $1", task.ID, int64(i+1)*1000); err != nil {
			t.Fatal(err)
		}
	}
	got, reached, err := s.PurgeFrom(ctx, cairnqtype.PurgeOptions{Limit: 1}, NoPurgeFloor)
	if err != nil || len(got) != 1 || got[0] != ids[0] || reached != 1000 {
		t.Fatalf("first batch = %v, reached %d, %v; want [%s], 1000", got, reached, err, ids[0])
	}
	got, reached, err = s.PurgeFrom(ctx, cairnqtype.PurgeOptions{}, 2500)
	if err != nil || len(got) != 1 || got[0] != ids[2] || reached != 3000 {
		t.Fatalf("from 2500 = %v, reached %d, %v; want [%s], 3000", got, reached, err, ids[2])
	}
	if got, reached, err = s.PurgeFrom(ctx, cairnqtype.PurgeOptions{}, 2500); err != nil || len(got) != 0 || reached != 2500 {
		t.Fatalf("from 2500 again = %v, reached %d, %v; want nothing, 2500", got, reached, err)
	}
	if got, err := s.Purge(ctx, cairnqtype.PurgeOptions{}); err != nil || len(got) != 1 || got[0] != ids[1] {
		t.Fatalf("Purge = %v, %v; want the task behind the floor, %s", got, err, ids[1])
	}
}

// frontsClock is a claimFronts with a lag of 100 ms, a clock starting at
// now, and the draw shape of one queue, for the tests of observe.
func frontsClock(now time.Time) (f *claimFronts, key string, after func(time.Duration) time.Time, at func(ms int64) time.Time) {
	return &claimFronts{lag: 100 * time.Millisecond}, frontKey([]string{"q"}, nil),
		func(d time.Duration) time.Time { return now.Add(d) },
		func(ms int64) time.Time { return time.UnixMilli(ms) }
}

// A full draw that took a higher priority's task and one of a backlog
// behind the window's front, at that front's priority, moves the window
// back to the backlog at once.
func TestClaimFrontMovesBackToABacklogBesideAHigherPriority(t *testing.T) {
	now := time.Unix(2000, 0)
	f, key, after, at := frontsClock(now)
	f.observe(key, true, now, time.Millisecond, 1, []*cairnqtype.Task{{ID: "f", Priority: 2, RunAt: at(100)}})
	f.observe(key, false, after(150*time.Millisecond), time.Millisecond, 1, []*cairnqtype.Task{{ID: "g", Priority: 2, RunAt: at(110)}})
	f.observe(key, true, after(time.Second), time.Millisecond, 2, []*cairnqtype.Task{{ID: "x", Priority: 3, RunAt: at(900)}, {ID: "b1", Priority: 2, RunAt: at(50)}})
	if w, p, floor := f.plan(key, after(time.Second+10*time.Millisecond)); !w || p != 2 || floor != (frontFloor{50, "b1"}) {
		t.Fatalf("plan after a full draw behind the window at a lower priority than its front = %v, %d, %v; want windowed from 2, {50 b1}", w, p, floor)
	}
}

// Where a full draw finds tasks behind the settled front, a newer front
// not yet settled moves back as well, so that it does not skip them once
// it settles. A task found behind only the newer front leaves it where
// it is (the draws from the settled front read that task).
func TestClaimFrontMovesNewerFrontsBackWithTheSettledOne(t *testing.T) {
	now := time.Unix(3000, 0)
	f, key, after, at := frontsClock(now)
	f.observe(key, true, now, time.Millisecond, 1, []*cairnqtype.Task{{ID: "s", Priority: 0, RunAt: at(100)}})
	f.observe(key, false, after(960*time.Millisecond), time.Millisecond, 1, []*cairnqtype.Task{{ID: "u", Priority: 0, RunAt: at(300)}})
	f.observe(key, true, after(time.Second), time.Millisecond, 1, []*cairnqtype.Task{{ID: "g", Priority: 0, RunAt: at(200)}})
	if _, _, floor := f.plan(key, after(1010*time.Millisecond)); floor != (frontFloor{100, "s"}) {
		t.Fatalf("floor %v after a full draw between the settled front and a newer one; want the settled {100 s}", floor)
	}
	f.observe(key, false, after(1020*time.Millisecond), time.Millisecond, 1, []*cairnqtype.Task{{ID: "v", Priority: 0, RunAt: at(400)}})
	f.observe(key, true, after(1030*time.Millisecond), time.Millisecond, 1, []*cairnqtype.Task{{ID: "b", Priority: 0, RunAt: at(50)}})
	// u, then v, settle before the last full draw's own front does.
	for _, d := range []time.Duration{1070 * time.Millisecond, 1125 * time.Millisecond} {
		if _, _, floor := f.plan(key, after(d)); floor != (frontFloor{50, "b"}) {
			t.Fatalf("floor %v at %v; want the full draw's {50 b}, behind the settled front", floor, d)
		}
	}
}
