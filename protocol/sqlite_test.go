package protocol

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ncruces/go-sqlite3"
)

var taskColumns = []string{
	"id", "name", "queue", "status", "payload", "result", "error", "metadata",
	"progress", "message", "attempt", "max_attempts", "priority", "worker_id",
	"lease_until_ms", "run_at_ms", "cancel_requested_at_ms", "parent_id", "root_id",
	"correlation_id", "created_at_ms", "updated_at_ms", "completed_at_ms",
}

// resultColumns is what each statement returns, by column name.
var resultColumns = map[string][]string{
	"cancel":            taskColumns,
	"claim":             taskColumns,
	"claimable_probe":   {"has_work", "has_expired"},
	"complete":          taskColumns,
	"complete_many":     {"id", "status"},
	"fail":              taskColumns,
	"get":               taskColumns,
	"get_by_key":        taskColumns,
	"get_key":           {"task_id"},
	"get_status":        {"id", "status"},
	"get_status_by_key": {"id", "status"},
	"get_status_many":   {"id", "status"},
	"heartbeat":         taskColumns,
	"heartbeat_batch":   {"id", "cancel_requested_at_ms"},
	"insert_task":       taskColumns,
	"list":              taskColumns,
	"lock_key":          {"locked"},
	"progress":          taskColumns,
	"protocol_version":  {"value"},
	"purge":             {"id"},
	"purge_from":        {"id"},
	"queue_depth":       {"headroom"},
	"recover_leases":    taskColumns,
	"retry":             taskColumns,
	"stats":             {"queue", "status", "count"},
	"succeed":           taskColumns,
	"snooze":            taskColumns,
	"upsert_key":        nil,
	"expired_leases":    taskColumns,
	"queue_ages":        {"queue", "due", "oldest_run_at_ms", "oldest_age_ms"},
	"recent_failures":   {"name", "count", "last_failed_at_ms"},
	"claim_ids":         taskColumns,
	"workflow_steps":    {"record_id", "id", "status", "attempt", "updated_at_ms", "step"},
	"workflow_look":     {"task_key", "key_updated_at_ms", "id", "status"},
	"workflow_due":      {"id"},
	"limit_running":     {"tenant", "running"},
	"limit_pick":        {"id", "tenant"},
	"workflow_revise":   {"id"},
	"workflow_finish":   taskColumns,
	"workflow_heads":    append([]string{"key_updated_at_ms"}, taskColumns...),
	// The sweep's looks over the ended workflows.
	"workflow_ended":           {"id", "at_ms", "moved"},
	"workflow_ended_by_status": {"id", "at_ms", "moved"},
	"durable_step":             {"id"},
	"durable_event":            {"id", "queue", "status", "woke"},
	"queue_pause":              {"value"},
	"meta_rows":                {"key", "value"},
	"meta_put":                 nil,
	"meta_delete":              nil,
	"queue_resume":             {"value"},
	"delete_task":              taskColumns,
	"cancel_matching":          taskColumns,
	"fail_recorded":            taskColumns,
}

func TestSQLiteMigrations(t *testing.T) {
	conn := openDB(t, filepath.Join(t.TempDir(), "tasks.db"))
	want := map[string]string{
		"0001_init.sql": "1", "0002_purge_index.sql": "2", "0004_lease_index.sql": "4",
		"0005_clear_terminal_lease.sql": "5", "0006_claim_name_index.sql": "6",
		"0007_purge_status_index.sql": "7", "0008_claim_due_index.sql": "8",
		"0009_purge_queue_index.sql": "9", "0010_drop_status_index.sql": "10",
	}
	for _, m := range Migrations(SQLite) {
		exec(t, conn, m.SQL)
		meta := metaRows(t, conn)
		if meta["schema_version"] != want[m.Name] || meta["protocol_version"] != "1" {
			t.Errorf("after %s: meta = %v, want schema_version %s, protocol_version 1", m.Name, meta, want[m.Name])
		}
	}
	before := schema(t, conn, false)

	// Every script is safe to run again.
	for _, m := range Migrations(SQLite) {
		exec(t, conn, m.SQL)
	}
	if after := schema(t, conn, false); !slices.Equal(before, after) {
		t.Errorf("re-running the migrations changed the schema:\n%s", diff(before, after))
	}

	// 0005 clears leases left on rows that are not running.
	exec(t, conn, `INSERT INTO cairnq_tasks (id, name, status, payload, run_at_ms, lease_until_ms, created_at_ms, updated_at_ms)
		VALUES ('done', 'n', 'succeeded', '{}', 1, 99, 1, 1), ('live', 'n', 'running', '{}', 1, 99, 1, 1)`)
	exec(t, conn, Migrations(SQLite)[3].SQL)
	got := query(t, conn, "SELECT id, lease_until_ms FROM cairnq_tasks ORDER BY id")
	if got[0]["lease_until_ms"] != nil || got[1]["lease_until_ms"] != int64(99) {
		t.Errorf("0005: leases = %v", got)
	}
}

func TestSQLiteStatementsPrepare(t *testing.T) {
	conn := migratedDB(t)
	set := Statements(SQLite)
	for _, name := range set.Names() {
		st := set.Get(name)
		// Every combination of filters, rewritten or not.
		optional, list := st.filterParams(false), st.filterParams(true)
		filters := append(slices.Clone(optional), list...)
		for mask := range 1 << len(filters) {
			args := Args{}
			for i, f := range filters {
				if mask&(1<<i) != 0 {
					args[f] = "x"
					if i >= len(optional) {
						args[f] = One("x")
					}
				}
			}
			sp := st.Specialize(args)
			stmt, tail, err := conn.Prepare(sp.SQL)
			if err != nil {
				t.Errorf("%s %v: %v\n%s", name, args, err, sp.SQL)
				continue
			}
			if strings.TrimSpace(tail) != "" {
				t.Errorf("%s: tail %q", name, tail)
			}
			if stmt.BindCount() != len(sp.Params) {
				t.Errorf("%s: sqlite sees %d parameters, Params has %d", name, stmt.BindCount(), len(sp.Params))
			}
			if ro := stmt.ReadOnly(); ro == sp.Write {
				t.Errorf("%s: sqlite read-only = %v, but Write = %v", name, ro, sp.Write)
			}
			stmt.Close()
		}
		if got := columns(t, conn, st.SQL); !slices.Equal(got, resultColumns[name]) {
			t.Errorf("%s returns %q, want %q", name, got, resultColumns[name])
		}
	}
}

// TestSQLiteSchemaMatchesFixture is the wire-compatibility proof: the schema
// these migrations build equals the one the TypeScript SDK built.
func TestSQLiteSchemaMatchesFixture(t *testing.T) {
	dir := os.Getenv("CAIRNQ_FIXTURES_DIR")
	if dir == "" {
		t.Skip("CAIRNQ_FIXTURES_DIR is not set (CI sets it to ../shared/fixtures)")
	}
	fixture := copyFile(t, filepath.Join(fixturesDir(t, dir), "node-0.12.tasks.db"))
	theirs := openDB(t, fixture)
	ours := migratedDB(t)

	want, got := schema(t, theirs, false), schema(t, ours, false)
	if len(want) < 40 {
		t.Fatalf("fixture schema looks empty: %q", want)
	}
	if !slices.Equal(want, got) {
		t.Errorf("schema differs from the TypeScript SDK's:\n%s", diff(want, got))
	}
	if w, g := metaRows(t, theirs), metaRows(t, ours); fmt.Sprint(w) != fmt.Sprint(g) {
		t.Errorf("cairnq_meta = %v, fixture has %v", g, w)
	}

	// The ledger the TypeScript SDK wrote names exactly our migrations, so a
	// Go store opening this file re-applies nothing.
	var ledger, names []string
	for _, r := range query(t, theirs, "SELECT name FROM cairnq_migrations ORDER BY name") {
		ledger = append(ledger, r["name"].(string))
	}
	for _, m := range Migrations(SQLite) {
		names = append(names, m.Name)
	}
	if !slices.Equal(ledger, names) {
		t.Errorf("fixture ledger %q, our migrations %q", ledger, names)
	}

	// And the fixture's rows read back through our statements.
	set := Statements(SQLite)
	for _, name := range set.Names() {
		if _, _, err := theirs.Prepare(set.Get(name).SQL); err != nil {
			t.Errorf("%s does not prepare against the fixture: %v", name, err)
		}
	}
	stats := run(t, theirs, "stats", Args{"queue": "gpu"})
	if len(stats) != 1 || stats[0]["status"] != "running" || stats[0]["count"] != int64(1) {
		t.Errorf("fixture stats for gpu = %v", stats)
	}
}

func TestSQLitePlans(t *testing.T) {
	conn := migratedDB(t)
	seedRows(t, conn)
	exec(t, conn, "ANALYZE")

	explain := func(name string, args Args, specialize bool) string {
		st := Statements(SQLite).Get(name)
		if specialize {
			st = st.Specialize(args)
		}
		pos, err := st.Bind(args)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(plan(t, conn, st.SQL, pos...), "\n")
	}
	fullScan := func(p string) bool {
		for line := range strings.SplitSeq(p, "\n") {
			if line == "SCAN cairnq_tasks" || strings.HasPrefix(line, "SCAN cairnq_tasks ") {
				return true
			}
		}
		return false
	}
	listArgs := func(k, v string) Args {
		a := Args{"status": nil, "queue": nil, "name": nil, "root_id": nil, "correlation_id": nil, "limit": 10, "offset": 0}
		a[k] = v
		return a
	}
	purgeArgs := Args{"before_ms": 5000, "queue": "q1", "status": nil, "name": nil, "limit": 10}

	cases := []struct {
		name  string
		stmt  string
		args  Args
		index string // what the specialized plan must search
	}{
		{"purge by queue", "purge", purgeArgs, "SEARCH cairnq_tasks USING INDEX cairnq_tasks_queue_completed_idx (queue=?"},
		{"purge by status", "purge", Args{"before_ms": 5000, "queue": nil, "status": "failed", "name": nil, "limit": 10},
			"SEARCH cairnq_tasks USING INDEX cairnq_tasks_status_completed_idx (status=?"},
		{"stats by queue", "stats", Args{"queue": "q1"}, "SEARCH cairnq_tasks USING COVERING INDEX cairnq_tasks_claim_idx (queue=?)"},
		{"list by status", "list", listArgs("status", "failed"), "SEARCH cairnq_tasks USING INDEX cairnq_tasks_status_completed_idx (status=?)"},
		{"list by queue", "list", listArgs("queue", "q1"), "SEARCH cairnq_tasks USING INDEX cairnq_tasks_claim_idx (queue=?)"},
		{"list by name", "list", listArgs("name", "n1"), "SEARCH cairnq_tasks USING INDEX cairnq_tasks_name_idx (name=?)"},
		{"list by root", "list", listArgs("root_id", "task_0010"), "SEARCH cairnq_tasks USING INDEX cairnq_tasks_root_idx (root_id=?)"},
		{"list by correlation", "list", listArgs("correlation_id", "corr-1"), "SEARCH cairnq_tasks USING INDEX cairnq_tasks_correlation_idx (correlation_id=?)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			specialized := explain(c.stmt, c.args, true)
			if !strings.Contains(specialized, c.index) {
				t.Errorf("specialized plan does not use %q:\n%s", c.index, specialized)
			}
			if fullScan(specialized) {
				t.Errorf("specialized plan scans cairnq_tasks:\n%s", specialized)
			}
			// The same arguments through the unspecialized text miss the index:
			// this is what Specialize is for.
			general := explain(c.stmt, c.args, false)
			if strings.Contains(general, c.index) {
				t.Errorf("unspecialized plan already uses %q, so the test proves nothing:\n%s", c.index, general)
			}
		})
	}

	// Where there is no index to miss, the optional form scans outright.
	for _, c := range []struct {
		stmt string
		args Args
	}{
		{"stats", Args{"queue": "q1"}},
		{"list", listArgs("root_id", "task_0010")},
	} {
		if p := explain(c.stmt, c.args, false); !fullScan(p) {
			t.Errorf("unspecialized %s does not scan:\n%s", c.stmt, p)
		}
	}

	// The hot claim-path statements keep their indexes too.
	for _, c := range []struct {
		stmt  string
		args  Args
		index string
	}{
		{"recover_leases", Args{"now_ms": 5000, "lease_expired_error": "{}"}, "cairnq_tasks_lease_idx"},
		{"claim", Args{"queues": One("q1"), "names": nil, "now_ms": 5000, "worker_id": "w", "lease_until_ms": 9000, "limit": 1},
			"cairnq_tasks_claim_idx (queue=? AND status=?)"},
		{"claim", Args{"queues": `["q1","q2"]`, "names": One("n1"), "now_ms": 5000, "worker_id": "w", "lease_until_ms": 9000, "limit": 1},
			"cairnq_tasks_claim_name_idx (queue=? AND status=? AND name=?)"},
		{"claim", Args{"queues": One("q1"), "names": One("n1"), "now_ms": 5000, "worker_id": "w", "lease_until_ms": 9000, "limit": 1},
			"cairnq_tasks_claim_name_idx (queue=? AND status=? AND name=?)"},
		// The operators' reads (cairnq doctor) stay off full scans too.
		{"expired_leases", Args{"now_ms": 5000, "limit": 10}, "cairnq_tasks_lease_idx"},
		{"recent_failures", Args{"before_ms": 5000}, "cairnq_tasks_status_completed_idx (status=? AND completed_at_ms>?)"},
		// A workflow's advance reads its steps by root and claims its
		// record by id.
		{"workflow_steps", Args{"record_ids": `["task_0010"]`}, "sqlite_autoindex_cairnq_task_keys_1 (key>? AND key<?)"},
		// An advance from a settled step looks its keys up one by one.
		{"workflow_look", Args{"keys": `["a","b"]`}, "sqlite_autoindex_cairnq_task_keys_1 (key=?)"},
		{"claim_ids", Args{"ids": One("task_0010"), "worker_id": "w", "lease_until_ms": 9000, "now_ms": 5000}, "(id=?)"},
		// A durable handler's checkpoint finds its task by id.
		{"durable_step", Args{"id": "task_0010", "worker_id": "w", "attempt": 1, "position": 0, "entry": `{"name":"a"}`, "now_ms": 5000}, "(id=?)"},
		{"durable_event", Args{"id": "task_0010", "event": "go", "entry": `{"at_ms":1}`, "max_bytes": 1 << 24, "now_ms": 5000}, "(id=?)"},
		// A global limit counts the leased rows only.
		{"limit_running", Args{"name": "n1", "tenant_key": "tenant", "now_ms": 5000}, "cairnq_tasks_lease_idx"},
		// A sweep finds the due records in claim order, without a sort.
		{"workflow_due", Args{"name": "cairnq.workflow", "now_ms": 5000, "limit": 16},
			"cairnq_tasks_claim_name_idx (queue=? AND status=? AND name=? AND priority=? AND run_at_ms<?)"},
		// The SDK's purge as the protocol's, each task's workflow record
		// read by id; the ended workflows from a floor in the order they
		// ended, each one's steps by root.
		{"purge_from", Args{"before_ms": 5000, "queue": "q1", "status": nil, "name": nil, "limit": 10},
			"cairnq_tasks_queue_completed_idx (queue=? AND completed_at_ms>? AND completed_at_ms<?)"},
		{"purge_from", Args{"before_ms": 5000, "queue": "q1", "status": nil, "name": nil, "limit": 10},
			"SEARCH wf USING INDEX sqlite_autoindex_cairnq_tasks_1 (id=?)"},
		{"workflow_ended", Args{"name": "cairnq.workflow", "from_ms": 5000, "from_id": "", "limit": 16},
			"SEARCH rec USING INDEX cairnq_tasks_queue_completed_idx (queue=? AND completed_at_ms>?)"},
		{"workflow_ended", Args{"name": "cairnq.workflow", "from_ms": 5000, "from_id": "", "limit": 16},
			"SEARCH step USING INDEX cairnq_tasks_root_idx (root_id=?)"},
		{"workflow_ended_by_status", Args{"name": "cairnq.workflow", "status": "failed", "from_ms": 5000, "from_id": "", "limit": 16},
			"SEARCH rec USING INDEX cairnq_tasks_claim_name_idx (queue=? AND status=? AND name=? AND priority=? AND run_at_ms>?)"},
	} {
		if p := explain(c.stmt, c.args, true); !strings.Contains(p, c.index) || fullScan(p) {
			t.Errorf("%s does not use %s:\n%s", c.stmt, c.index, p)
		}
	}
	if p := explain("workflow_ended_by_status", Args{"name": "cairnq.workflow", "status": "failed", "from_ms": 5000, "from_id": "", "limit": 16}, true); strings.Contains(p, "TEMP B-TREE") {
		t.Errorf("workflow_ended_by_status sorts the records instead of reading them in the index's order:\n%s", p)
	}
	if p := explain("workflow_due", Args{"name": "cairnq.workflow", "now_ms": 5000, "limit": 16}, true); strings.Contains(p, "TEMP B-TREE") {
		t.Errorf("workflow_due sorts the due records instead of reading them in the index's order:\n%s", p)
	}
}

// TestSQLiteLifecycle runs every SQLite statement through the task lifecycle
// and checks what each one wrote.
func TestSQLiteLifecycle(t *testing.T) {
	conn := migratedDB(t)
	call := func(name string, args Args) []row { t.Helper(); return run(t, conn, name, args) }
	one := func(rows []row) row {
		t.Helper()
		if len(rows) != 1 {
			t.Fatalf("got %d rows, want 1: %v", len(rows), rows)
		}
		return rows[0]
	}
	expect := func(r row, want row) {
		t.Helper()
		for k, v := range want {
			if fmt.Sprint(r[k]) != fmt.Sprint(v) {
				t.Errorf("%s = %v, want %v (row %v)", k, r[k], v, r["id"])
			}
		}
	}
	none := func(rows []row) {
		t.Helper()
		if len(rows) != 0 {
			t.Errorf("got %v, want no rows", rows)
		}
	}
	insert := func(id, name string, priority int, parent, corr any, now int64) row {
		return one(call("insert_task", Args{
			"id": id, "name": name, "queue": "default", "payload": `{"n":1}`, "metadata": "{}",
			"max_attempts": 3, "priority": priority, "run_at_ms": now, "parent_id": parent,
			"root_id": "task_a", "correlation_id": corr, "now_ms": now,
		}))
	}
	// claimArgs draws from both queues for any name; oneQueue and oneName
	// narrow the draw to the default queue and the name render.
	claimArgs := func(now int64, worker string, narrow ...func(Args)) Args {
		a := Args{"now_ms": now, "worker_id": worker, "lease_until_ms": now + 1000, "limit": 5,
			"queues": `["default","other"]`, "names": nil}
		for _, f := range narrow {
			f(a)
		}
		return a
	}
	oneQueue := func(a Args) { a["queues"] = One("default") }
	oneName := func(a Args) { a["names"] = One("render") }
	const now = int64(1_000_000)
	nilv := any(nil)

	expect(one(call("protocol_version", Args{})), row{"value": "1"})

	a := insert("task_a", "render", 0, nil, "c1", now)
	expect(a, row{"status": "queued", "attempt": 0, "max_attempts": 3, "run_at_ms": now, "created_at_ms": now,
		"updated_at_ms": now, "metadata": "{}", "payload": `{"n":1}`, "root_id": "task_a", "worker_id": nilv})
	insert("task_b", "embed", 5, "task_a", nil, now)

	expect(one(call("lock_key", Args{"key": "k"})), row{"locked": 1})
	none(call("upsert_key", Args{"key": "k", "task_id": "task_a", "now_ms": now}))
	expect(one(call("get_key", Args{"key": "k"})), row{"task_id": "task_a"})
	expect(one(call("get_by_key", Args{"key": "k"})), row{"id": "task_a", "name": "render"})
	expect(one(call("get_status_by_key", Args{"key": "k"})), row{"id": "task_a", "status": "queued"})
	none(call("upsert_key", Args{"key": "k", "task_id": "task_b", "now_ms": now + 1}))
	expect(one(query(t, conn, "SELECT * FROM cairnq_task_keys")), row{"task_id": "task_b", "created_at_ms": now, "updated_at_ms": now + 1})
	none(call("get_key", Args{"key": "missing"}))

	expect(one(call("queue_depth", Args{"queue": "default", "max_depth": 10})), row{"headroom": 8})
	expect(one(call("queue_depth", Args{"queue": "default", "max_depth": 1})), row{"headroom": 0})
	expect(one(call("queue_depth", Args{"queue": "other", "max_depth": 10})), row{"headroom": 10})

	probe := func(queues, names any, at int64) any {
		return one(call("claimable_probe", Args{"queues": queues, "names": names, "now_ms": at}))["has_work"]
	}
	if probe(`["default"]`, nil, now) != int64(1) || probe(`["other"]`, nil, now) != int64(0) ||
		probe(`["default"]`, `["nope"]`, now) != int64(0) || probe(`["default"]`, nil, now-1) != int64(0) {
		t.Error("claimable_probe answers wrongly")
	}
	if one(call("claimable_probe", Args{"queues": `["default"]`, "names": nil, "now_ms": now}))["has_expired"] != int64(0) {
		t.Error("claimable_probe sees an expired lease where no task runs")
	}

	// A name filter beats priority; the single-queue form takes what is left.
	c := claimArgs(now+10, "w1")
	c["names"] = `["render"]`
	expect(one(call("claim", c)), row{"id": "task_a", "status": "running", "attempt": 1, "worker_id": "w1",
		"lease_until_ms": now + 1010, "updated_at_ms": now + 10})
	expect(one(call("claim", claimArgs(now+10, "w2", oneQueue))), row{"id": "task_b", "attempt": 1, "worker_id": "w2"})
	if probe(`["default"]`, nil, now+10) != int64(0) {
		t.Error("probe sees work with everything claimed")
	}

	none(call("heartbeat", Args{"id": "task_a", "worker_id": "w2", "now_ms": now + 20, "lease_until_ms": now + 2000}))
	expect(one(call("heartbeat", Args{"id": "task_a", "worker_id": "w1", "now_ms": now + 20, "lease_until_ms": now + 2000})),
		row{"lease_until_ms": now + 2000, "updated_at_ms": now + 20})
	beat := one(call("heartbeat_batch", Args{"ids": `["task_a","task_b"]`, "worker_id": "w1", "now_ms": now + 30, "lease_until_ms": now + 3000}))
	if len(beat) != 2 || beat["id"] != "task_a" || beat["cancel_requested_at_ms"] != nil {
		t.Errorf("heartbeat_batch = %v", beat)
	}

	expect(one(call("progress", Args{"id": "task_a", "worker_id": "w1", "now_ms": now + 40, "progress": 0.5, "message": nil})),
		row{"progress": 0.5, "message": nilv})
	expect(one(call("progress", Args{"id": "task_a", "worker_id": "w1", "now_ms": now + 41, "progress": nil, "message": "half"})),
		row{"progress": 0.5, "message": "half"})

	// Cancel a running task: it keeps running until its worker finishes, then
	// the cancel wins over the result.
	expect(one(call("cancel", Args{"id": "task_b", "now_ms": now + 50})),
		row{"status": "running", "cancel_requested_at_ms": now + 50, "completed_at_ms": nilv})
	expect(one(call("complete", Args{"id": "task_b", "worker_id": "w2", "now_ms": now + 55, "result": `{"r":1}`})),
		row{"status": "canceled", "result": nilv, "lease_until_ms": nilv, "completed_at_ms": now + 55, "worker_id": "w2"})

	// A retryable failure requeues with a delay and clears the attempt.
	expect(one(call("fail", Args{"id": "task_a", "worker_id": "w1", "now_ms": now + 60, "error": `{"code":"x"}`, "retryable": 1, "delay_ms": 500})),
		row{"status": "queued", "run_at_ms": now + 560, "worker_id": nilv, "lease_until_ms": nilv, "progress": nilv,
			"message": nilv, "completed_at_ms": nilv, "error": `{"code":"x"}`, "attempt": 1})
	none(call("claim", claimArgs(now+100, "w1", oneName)))
	expect(one(call("claim", claimArgs(now+560, "w1", oneName))), row{"id": "task_a", "attempt": 2})

	// Lease expiry: requeued while attempts remain, then failed.
	expect(one(call("recover_leases", Args{"now_ms": now + 5000, "lease_expired_error": `{"code":"lease_expired"}`})),
		row{"id": "task_a", "status": "queued", "worker_id": nilv, "run_at_ms": now + 5000, "error": `{"code":"x"}`, "completed_at_ms": nilv})
	expect(one(call("claim", claimArgs(now+5000, "w1", oneQueue, oneName))), row{"id": "task_a", "attempt": 3})
	none(call("recover_leases", Args{"now_ms": now + 5999, "lease_expired_error": `{}`}))
	expect(one(call("recover_leases", Args{"now_ms": now + 6000, "lease_expired_error": `{"code":"lease_expired"}`})),
		row{"status": "failed", "error": `{"code":"lease_expired"}`, "completed_at_ms": now + 6000, "worker_id": "w1", "lease_until_ms": nilv})

	// Manual retry, then a plain success.
	expect(one(call("retry", Args{"id": "task_a", "now_ms": now + 7000, "reset_attempt": 1})),
		row{"status": "queued", "attempt": 0, "error": nilv, "completed_at_ms": nilv, "run_at_ms": now + 7000, "worker_id": nilv})
	expect(one(call("claim", claimArgs(now+7000, "w3"))), row{"id": "task_a", "attempt": 1})
	expect(one(call("succeed", Args{"id": "task_a", "worker_id": "w3", "now_ms": now + 7100, "result": `{"ok":true}`, "message": nil})),
		row{"status": "succeeded", "result": `{"ok":true}`, "progress": 1.0, "lease_until_ms": nilv, "completed_at_ms": now + 7100, "worker_id": "w3"})
	none(call("succeed", Args{"id": "task_a", "worker_id": "w3", "now_ms": now + 7100, "result": `{}`, "message": nil}))
	none(call("cancel", Args{"id": "task_a", "now_ms": now + 7200}))
	none(call("retry", Args{"id": "task_a", "now_ms": now + 7200, "reset_attempt": 0}))

	// A queued task cancels at once.
	insert("task_c", "render", 0, nil, nil, now+8000)
	expect(one(call("cancel", Args{"id": "task_c", "now_ms": now + 8100})),
		row{"status": "canceled", "completed_at_ms": now + 8100, "cancel_requested_at_ms": nilv})

	ids := func(rows []row) string {
		var out []string
		for _, r := range rows {
			out = append(out, r["id"].(string))
		}
		return strings.Join(out, ",")
	}
	list := func(k string, v any, limit, offset int) string {
		a := Args{"status": nil, "queue": nil, "name": nil, "root_id": nil, "correlation_id": nil, "limit": limit, "offset": offset}
		if k != "" {
			a[k] = v
		}
		return ids(call("list", a))
	}
	for _, c := range []struct {
		k    string
		v    any
		want string
	}{
		{"", nil, "task_c,task_b,task_a"}, // created_at desc, then id desc
		{"status", "succeeded", "task_a"},
		{"queue", "other", ""},
		{"name", "render", "task_c,task_a"},
		{"root_id", "task_a", "task_c,task_b,task_a"},
		{"correlation_id", "c1", "task_a"},
	} {
		if got := list(c.k, c.v, 10, 0); got != c.want {
			t.Errorf("list %s=%v: %q, want %q", c.k, c.v, got, c.want)
		}
	}
	if got := list("", nil, 1, 1); got != "task_b" {
		t.Errorf("list page 2: %q", got)
	}

	statsText := func(q any) string {
		var out []string
		for _, r := range call("stats", Args{"queue": q}) {
			out = append(out, fmt.Sprintf("%v/%v=%v", r["queue"], r["status"], r["count"]))
		}
		return strings.Join(out, " ")
	}
	if got := statsText(nil); got != "default/canceled=2 default/succeeded=1" {
		t.Errorf("stats = %q", got)
	}
	if got := statsText("default"); got != "default/canceled=2 default/succeeded=1" {
		t.Errorf("stats default = %q", got)
	}
	if got := statsText("other"); got != "" {
		t.Errorf("stats other = %q", got)
	}
	expect(one(call("get", Args{"id": "task_a"})), row{"status": "succeeded"})
	expect(one(call("get_status", Args{"id": "task_c"})), row{"id": "task_c", "status": "canceled"})
	// Many at once: one row per task that exists, whatever the repeats.
	if got := sorted(strings.Split(ids(call("get_status_many", Args{"ids": `["task_c","nope","task_a","task_c"]`})), ",")); !slices.Equal(got, []string{"task_a", "task_c"}) {
		t.Errorf("get_status_many = %q", got)
	}
	none(call("get", Args{"id": "nope"}))

	// Retention: filtered and bounded, oldest first; the key goes with its task.
	purge := func(before int64, status any, limit int) string {
		return ids(call("purge", Args{"before_ms": before, "queue": "default", "status": status, "name": nil, "limit": limit}))
	}
	if got := purge(now+8100, nil, 1); got != "task_b" {
		t.Errorf("purge, oldest first = %q", got)
	}
	if got := purge(now+8100, nil, 10); got != "task_a" {
		t.Errorf("purge before cutoff = %q", got)
	}
	none(call("get_key", Args{"key": "k"}))
	if got := purge(now+9000, "succeeded", 10); got != "" {
		t.Errorf("purge succeeded = %q", got)
	}
	if got := purge(now+9000, "canceled", 1); got != "task_c" {
		t.Errorf("purge canceled = %q", got)
	}
	if n := one(query(t, conn, "SELECT count(*) AS n FROM cairnq_tasks"))["n"]; n != int64(0) {
		t.Errorf("%v rows left", n)
	}
}

// schema describes every cairnq object in conn, one fact per line: each
// table's normalized CREATE text, columns, foreign keys, and each index's
// normalized CREATE text, flags and key columns. sqlite_* tables and the
// ledger (the store's, not the migrations') are left out unless withLedger.
func schema(t testing.TB, conn *sqlite3.Conn, withLedger bool) []string {
	t.Helper()
	var out []string
	add := func(prefix string, rows []row, cols ...string) {
		for _, r := range rows {
			var parts []string
			for _, c := range cols {
				parts = append(parts, fmt.Sprintf("%s=%v", c, r[c]))
			}
			out = append(out, prefix+" "+strings.Join(parts, " "))
		}
	}
	tables := query(t, conn, `SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	for _, tb := range tables {
		name := tb["name"].(string)
		if name == "cairnq_migrations" && !withLedger {
			continue
		}
		out = append(out, "table "+name+" "+normalizeSQL(t, tb["sql"]))
		add("column "+name, query(t, conn, "SELECT * FROM pragma_table_xinfo(?1) ORDER BY cid", name),
			"cid", "name", "type", "notnull", "dflt_value", "pk", "hidden")
		add("fk "+name, query(t, conn, "SELECT * FROM pragma_foreign_key_list(?1) ORDER BY id, seq", name),
			"id", "seq", "table", "from", "to", "on_update", "on_delete", "match")
		for _, ix := range query(t, conn, "SELECT * FROM pragma_index_list(?1) ORDER BY name", name) {
			iname := ix["name"].(string)
			sql := one(t, query(t, conn, "SELECT sql FROM sqlite_schema WHERE name = ?1", iname))["sql"]
			out = append(out, fmt.Sprintf("index %s on=%s unique=%v origin=%v partial=%v %s",
				iname, name, ix["unique"], ix["origin"], ix["partial"], normalizeSQL(t, sql)))
			add("index-column "+iname, query(t, conn, "SELECT * FROM pragma_index_xinfo(?1) ORDER BY seqno", iname),
				"seqno", "cid", "name", "desc", "coll", "key")
		}
	}
	for _, tr := range query(t, conn, `SELECT name, sql FROM sqlite_schema WHERE type IN ('trigger', 'view') ORDER BY name`) {
		out = append(out, fmt.Sprintf("other %v %s", tr["name"], normalizeSQL(t, tr["sql"])))
	}
	return out
}

func one(t testing.TB, rows []row) row {
	t.Helper()
	if len(rows) != 1 {
		t.Fatalf("got %d rows, want 1", len(rows))
	}
	return rows[0]
}

// normalizeSQL reduces DDL text to its tokens, keywords and names lowercased,
// literals untouched, so formatting and keyword case do not count.
func normalizeSQL(t testing.TB, v any) string {
	t.Helper()
	src, _ := v.(string)
	if src == "" {
		return "<no sql>"
	}
	toks, err := lex(src, SQLite)
	if err != nil {
		t.Fatalf("%q: %v", src, err)
	}
	var parts []string
	for _, tk := range toks {
		text := src[tk.start:tk.end]
		switch tk.kind {
		case tokSpace, tokComment:
			continue
		case tokWord:
			text = strings.ToLower(text)
		}
		parts = append(parts, text)
	}
	return strings.Join(parts, " ")
}

func metaRows(t testing.TB, conn *sqlite3.Conn) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range query(t, conn, "SELECT key, value FROM cairnq_meta") {
		out[r["key"].(string)] = r["value"].(string)
	}
	return out
}

// fixturesDir resolves CAIRNQ_FIXTURES_DIR. CI gives it relative to the
// repository root, while go test runs in the package directory, so a relative
// path that does not exist here is tried from the module root too.
func fixturesDir(t testing.TB, dir string) string {
	t.Helper()
	if filepath.IsAbs(dir) {
		return dir
	}
	if _, err := os.Stat(dir); err == nil {
		return dir
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for root := wd; ; root = filepath.Dir(root) {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			return filepath.Join(root, dir)
		}
		if filepath.Dir(root) == root {
			return dir
		}
	}
}

func copyFile(t testing.TB, src string) string {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// diff lists the lines only in want (-) and only in got (+).
func diff(want, got []string) string {
	var b strings.Builder
	for _, l := range want {
		if !slices.Contains(got, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range got {
		if !slices.Contains(want, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

// A workflow's advance: its steps read narrowly (a step's child and a
// task of the record that is no step are not steps), its record claimed
// by id whatever its due time, and its definition written back while the
// record lives.
func TestSQLiteWorkflowStatements(t *testing.T) {
	conn := migratedDB(t)
	call := func(name string, args Args) []row { t.Helper(); return run(t, conn, name, args) }
	const now = int64(1_000_000)
	insert := func(id, parent, root, metadata string, runAt int64) {
		t.Helper()
		var p any
		if parent != "" {
			p = parent
		}
		call("insert_task", Args{
			"id": id, "name": "n", "queue": "default", "payload": `{}`, "metadata": metadata,
			"max_attempts": 3, "priority": 0, "run_at_ms": runAt, "parent_id": p,
			"root_id": root, "correlation_id": nil, "now_ms": now,
		})
	}
	step := func(name string) string { return `{"cairnq_workflow":{"v":1,"record":"wf","step":"` + name + `"}}` }
	insert("wf", "", "wf", `{}`, now+60_000) // the record, due in a minute
	insert("s1", "wf", "wf", step("extract"), now)
	insert("s2", "wf", "wf", step("load"), now)
	insert("child", "s1", "wf", step("extract"), now) // a step's own child
	insert("other", "wf", "wf", `{}`, now)            // a task of the record, no step
	insert("stranger", "wf", "wf", `{"cairnq_workflow":{"v":1,"record":"elsewhere","step":"x"}}`, now)
	// Steps are found through their keys (cairnq:workflow:<record>:<step>),
	// which every step is inserted with; the record's own key, and a key
	// of the range whose task is not the record's child, are no steps.
	for key, id := range map[string]string{
		"cairnq:workflow:wf:": "wf", "cairnq:workflow:wf:extract": "s1", "cairnq:workflow:wf:load": "s2",
		"cairnq:workflow:wf:inner": "child", "cairnq:workflow:elsewhere:x": "stranger",
	} {
		call("upsert_key", Args{"key": key, "task_id": id, "now_ms": now})
	}

	got := map[string]string{}
	for _, r := range call("workflow_steps", Args{"record_ids": `["wf"]`}) {
		got[fmt.Sprint(r["id"])] = fmt.Sprint(r["step"], " ", r["status"], " ", r["attempt"])
	}
	if want := map[string]string{"s1": "extract queued 0", "s2": "load queued 0"}; !maps.Equal(got, want) {
		t.Fatalf("workflow_steps = %v, want %v", got, want)
	}

	claim := func() []row {
		return call("claim_ids", Args{"ids": `["wf","nope"]`, "worker_id": "adv", "lease_until_ms": now + 1000, "now_ms": now})
	}
	claimed := claim()
	if len(claimed) != 1 || claimed[0]["id"] != "wf" || claimed[0]["status"] != "running" ||
		fmt.Sprint(claimed[0]["attempt"]) != "1" || claimed[0]["worker_id"] != "adv" {
		t.Fatalf("claim_ids = %v, want the record running for adv on attempt 1", claimed)
	}
	if at := fmt.Sprint(claimed[0]["run_at_ms"]); at != fmt.Sprint(now) {
		t.Fatalf("claim_ids of a record due in a minute left run_at_ms %s, want now (%d): it would end before it was due", at, now)
	}
	if again := claim(); len(again) != 0 {
		t.Fatalf("claim_ids of a running task = %v, want nothing", again)
	}

	revise := func() []row {
		return call("workflow_revise", Args{"id": "wf", "payload": `{"v":1,"seen":{"extract":"queued"}}`, "now_ms": now + 1})
	}
	if r := revise(); len(r) != 1 || r[0]["id"] != "wf" {
		t.Fatalf("workflow_revise of a running record = %v", r)
	}
	if p := call("get", Args{"id": "wf"})[0]["payload"]; p != `{"v":1,"seen":{"extract":"queued"}}` {
		t.Fatalf("payload after workflow_revise = %v", p)
	}
	call("complete", Args{"id": "wf", "worker_id": "adv", "now_ms": now + 2, "result": `{}`})
	if r := revise(); len(r) != 0 {
		t.Fatalf("workflow_revise of a finished record = %v, want nothing", r)
	}
}

// A durable handler's checkpoint: a step appended to the metadata
// member while the caller owns the task and the member holds exactly the
// steps it expects, the user's metadata and the member's other fields
// kept; nothing written for another worker, a lease past, or a position
// already taken (a retried write that had committed).
func TestSQLiteDurableStepStatement(t *testing.T) {
	conn := migratedDB(t)
	call := func(name string, args Args) []row { t.Helper(); return run(t, conn, name, args) }
	const now = int64(1_000_000)
	call("insert_task", Args{
		"id": "d1", "name": "n", "queue": "default", "payload": `{}`,
		"metadata":     `{"tenant":"a","cairnq_durable":{"v":1,"events":{"go":{"at_ms":5}}}}`,
		"max_attempts": 3, "priority": 0, "run_at_ms": now, "parent_id": nil,
		"root_id": "d1", "correlation_id": nil, "now_ms": now,
	})
	call("claim", Args{"queues": One("default"), "names": nil, "now_ms": now, "worker_id": "w", "lease_until_ms": now + 30_000, "limit": 1})
	step := func(worker string, position int, entry string, at int64) []row {
		return call("durable_step", Args{"id": "d1", "worker_id": worker, "attempt": 1, "position": position, "entry": entry, "now_ms": at})
	}
	if r := step("w", 0, `{"name":"charge","output":{"n":1}}`, now+1); len(r) != 1 || r[0]["id"] != "d1" {
		t.Fatalf("the first step = %v, want the task's id", r)
	}
	if r := step("w", 0, `{"name":"charge","output":{"n":1}}`, now+2); len(r) != 0 {
		t.Fatalf("the first step again = %v, want nothing: it is recorded", r)
	}
	if r := step("other", 1, `{"name":"ship"}`, now+2); len(r) != 0 {
		t.Fatalf("another worker's step = %v, want nothing", r)
	}
	if r := step("w", 1, `{"name":"ship"}`, now+30_000); len(r) != 0 {
		t.Fatalf("a step past the lease = %v, want nothing", r)
	}
	if r := call("durable_step", Args{"id": "d1", "worker_id": "w", "attempt": 2, "position": 1, "entry": `{"name":"ship"}`, "now_ms": now + 3}); len(r) != 0 {
		t.Fatalf("another attempt's step = %v, want nothing", r)
	}
	if r := step("w", 1, `{"name":"ship","output":null}`, now+3); len(r) != 1 {
		t.Fatalf("the second step = %v", r)
	}
	md := call("get", Args{"id": "d1"})[0]["metadata"]
	want := `{"tenant":"a","cairnq_durable":{"v":1,"events":{"go":{"at_ms":5}},"steps":[{"name":"charge","output":{"n":1}},{"name":"ship","output":null}]}}`
	if md != want {
		t.Fatalf("metadata = %v\nwant       %v", md, want)
	}
}

// durable_step leaves alone metadata it cannot append to: not an object,
// or a member that is not format 1's object with an array of steps.
func TestSQLiteDurableStepLeavesOtherShapesAlone(t *testing.T) {
	conn := migratedDB(t)
	call := func(name string, args Args) []row { t.Helper(); return run(t, conn, name, args) }
	const now = int64(1_000_000)
	for i, md := range []string{
		`[]`, `null`, `"s"`, `42`,
		`{"cairnq_durable":null}`, `{"cairnq_durable":"x"}`, `{"cairnq_durable":{"v":2}}`,
		`{"cairnq_durable":{"v":1,"steps":null}}`, `{"cairnq_durable":{"v":1,"steps":{}}}`,
	} {
		id := fmt.Sprint("d", i)
		call("insert_task", Args{
			"id": id, "name": "n", "queue": "q" + id, "payload": `{}`, "metadata": md,
			"max_attempts": 3, "priority": 0, "run_at_ms": now, "parent_id": nil,
			"root_id": id, "correlation_id": nil, "now_ms": now,
		})
		call("claim", Args{"queues": One("q" + id), "names": nil, "now_ms": now, "worker_id": "w", "lease_until_ms": now + 30_000, "limit": 1})
		if r := call("durable_step", Args{"id": id, "worker_id": "w", "attempt": 1, "position": 0, "entry": `{"name":"a"}`, "now_ms": now + 1}); len(r) != 0 {
			t.Errorf("metadata %s: durable_step = %v, want nothing", md, r)
		}
		if got := call("get", Args{"id": id})[0]["metadata"]; got != md {
			t.Errorf("metadata %s became %v", md, got)
		}
	}
}

// An event delivered to a durable handler's task: stored once per name,
// whatever the event's name holds; a queued task waiting for it made due
// now; a durable wait's snooze refused once the event is there; nothing
// for an ended task or metadata the member cannot be kept in.
func TestSQLiteDurableEventStatement(t *testing.T) {
	conn := migratedDB(t)
	call := func(name string, args Args) []row { t.Helper(); return run(t, conn, name, args) }
	const now = int64(1_000_000)
	insert := func(id, md string) {
		call("insert_task", Args{
			"id": id, "name": "n", "queue": "q" + id, "payload": `{}`, "metadata": md,
			"max_attempts": 3, "priority": 0, "run_at_ms": now, "parent_id": nil,
			"root_id": id, "correlation_id": nil, "now_ms": now,
		})
	}
	send := func(id, event, entry string, at int64) []row {
		return call("durable_event", Args{"id": id, "event": event, "entry": entry, "max_bytes": 1 << 24, "now_ms": at})
	}
	insert("e1", `{"tenant":"a"}`)
	if r := send("e1", "early. [0] $x", `{"payload":1,"at_ms":1}`, now); len(r) != 1 || r[0]["woke"] != int64(0) {
		t.Fatalf("an event before any wait = %v, want the row, not woken", r)
	}
	if r := send("e1", "early. [0] $x", `{"payload":2,"at_ms":2}`, now); len(r) != 0 {
		t.Fatalf("the same event again = %v, want nothing", r)
	}
	call("claim", Args{"queues": One("qe1"), "names": nil, "now_ms": now, "worker_id": "w", "lease_until_ms": now + 30_000, "limit": 1})
	if r := call("snooze", Args{"id": "e1", "worker_id": "w", "now_ms": now + 1, "delay_ms": 60_000, "event": "early. [0] $x"}); len(r) != 0 {
		t.Fatalf("a wait's snooze with its event there = %v, want nothing", r)
	}
	call("durable_step", Args{"id": "e1", "worker_id": "w", "attempt": 1, "position": 0,
		"entry": `{"name":"approval","kind":"wait","until_ms":9000000000000}`, "now_ms": now + 1})
	if r := call("snooze", Args{"id": "e1", "worker_id": "w", "now_ms": now + 2, "delay_ms": 3_600_000, "event": "approval"}); len(r) != 1 {
		t.Fatalf("a wait's snooze = %v, want the row", r)
	}
	if r := send("e1", "approval", `{"payload":{"ok":true},"at_ms":3}`, now+3); len(r) != 1 || r[0]["woke"] != int64(1) {
		t.Fatalf("the awaited event = %v, want the row, woken", r)
	}
	got := call("get", Args{"id": "e1"})[0]
	if got["run_at_ms"] != now+3 {
		t.Fatalf("run_at_ms = %v after the event, want %d", got["run_at_ms"], now+3)
	}
	want := `{"tenant":"a","cairnq_durable":{"v":1,"events":{"early. [0] $x":{"payload":1,"at_ms":1},"approval":{"payload":{"ok":true},"at_ms":3}},` +
		`"steps":[{"name":"approval","kind":"wait","until_ms":9000000000000}]}}`
	if got["metadata"] != want {
		t.Fatalf("metadata = %v\nwant       %v", got["metadata"], want)
	}
	// An event that would take the metadata past max_bytes is refused.
	if r := call("durable_event", Args{"id": "e1", "event": "big", "entry": `{"payload":"xxxxxxxxxx","at_ms":1}`, "max_bytes": 100, "now_ms": now}); len(r) != 0 {
		t.Fatalf("an event past max_bytes = %v, want nothing", r)
	}
	// An event after the end of a wait the task recorded is refused; the
	// timeout's mark is not.
	insert("e2", `{}`)
	call("claim", Args{"queues": One("qe2"), "names": nil, "now_ms": now, "worker_id": "w", "lease_until_ms": now + 30_000, "limit": 1})
	call("durable_step", Args{"id": "e2", "worker_id": "w", "attempt": 1, "position": 0,
		"entry": `{"name":"late","kind":"wait","until_ms":100}`, "now_ms": now + 1})
	if r := send("e2", "late", `{"payload":1,"at_ms":101}`, now+2); len(r) != 0 {
		t.Fatalf("an event after its wait's end = %v, want nothing", r)
	}
	if r := send("e2", "late", `{"payload":1,"at_ms":100}`, now+2); len(r) != 1 {
		t.Fatalf("an event at its wait's end = %v, want the row", r)
	}
	if r := send("e2", "other", `{"at_ms":500,"timed_out":true}`, now+2); len(r) != 1 {
		t.Fatalf("a timeout's mark = %v, want the row", r)
	}
	call("cancel", Args{"id": "e1", "now_ms": now + 4})
	if r := send("e1", "late", `{"at_ms":4}`, now+5); len(r) != 0 {
		t.Fatalf("an event to an ended task = %v, want nothing", r)
	}
	for i, md := range []string{`[]`, `{"cairnq_durable":"x"}`, `{"cairnq_durable":{"v":2}}`, `{"cairnq_durable":{"v":1,"events":[]}}`} {
		id := fmt.Sprint("odd", i)
		insert(id, md)
		if r := send(id, "x", `{"at_ms":1}`, now); len(r) != 0 {
			t.Errorf("metadata %s: durable_event = %v, want nothing", md, r)
		}
		if got := call("get", Args{"id": id})[0]["metadata"]; got != md {
			t.Errorf("metadata %s became %v", md, got)
		}
	}
}

// SQLite's insert_many and upsert_keys write what insert_task and
// upsert_key would, row by row, from one JSON array each.
func TestSQLiteInsertManyAndUpsertKeys(t *testing.T) {
	conn := migratedDB(t)
	const now = int64(1_000_000)
	run(t, conn, "insert_many", Args{"now_ms": now, "rows": `[` +
		`["t1","n","q","{\"a\":1}","{}",3,0,0,null,null,null],` +
		`["t2","n","q2","{}","{\"m\":true}",5,7,60000,"t1","t1","corr"]]`})
	run(t, conn, "upsert_keys", Args{"now_ms": now, "pairs": `[["k1","t1"],["k2","t2"]]`})
	run(t, conn, "upsert_keys", Args{"now_ms": now + 1, "pairs": `[["k1","t2"]]`})
	got := map[string]string{}
	for _, id := range []string{"t1", "t2"} {
		for _, r := range run(t, conn, "get", Args{"id": id}) {
			got[id] = fmt.Sprint(r["queue"], " ", r["status"], " ", r["payload"], " ", r["metadata"], " ",
				r["max_attempts"], " ", r["priority"], " ", r["run_at_ms"], " ", r["parent_id"], " ",
				r["correlation_id"], " ", r["created_at_ms"])
		}
	}
	want := map[string]string{
		"t1": `q queued {"a":1} {} 3 0 1000000 <nil> <nil> 1000000`,
		"t2": `q2 queued {} {"m":true} 5 7 1060000 t1 corr 1000000`,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("insert_many wrote %v\nwant %v", got, want)
	}
	keys := map[string]string{}
	for _, k := range []string{"k1", "k2"} {
		for _, r := range run(t, conn, "get_key", Args{"key": k}) {
			keys[k] = fmt.Sprint(r["task_id"])
		}
	}
	if want := map[string]string{"k1": "t2", "k2": "t2"}; !maps.Equal(keys, want) {
		t.Fatalf("upsert_keys pointed %v, want %v", keys, want)
	}
}
