package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
)

// Draw is one draw of a worker's claim: up to as many tasks of Names as
// its bounds and the claim's free calls allow.
type Draw struct {
	// Names are the task names it draws; nil draws any of the claim's.
	Names []string
	// Batch is how many tasks one call runs: the draw takes up to Batch
	// tasks for each call it may start. Below 1 counts as 1.
	Batch int
	// Calls bounds the calls it may start, before the claim's free
	// calls: its name's own cap on concurrency, ClaimBatch.
	Calls int
	// Tasks bounds the tasks it may take (a rate limit's tokens);
	// negative for no bound.
	Tasks int
	// Resource names the capacity its calls share with other draws (the
	// claim's Resources), "" for none.
	Resource string
	// Limit is the global limit of its one name, nil for none: the draw
	// takes the name's lock, counts its running tasks and claims no more
	// than the limit leaves room for (claim_limit.go). A limited draw
	// names exactly one task name, or Claims refuses it.
	Limit *GlobalLimit
}

// ClaimRequest is one claim of a worker: its draws, in the order they
// draw (the engine moves the limited ones into name order among
// themselves, so that two claims take the names' locks in one order),
// sharing the calls the worker has free. Claims reports what each drew.
type ClaimRequest struct {
	// Queues, Names (every draw's), WorkerID and Lease are the claim's;
	// the draws bound themselves, so Limit bounds nothing (it must not be
	// negative).
	cairnqtype.ClaimParams
	Draws []Draw
	// Calls is how many calls the worker has free: the draws spend them
	// in order, each as many as it drew tasks for.
	Calls int
	// Resources is, for each resource a draw names, how many more calls
	// may use it.
	Resources map[string]int
	// Settle are plain successes the claim writes before it draws, each
	// as Store.Complete would, in the claim's transaction: on SQLite a
	// busy worker's settlements ride on its next claim, one request and
	// one commit for both. The claim sets each one's outcome when it
	// returns without an error; with one, none of them was settled by it
	// (as uncertainly as any write whose reply was lost).
	Settle []*Completion
	// Busy says the worker's last claim drew tasks: this one opens its
	// transaction without the read-only probe, which exists to keep idle
	// workers off the write lock and would cost a busy one a read per
	// claim.
	Busy bool
	// Leases is the worker's record of its looks for an expired lease,
	// by which the claim paces its lease recovery and which it updates
	// (LeaseLook). Nil recovers leases at every claim whose probe sees
	// one expired, unpaced.
	Leases *LeaseLook
}

// Claimed is what a worker's claim drew.
type Claimed struct {
	// Tasks holds each draw's tasks, in ClaimRequest.Draws' order.
	Tasks [][]*cairnqtype.Task
	// Ran reports that the claim's transaction ran: its probe found work
	// or a lease to recover, or it ran no probe.
	Ran bool
	// Drained reports that every draw ran and came back short of its
	// bound: nothing the worker may claim was left at the claim's
	// snapshot, but what a global limit held back (Capped).
	Drained bool
	// Capped reports that a global limit, not its queue, bound a draw:
	// the worker's next claim for it is due when one of its calls ends,
	// and is a busy worker's (no probe first: its tasks are queued).
	Capped bool
	// LookDue is set when the pace left out the claim's look for an
	// expired lease, or a busy worker's recovery (ClaimRequest.Leases):
	// until when.
	LookDue time.Time
}

// Claims makes one claim of a worker: lease recovery as r.Leases paces
// it, the settlements r carries, then r's draws in one claim session
// (claimSession's probe, transaction and retries). A claim whose only
// draw has no room draws nothing and runs no session; its settlements
// are written on their own.
func (s *Store) Claims(ctx context.Context, r ClaimRequest) (Claimed, error) {
	for i, d := range r.Draws {
		if d.Limit != nil && len(d.Names) != 1 {
			return Claimed{}, argError("claim", fmt.Sprintf("draw %d", i), "a global limit needs exactly one name, got %d", len(d.Names))
		}
	}
	out := Claimed{Tasks: make([][]*cairnqtype.Task, len(r.Draws))}
	order, limits := drawOrder(r.Draws)
	h := claimHints{SkipProbe: r.Busy, Settle: r.Settle, Limits: limits}
	if r.Leases != nil {
		h.PaceLook, h.SkipRecover = true, r.Leases.skipRecover(r.Busy)
	}
	single := len(r.Draws) == 1 && limits == nil
	owed := r.Leases.owed()
	if single && r.room(r.Draws[0], r.Calls, nil) <= 0 {
		// Its bounds skip the draw: no claim, and no recovery.
		if err := s.SettleCompletions(ctx, r.Settle); err != nil {
			return Claimed{}, err
		}
		r.Leases.after(owed, false, h.SkipRecover, time.Time{})
		return out, nil
	}
	res, err := s.claimSession(ctx, r.ClaimParams, h, single, func(draw drawFunc) error {
		// A retried transaction starts over.
		clear(out.Tasks)
		out.Drained = true
		left, used := r.Calls, map[string]int(nil)
		for k := range r.Draws {
			i := k
			if order != nil {
				i = order[k]
			}
			d := r.Draws[i]
			if left <= 0 {
				out.Drained = false
				break
			}
			limit := r.room(d, left, used)
			if limit <= 0 {
				out.Drained = false
				continue
			}
			rows, err := draw(d.Names, limit)
			if err != nil {
				return err
			}
			if len(rows) >= limit {
				out.Drained = false
			}
			out.Tasks[i] = rows
			batch := max(d.Batch, 1)
			calls := (len(rows) + batch - 1) / batch
			left -= calls
			if d.Resource != "" {
				if used == nil {
					used = map[string]int{}
				}
				used[d.Resource] += calls
			}
		}
		return nil
	})
	if err != nil {
		return Claimed{}, err
	}
	out.Ran, out.LookDue, out.Capped = res.Ran, res.LookDue, res.Capped
	r.Leases.after(owed, true, h.SkipRecover, res.LookDue)
	return out, nil
}

// room is how many tasks d may draw with left calls free and used of
// its resource spent by the draws before it.
func (r *ClaimRequest) room(d Draw, left int, used map[string]int) int {
	calls := min(d.Calls, left)
	if d.Resource != "" {
		calls = min(calls, r.Resources[d.Resource]-used[d.Resource])
	}
	if calls <= 0 {
		return 0
	}
	limit := max(d.Batch, 1) * calls
	if d.Tasks >= 0 {
		limit = min(limit, d.Tasks)
	}
	return limit
}

// drawOrder is the order draws run in: as given (order nil, the common
// case, which spares a claim the slice), but the limited draws (each
// takes its name's lock until the claim commits) in name order among
// their own places, so that two claims cannot take two names' locks in
// opposite orders. The other draws take no lock they wait for (SKIP
// LOCKED). limits are the limited draws' limits by name, nil for none.
func drawOrder(draws []Draw) (order []int, limits map[string]GlobalLimit) {
	var at, limited []int
	for i, d := range draws {
		if d.Limit != nil { // one name: Claims checked
			if limits == nil {
				limits = map[string]GlobalLimit{}
			}
			limits[d.Names[0]] = *d.Limit
			at, limited = append(at, i), append(limited, i)
		}
	}
	if limits == nil {
		return nil, nil
	}
	order = make([]int, len(draws))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(limited, func(a, b int) int { return strings.Compare(draws[a].Names[0], draws[b].Names[0]) })
	for k, i := range at {
		order[i] = limited[k]
	}
	return order, limits
}
