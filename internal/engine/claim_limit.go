package engine

import (
	"context"
	"regexp"
	"slices"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/protocol"
)

// GlobalLimit bounds how many tasks of one name run at once across every
// Go worker on the database, optionally per value of a metadata member:
// a claim of the name counts the running rows under the name's lock and
// claims only as many as leave the count within Max.
type GlobalLimit struct {
	Max int
	// PerKey, when set, makes Max a bound per value of this metadata
	// member (a tenant); tasks without it share the value "".
	PerKey string
}

// limitKey is the lock_key a name's limited claims serialize on.
func limitKey(name string) string { return "cairnq:limit:" + name }

// metadataKey is what a PerKey may be: a member name both dialects read
// the same way with ->> (SQLite reads a dot or a bracket as a path).
var metadataKey = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidateGlobalLimit checks a limit for the handler of name.
func ValidateGlobalLimit(name string, l GlobalLimit) error {
	if l.Max < 1 {
		return argError("handle", "global limit", "for %q must allow at least 1 task, got %d", name, l.Max)
	}
	if l.PerKey != "" && !metadataKey.MatchString(l.PerKey) {
		return argError("handle", "global limit", "for %q: metadata key %q must be 1 to 64 letters, digits, '_' or '-'", name, l.PerKey)
	}
	return nil
}

// limitPickArgs are limit_pick's arguments for a draw of up to limit
// tasks of name from queues, leaving out the tenants in full. A single
// queue goes as an equality (protocol.One), as drawPlain's does: with a
// list the planner cannot read cairnq_tasks_claim_idx in the pick's
// order, and sorted every queued task of the name on every claim, a cost
// that grew with the backlog (docs/benchmarks.md, "Global limits").
func (s *Store) limitPickArgs(queues []string, base protocol.Args, name string, key any, full []string, limit int) protocol.Args {
	a := withArgs(base, protocol.Args{"name": name, "tenant_key": key, "full": s.list(full),
		"limit": int64(max(4*limit, limitPickScan))})
	if len(queues) == 1 {
		a["queues"] = protocol.One(queues[0])
	}
	return a
}

// limitPickScan is the fewest candidates a per-tenant draw reads for the
// slots it may fill: a window with room for some tenants' backlog before
// another's tasks.
const limitPickScan = 64

// limitedDraw claims up to limit tasks of name under its global limit,
// in q's write transaction: the name's lock, the count of its running
// tasks, then a claim of no more than the limit leaves room for. base
// holds the claim's arguments (queues, worker, lease). On Postgres the
// count sees the claims committed by the lock's earlier holders because
// it is a statement of its own under READ COMMITTED, the server's
// default; a pool whose transactions default to REPEATABLE READ or
// SERIALIZABLE would count from the transaction's first snapshot, and
// is not supported for limited names. Per tenant, the pick reads past
// the queued tasks of tenants already at their limit (no index holds the
// metadata member), under the name's lock.
//
// capped reports that the limit, not the queue, bound the draw: it
// left less room than limit asked for, and the draw filled it (per
// tenant: a tenant at its limit, whose queued tasks the pick leaves
// out, or a candidate passed over for it).
func (s *Store) limitedDraw(ctx context.Context, q querier, name string, l GlobalLimit, limit int, queues []string, base protocol.Args,
	plain func(names []string, limit int) ([]*cairnqtype.Task, error)) (tasks []*cairnqtype.Task, capped bool, err error) {
	if _, err := s.exec(ctx, q, stmtLockKey, protocol.Args{"key": limitKey(name)}); err != nil {
		return nil, false, err
	}
	var key any
	if l.PerKey != "" {
		key = l.PerKey
	}
	rows, err := s.exec(ctx, q, stmtLimitRunning, protocol.Args{"name": name, "tenant_key": key})
	if err != nil {
		return nil, false, err
	}
	running := make(map[string]int, len(rows))
	total := 0
	for _, r := range rows {
		tenant, _, err := asString("tenant", r["tenant"])
		if err != nil {
			return nil, false, err
		}
		n, _, err := asInt64("running", r["running"])
		if err != nil {
			return nil, false, err
		}
		running[tenant] = int(n)
		total += int(n)
	}
	if l.PerKey == "" {
		room := l.Max - total
		if room <= 0 {
			return nil, true, nil
		}
		tasks, err = plain([]string{name}, min(limit, room))
		// Capped when the limit's room, not the queue, ended the draw.
		return tasks, room < limit && len(tasks) == room, err
	}
	full := []string{} // not nil: an empty list excludes no tenant, NULL would exclude all
	for tenant, n := range running {
		if n >= l.Max {
			full = append(full, tenant)
		}
	}
	slices.Sort(full)
	capped = len(full) > 0
	rows, err = s.exec(ctx, q, stmtLimitPick, s.limitPickArgs(queues, base, name, key, full, limit))
	if err != nil {
		return nil, false, err
	}
	var ids []string
	for _, r := range rows {
		if len(ids) == limit {
			break
		}
		id, _, err := asString("id", r["id"])
		if err != nil {
			return nil, false, err
		}
		tenant, _, err := asString("tenant", r["tenant"])
		if err != nil {
			return nil, false, err
		}
		if running[tenant] >= l.Max {
			capped = true
			continue
		}
		running[tenant]++
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, capped, nil
	}
	claimed, err := s.exec(ctx, q, stmtClaimIDs, withArgs(base, protocol.Args{"ids": s.list(ids)}))
	if err != nil {
		return nil, false, err
	}
	if tasks, err = rowsToTasks(claimed); err != nil {
		return nil, false, err
	}
	// In claim order, as the pick read them: claim_ids returns them in
	// whatever order it updated them.
	rank := make(map[string]int, len(ids))
	for i, id := range ids {
		rank[id] = i
	}
	slices.SortFunc(tasks, func(a, b *cairnqtype.Task) int { return rank[a.ID] - rank[b.ID] })
	return tasks, capped, nil
}
