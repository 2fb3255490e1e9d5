package engine

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
)

// A claim's draws spend the worker's free calls in order: each takes up
// to Batch tasks a call, within its own Calls and Tasks, and a resource's
// room; a draw whose tasks ran short leaves the calls it did not use to
// the next.
func TestClaimsSpendsCallsAcrossDraws(t *testing.T) {
	bothStores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		for _, name := range []string{"a", "b", "c"} {
			for range 5 {
				if _, err := s.Submit(ctx, SubmitParams{Name: name}); err != nil {
					t.Fatal(err)
				}
			}
		}
		p := cairnqtype.ClaimParams{Queues: []string{"default"}, Names: []string{"a", "b", "c"}, WorkerID: "w"}
		got, err := s.Claims(ctx, ClaimRequest{ClaimParams: p, Calls: 4, Draws: []Draw{
			{Names: []string{"a"}, Batch: 2, Calls: 10, Tasks: -1}, // 5 tasks: 3 calls
			{Names: []string{"b"}, Batch: 1, Calls: 10, Tasks: 1},  // its rate limit: 1
			{Names: []string{"c"}, Batch: 1, Calls: 10, Tasks: -1}, // no calls left
		}})
		if err != nil {
			t.Fatal(err)
		}
		if n := counts(got.Tasks); !slices.Equal(n, []int{5, 1, 0}) || got.Drained || !got.Ran {
			t.Fatalf("drew %v (drained %v, ran %v), want [5 1 0], not drained", n, got.Drained, got.Ran)
		}

		// A resource's room bounds the draws that share it, together.
		got, err = s.Claims(ctx, ClaimRequest{ClaimParams: p, Calls: 10, Resources: map[string]int{"gpu": 3}, Draws: []Draw{
			{Names: []string{"b"}, Batch: 1, Calls: 2, Tasks: -1, Resource: "gpu"},
			{Names: []string{"c"}, Batch: 1, Calls: 10, Tasks: -1, Resource: "gpu"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if n := counts(got.Tasks); !slices.Equal(n, []int{2, 1}) || got.Drained {
			t.Fatalf("drew %v (drained %v), want [2 1] within the resource's 3, not drained", n, got.Drained)
		}

		// Every draw short of its bound: drained.
		got, err = s.Claims(ctx, ClaimRequest{ClaimParams: p, Calls: 20, Draws: []Draw{
			{Names: []string{"b"}, Batch: 1, Calls: 10, Tasks: -1},
			{Names: []string{"c"}, Batch: 1, Calls: 10, Tasks: -1},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if n := counts(got.Tasks); !slices.Equal(n, []int{2, 4}) || !got.Drained {
			t.Fatalf("drew %v (drained %v), want [2 4] and drained", n, got.Drained)
		}
	})
}

// A claim whose only draw has no room runs no session (no probe, no
// recovery) and writes the settlements it carries on their own.
func TestClaimsWithoutRoomOnlySettles(t *testing.T) {
	bothStores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		ids := claimed(t, s, 1)
		cs := []*Completion{{ID: ids[0], WorkerID: "w"}}
		leases := LeaseLook{Every: time.Hour}
		got, err := s.Claims(ctx, ClaimRequest{ClaimParams: cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w"},
			Calls: 1, Settle: cs, Leases: &leases, Draws: []Draw{{Batch: 1, Calls: 1, Tasks: 0}}})
		if err != nil {
			t.Fatal(err)
		}
		if got.Ran || got.Tasks[0] != nil || cs[0].Status != cairnqtype.StatusSucceeded {
			t.Fatalf("claim without room: ran %v, drew %v, completion %q; want no session and the completion settled", got.Ran, got.Tasks, cs[0].Status)
		}
		if !leases.recoveredAt.IsZero() {
			t.Fatal("a claim that ran no session counts as a recovery")
		}
	})
}

// Limited draws take their names' locks in name order, among their own
// places; the others keep theirs.
func TestDrawOrderLocksInNameOrder(t *testing.T) {
	lim := &GlobalLimit{Max: 1}
	draws := []Draw{
		{Names: []string{"zeta"}, Limit: lim},
		{Names: []string{"plain"}},
		{Names: []string{"alpha"}, Limit: lim},
		{Names: []string{"mid"}, Limit: lim},
	}
	order, limits := drawOrder(draws)
	var names []string
	for _, i := range order {
		names = append(names, draws[i].Names[0])
	}
	if want := []string{"alpha", "plain", "mid", "zeta"}; !slices.Equal(names, want) {
		t.Fatalf("draw order %v, want %v", names, want)
	}
	if len(limits) != 3 || limits["mid"] != *lim {
		t.Fatalf("limits %v, want the three limited names", limits)
	}
	if order, limits := drawOrder(draws[1:2]); limits != nil || order != nil {
		t.Fatalf("order %v, limits %v for no limited draw, want the draws as given (nil) and none", order, limits)
	}
}

// A busy worker recovers leases once every Every; a look the pace left
// out is owed from its due time, and paid by a claim whose look the pace
// refused again (another worker of the store read since) or that ran no
// session.
func TestLeaseLookPacesRecovery(t *testing.T) {
	l := LeaseLook{Every: time.Hour}
	if l.skipRecover(true) {
		t.Fatal("a busy worker's first claim skips recovery")
	}
	l.after(false, true, false, time.Time{})
	if !l.skipRecover(true) || l.skipRecover(false) {
		t.Fatal("after a recovery a busy worker should skip the next for Every, an idle one never")
	}
	due := time.Now().Add(-time.Millisecond)
	l.after(false, true, false, due)
	if !l.Due().Equal(due) || !l.owed() {
		t.Fatalf("a look left out: due %v owed %v, want due at %v and owed", l.Due(), l.owed(), due)
	}
	l.after(true, true, false, time.Now().Add(time.Second))
	if !l.Due().IsZero() {
		t.Fatal("an owed look refused again by the pace stays owed")
	}
	var none *LeaseLook
	if none.owed() {
		t.Fatal("a nil LeaseLook owes a look")
	}
	none.after(true, true, false, time.Now()) // no-op
}

func counts(tasks [][]*cairnqtype.Task) []int {
	n := make([]int, len(tasks))
	for i, ts := range tasks {
		n[i] = len(ts)
	}
	return n
}

// A global limit on a draw of other than one name is refused, with
// nothing claimed; a draw's Batch below 1 counts as 1.
func TestClaimsRefusesALimitWithoutOneName(t *testing.T) {
	s, _ := openTestStore(t, SQLiteOptions{})
	ctx := t.Context()
	for _, name := range []string{"a", "b"} {
		if _, err := s.Submit(ctx, SubmitParams{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	p := cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w"}
	_, err := s.Claims(ctx, ClaimRequest{ClaimParams: p, Calls: 2,
		Draws: []Draw{{Names: []string{"a", "b"}, Batch: 1, Calls: 2, Tasks: -1, Limit: &GlobalLimit{Max: 1}}}})
	if !errors.Is(err, cairnqtype.ErrInvalidArgument) {
		t.Fatalf("a limit on two names: %v, want ErrInvalidArgument", err)
	}
	got, err := s.Claims(ctx, ClaimRequest{ClaimParams: p, Calls: 2, Draws: []Draw{{Calls: 2, Tasks: -1}}})
	if err != nil || len(got.Tasks[0]) != 2 {
		t.Fatalf("a draw of batch 0: %v, %v; want both tasks, one a call", got.Tasks, err)
	}
}

// A draw a global limit bound says so (Claimed.Capped), on both
// backends, so that the worker claims again when a call ends, as a busy
// one, and not as from idle; a draw the queue bound does not, nor does a
// claim of a limited name with room to spare.
func TestClaimsSayWhenALimitCapped(t *testing.T) {
	bothStores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		for _, tenant := range []string{"a", "a", "a", "b"} {
			if _, err := s.Submit(ctx, SubmitParams{Name: "lim", SubmitOptions: cairnqtype.SubmitOptions{Metadata: map[string]string{"tenant": tenant}}}); err != nil {
				t.Fatal(err)
			}
		}
		claim := func(l GlobalLimit, calls int) Claimed {
			t.Helper()
			got, err := s.Claims(ctx, ClaimRequest{ClaimParams: cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w", Lease: time.Minute},
				Calls: calls, Draws: []Draw{{Names: []string{"lim"}, Batch: 1, Calls: calls, Tasks: -1, Limit: &l}}})
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		if got := claim(GlobalLimit{Max: 10}, 1); len(got.Tasks[0]) != 1 || got.Capped {
			t.Fatalf("room for 10, one call: %d tasks, capped %v; want 1, not capped", len(got.Tasks[0]), got.Capped)
		}
		// Drained all the same: nothing else the worker may claim now,
		// so it sleeps until a call ends.
		if got := claim(GlobalLimit{Max: 2}, 4); len(got.Tasks[0]) != 1 || !got.Capped || !got.Drained {
			t.Fatalf("a limit of 2 with 1 running, 4 calls: %d tasks, capped %v, drained %v; want 1, capped, drained",
				len(got.Tasks[0]), got.Capped, got.Drained)
		}
		if got := claim(GlobalLimit{Max: 2}, 4); len(got.Tasks[0]) != 0 || !got.Capped {
			t.Fatalf("at the limit: %d tasks, capped %v; want none, capped", len(got.Tasks[0]), got.Capped)
		}
		// Per tenant: a holds 2 running (its third queued), b none.
		if got := claim(GlobalLimit{Max: 2, PerKey: "tenant"}, 4); len(got.Tasks[0]) != 1 || !got.Capped {
			t.Fatalf("per tenant, a at its limit: %d tasks, capped %v; want b's one, capped", len(got.Tasks[0]), got.Capped)
		}
		if got := claim(GlobalLimit{Max: 5}, 4); len(got.Tasks[0]) != 1 || got.Capped {
			t.Fatalf("room left, the queue short: %d tasks, capped %v; want a's last, not capped", len(got.Tasks[0]), got.Capped)
		}
	})
}
