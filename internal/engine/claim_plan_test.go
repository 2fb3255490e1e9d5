package engine

import (
	"slices"
	"testing"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/protocol"
)

// A draw from a known front and its probe read the queued tasks through
// a claim index whatever the statistics say about them (package
// protocol, "Claims on Postgres"): here the statistics count no queued
// task and the claim indexes are three levels deep beside a status index
// of one, which tips a planner that counts on status = 'queued' to the
// status index and a sort of every queued task it finds. In the
// held-snapshot hold of docs/benchmarks.md ("Sustained load") it was the
// claim indexes grown taller by the entries vacuum could not remove;
// here it is wide ids.
func TestClaimsReadTheClaimIndexes(t *testing.T) {
	ctx := t.Context()
	s, _, db := openClaimLogPG(t)
	if _, err := db.ExecContext(ctx, "ALTER TABLE cairnq_tasks SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	// Statistics taken before the queue filled: finished tasks only.
	if _, err := db.ExecContext(ctx, `
INSERT INTO cairnq_tasks (id, name, status, payload, run_at_ms, created_at_ms, updated_at_ms, completed_at_ms)
SELECT 'task_done' || g, 'job', 'succeeded', '{}', g, g, g, g FROM generate_series(1, 3000) AS g`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "ANALYZE cairnq_tasks"); err != nil {
		t.Fatal(err)
	}
	// 600 queued tasks due at once, each id near 2 KB of digits the
	// index cannot compress, so that few fit a page of the claim indexes.
	if _, err := db.ExecContext(ctx, `
INSERT INTO cairnq_tasks (id, name, status, payload, run_at_ms, created_at_ms, updated_at_ms)
SELECT 'task_' || lpad(g::text, 4, '0') || (SELECT string_agg(md5(g || '.' || i), '') FROM generate_series(1, 60) AS i),
       'job', 'queued', '{}', 1000000, g, g
FROM generate_series(1, 600) AS g`); err != nil {
		t.Fatal(err)
	}
	var floorID string
	if err := db.QueryRowContext(ctx, "SELECT id FROM cairnq_tasks WHERE status = 'queued' ORDER BY id OFFSET 300 LIMIT 1").Scan(&floorID); err != nil {
		t.Fatal(err)
	}
	// The trap is set: a draw written with the status as a constant, as
	// the statements were, reads the status index and sorts.
	var trap string
	if err := db.QueryRowContext(ctx, `EXPLAIN (FORMAT JSON)
SELECT id FROM cairnq_tasks WHERE status = 'queued' AND queue = 'default'
ORDER BY priority DESC, run_at_ms, id LIMIT 4`).Scan(&trap); err != nil {
		t.Fatal(err)
	}
	if _, indexes, sorts := planReads(parsePlan(t, trap)); !slices.Equal(indexes, []string{"cairnq_tasks_status_completed_idx"}) || sorts != 1 {
		t.Fatalf("a draw by the constant status reads %v with %d sorts: the test no longer tips the planner to the status index", indexes, sorts)
	}

	claimIndexes := []string{"cairnq_tasks_claim_idx", "cairnq_tasks_claim_name_idx"}
	for _, c := range []struct {
		shape string
		names any
	}{
		{"any name", nil},
		{"one name", protocol.One("job")},
		{"two names", pgArray([]string{"job", "other"})},
	} {
		for _, from := range []struct {
			name   string
			window protocol.Args
		}{
			{"from a front", frontFloor{runAtMS: 1000000, id: floorID}.args(0)},
			{"from before its first task", frontFloor{runAtMS: 1000000}.args(0)},
			{"below a higher priority", frontFloor{runAtMS: 1000000}.args(5)},
		} {
			a := withArgs(protocol.Args{
				"queues": protocol.One("default"), "names": c.names, "worker_id": "w", "lease_ms": int64(30000), "limit": int64(4),
				"look_for_expired": true,
			}, from.window)
			for _, stmt := range []string{stmtClaimWindow, stmtClaimableProbeWindow} {
				for _, plan := range []string{"custom", "generic"} {
					var p planNode
					if plan == "custom" {
						p = explainPlan(t, s, db, stmt, a)
					} else {
						p = explainGenericPlan(t, s, db, stmt, a)
					}
					// The probe's look for expired leases is not a draw.
					scans, indexes, sorts := planReads(pruned(p, "lease_until_ms"))
					var others []string
					for _, ix := range indexes {
						// The primary key finds the rows a draw picked.
						if !slices.Contains(claimIndexes, ix) && ix != "cairnq_tasks_pkey" {
							others = append(others, ix)
						}
					}
					if len(scans) > 0 || len(others) > 0 || sorts > 0 || !slices.ContainsFunc(indexes, func(ix string) bool { return slices.Contains(claimIndexes, ix) }) {
						t.Errorf("%s, %s, %s, %s plan: reads cairnq_tasks by %v and through %v with %d sorts, want the claim indexes in claim order",
							stmt, c.shape, from.name, plan, scans, indexes, sorts)
					}
				}
			}
		}
	}
}

// A per-tenant draw's pick from one queue reads a claim index in the
// pick's order and stops at its limit, under the plan the arguments
// shape and under the generic one a prepared statement settles on: with
// the queues as a list it read every queued task of the name and sorted
// them on every claim, a cost that grew with the backlog (a backlog of
// 8,000 ran a limit of 2 per tenant of 4 at 424 tasks/s against 1,165
// for one of 1,600, docs/benchmarks.md, "Global limits").
func TestTenantPickReadsAClaimIndex(t *testing.T) {
	ctx := t.Context()
	s, _, db := openClaimLogPG(t)
	if _, err := db.ExecContext(ctx, `
INSERT INTO cairnq_tasks (id, name, status, payload, metadata, run_at_ms, created_at_ms, updated_at_ms)
SELECT 'task_' || lpad(g::text, 6, '0'), 'limited', 'queued', '{}', jsonb_build_object('tenant', 't' || (g % 4)), g, g, g
FROM generate_series(1, 5000) AS g`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "ANALYZE cairnq_tasks"); err != nil {
		t.Fatal(err)
	}
	base := s.claimArgs(cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w"})
	a := s.limitPickArgs([]string{"default"}, base, "limited", "tenant", []string{"t0", "t1"}, 2)
	for _, plan := range []struct {
		name string
		node planNode
	}{
		{"its own plan", explainPlan(t, s, db, stmtLimitPick, a)},
		{"the generic plan", explainGenericPlan(t, s, db, stmtLimitPick, a)},
	} {
		scans, indexes, sorts := planReads(plan.node)
		if sorts != 0 || slices.Contains(scans, "Seq Scan") || len(indexes) == 0 {
			t.Errorf("limit_pick from one queue, %s: scans %v through %v with %d sorts; want a claim index read in order", plan.name, scans, indexes, sorts)
		}
	}
	// The control: the same pick with the queues as a list, as it was.
	a["queues"] = pgArray([]string{"default"})
	if scans, _, sorts := planReads(explainPlan(t, s, db, stmtLimitPick, a)); sorts == 0 && !slices.Contains(scans, "Seq Scan") {
		t.Fatalf("limit_pick with the queues as a list reads %v without a sort: the test no longer shows what the equality spares", scans)
	}
}
