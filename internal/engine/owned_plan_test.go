package engine

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/protocol"
)

// The writes a worker makes to the tasks it holds find them by their key
// under the plan a connection caches, the generic one, on a new table as
// on one whose statistics count few running tasks (package protocol,
// "Ownership checks on Postgres"): the lease index is read whole while a
// held snapshot keeps its entries, and a scan of the table, cheapest
// while it is new, would stay cached as it grows.
func TestOwnedWritesFindTheirTasksByKey(t *testing.T) {
	ctx := t.Context()
	s, _, db := openClaimLogPG(t)
	owned := []string{stmtComplete, stmtCompleteMany, stmtCompleteSteps, stmtFail, stmtSucceed, stmtSnooze, stmtProgress, stmtHeartbeat,
		stmtDurableStep, stmtDurableStepMany, stmtDurableEvent}
	check := func(table string, names []string) {
		t.Helper()
		for _, name := range names {
			scans, indexes := genericPlanScans(t, s, db, name)
			if len(indexes) == 0 || strings.Join(indexes, ",") != strings.Repeat("cairnq_tasks_pkey,", len(indexes)-1)+"cairnq_tasks_pkey" || len(scans) != 0 {
				t.Errorf("%s on %s: the generic plan reads cairnq_tasks by %v and through the indexes %v, want the primary key alone", name, table, scans, indexes)
			}
		}
	}
	fill := func(status string, from, to int) {
		t.Helper()
		if _, err := db.ExecContext(ctx, `
INSERT INTO cairnq_tasks (id, name, status, payload, run_at_ms, created_at_ms, updated_at_ms, worker_id, lease_until_ms, completed_at_ms)
SELECT 'task_' || $1 || g, 'job', $1, '{}', g, g, g,
       CASE WHEN $1 = 'running' THEN 'w' END,
       CASE WHEN $1 = 'running' THEN 4102444800000 END,
       CASE WHEN $1 = 'running' THEN NULL ELSE g END
FROM generate_series($2::int, $3::int) AS g`, status, from, to); err != nil {
			t.Fatal(err)
		}
	}
	// Never vacuumed nor analyzed, as a table in its first seconds is.
	if _, err := db.ExecContext(ctx, "ALTER TABLE cairnq_tasks SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	check("a new table", owned)
	fill("running", 1, 2000)
	check("a new table of 2,000 running tasks", owned)

	// 20,000 finished tasks beside them, and the statistics that say so.
	fill("succeeded", 1, 20000)
	if _, err := db.ExecContext(ctx, "ANALYZE cairnq_tasks"); err != nil {
		t.Fatal(err)
	}
	// heartbeat_batch keeps the list filter Specialize rewrites, id =
	// ANY(...), whose generic plan on a new table is a scan of it: one
	// statement a beat, not a settlement a task, so it is checked here only.
	check("a table of finished tasks", append(owned, stmtHeartbeatBatch))
}

// genericPlanScans returns how the generic plan of the store's statement
// name (see prepareGeneric) reaches cairnq_tasks: the node types that
// read the table other than through an index (a Seq Scan), and the names
// of the indexes it reads.
func genericPlanScans(t *testing.T, s *Store, db *sql.DB, name string) (scans, indexes []string) {
	t.Helper()
	// Values for every parameter any of the owned writes takes; the plan
	// is generic, so which values does not matter.
	a := protocol.Args{
		"id": "task_x", "ids": pgArray([]string{"task_x"}), "worker_id": "w", "worker_ids": pgArray([]string{"w"}),
		"result": nil, "results": pgArrayNullable([]any{nil}), "lease_ms": int64(30000), "progress": nil,
		"message": nil, "retryable": true, "error": "{}", "delay_ms": int64(0),
		"event": "", "entry": "{}", "attempt": int64(1), "position": int64(0), "max_bytes": int64(1 << 24),
		"attempts": pgArray([]string{"1"}), "positions": pgArray([]string{"0"}), "entries": pgArray([]string{"{}"}),
		"marked_ids": pgArray([]string{"task_x"}), "marked_keys": pgArray([]string{"k"}), "marked_records": pgArray([]string{"r"}),
	}
	scans, indexes, _ = planReads(explainGenericPlan(t, s, db, name, a))
	return scans, indexes
}

// A settlement finds its tasks by their ids, not through the lease index:
// while a snapshot older than them lives, that index keeps an entry for
// every task claimed within a lease, and the planner, counting few
// running tasks, would read them all. Both the plan made for the call's
// own arrays and the generic one a cached statement takes after five
// calls are checked.
func TestCompleteManySkipsLeaseEntriesAHeldSnapshotKeeps(t *testing.T) {
	ctx := t.Context()
	s, _, db := openClaimLogPG(t)
	holdHorizon(t, db)

	const settled, settling = 20000, 20
	submitJobs(t, s, settled)
	// Each task claimed and settled leaves a running version, its lease
	// an hour off, that vacuum may not remove.
	claimJobs(t, s, settled, time.Hour, func(got []*cairnqtype.Task) {
		cs := make([]*Completion, len(got))
		for i, task := range got {
			cs[i] = &Completion{ID: task.ID, WorkerID: "w"}
		}
		if err := s.SettleCompletions(ctx, cs); err != nil {
			t.Fatal(err)
		}
	})
	submitJobs(t, s, settling)
	got, err := s.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w2", Limit: settling, Lease: time.Hour})
	if err != nil || len(got) != settling {
		t.Fatalf("claimed %d of %d: %v", len(got), settling, err)
	}
	// What the planner sees in a table past its first autovacuum.
	if _, err := db.ExecContext(ctx, "ANALYZE cairnq_tasks"); err != nil {
		t.Fatal(err)
	}
	ids, workers, results := make([]string, settling), make([]string, settling), make([]any, settling)
	for i, task := range got {
		ids[i], workers[i] = task.ID, "w2"
	}
	a := protocol.Args{"ids": pgArray(ids), "worker_ids": pgArray(workers), "results": pgArrayNullable(results)}

	// The hold is live: a read of the unexpired leases walks the entries.
	lease := explainSQLBuffers(t, db, "SELECT count(*) FROM cairnq_tasks WHERE status = 'running' AND lease_until_ms > 0")
	custom := explainBuffers(t, s, db, stmtCompleteMany, a)
	textArray := func(vs []string) string { return "'{" + strings.Join(vs, ",") + "}'" }
	nulls := make([]string, settling)
	for i := range nulls {
		nulls[i] = "NULL"
	}
	generic := explainGenericBuffers(t, s, db, stmtCompleteMany, a, textArray(ids), textArray(workers), textArray(nulls))
	t.Logf("buffers read: the unexpired leases %d, a settlement of %d %d (its own plan), %d (generic plan)", lease, settling, custom, generic)
	if lease < settled/50 {
		t.Fatalf("reading the leases took %d buffers past %d dead entries: the test no longer holds the horizon", lease, settled)
	}
	for plan, n := range map[string]int{"its own plan": custom, "the generic plan": generic} {
		if n > 10*settling || n*4 > lease {
			t.Errorf("a settlement of %d read %d buffers under %s (the leases: %d), want under %d and a quarter of the leases'", settling, n, plan, lease, 10*settling)
		}
	}
}
