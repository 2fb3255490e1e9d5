package cairnqpgx_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"testing"
	"time"

	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/testkit/adaptertest"
	"github.com/cairnq/cairnq-go/protocol"
)

// protocolArgs is a superset of every Postgres statement's parameters, in
// the Go types the store binds: strings (array literals for text[], JSON
// text for jsonb), int64, float64, bool and nil.
func protocolArgs() protocol.Args {
	return protocol.Args{
		"id": "t1", "task_id": "t1", "root_id": "t1", "parent_id": nil, "correlation_id": "c1",
		"name": "send", "queue": "default", "status": "queued", "key": "k1", "worker_id": "w1",
		"queues": `{"default","other"}`, "names": `{"send"}`, "ids": `{"t1","t2"}`, "worker_ids": `{"w1","w1"}`, "results": `{"{\"ok\": true}",NULL}`,
		"payload": `{"to":"a@b","n":1}`, "metadata": `{}`, "result": `{"ok":true}`,
		"error": `{"message":"boom"}`, "lease_expired_error": `{"message":"lease expired"}`,
		"limit": int64(10), "offset": int64(0), "lease_ms": int64(30_000), "delay_ms": int64(0),
		"older_than_ms": int64(1), "max_depth": int64(100), "max_attempts": int64(3), "priority": int64(0),
		"progress": 0.5, "message": "halfway", "retryable": true, "reset_attempt": false,
		// insert_many's parallel arrays: one more task, t2.
		"each_id": `{"t2"}`, "each_name": `{"send"}`, "each_queue": `{"default"}`, "each_payload": `{"{}"}`,
		"each_metadata": `{"{}"}`, "each_max_attempts": `{"3"}`, "each_priority": `{"-1"}`, "each_delay_ms": `{"0"}`,
		"each_parent_id": `{NULL}`, "each_root_id": `{"t2"}`, "each_correlation_id": `{NULL}`,
		// lock_keys, get_by_keys and upsert_keys: the keys of a batch.
		"keys": `{"k1"}`, "task_ids": `{"t1"}`,
		// claim_window and claimable_probe_window: a front.
		"floor_ms": int64(0), "floor_id": "", "from_ms": int64(0),
		// the probes: whether to look for an expired lease.
		"look_for_expired": true,
		// workflow_steps: workflows' records; workflow_ended and
		// workflow_ended_by_status: where the last look stopped.
		"record_ids": `{"t1"}`, "from_id": "",
		// limit_running and limit_pick: a tenant's metadata member, the
		// tenants at their limit.
		"tenant_key": "tenant", "full": `{"acme"}`,
		// durable_step: a step's record and where it goes.
		"entry": `{"name":"charge","output":{"n":1}}`, "position": int64(0), "attempt": int64(1),
		// snooze and durable_event: the event a durable wait waits for.
		"event": "approval", "max_bytes": int64(1 << 24),
		// workflow_finish: each record's definition (ids, results,
		// worker_ids and keys as above).
		"payloads": `{"{}","{}"}`,
		// durable_step_many: the steps of a group, one task's here.
		"attempts": `{"1"}`, "positions": `{"0"}`, "entries": `{"{\"name\":\"charge\"}"}`,
		// complete_steps: the succeeded key of each step it settles.
		"marked_ids": `{"t1"}`, "marked_keys": `{"cairnq:workflow-ledger:r1:a:succeeded"}`, "marked_records": `{"t1"}`,
		// queue_pause, meta_rows, queue_resume, meta_put and
		// meta_delete: a row of cairnq_meta.
		"value": `{"v":1,"queue":"default","at_ms":1,"by":"ops","reason":""}`, "prefix": "cairnq:paused:",
	}
}

// TestProtocolStatementsEveryExecMode applies the Postgres migrations with
// Exec and runs every protocol statement (and its fully specialized form)
// through Query, in each exec mode: the SQL the store will send must bind
// and run whatever mode the application's pool uses.
func TestProtocolStatementsEveryExecMode(t *testing.T) {
	t.Parallel()
	for _, mode := range execModes {
		t.Run(modeName(mode), func(t *testing.T) {
			t.Parallel()
			e, _ := newExecutor(t, &cairnqpgx.Options{ExecMode: mode})
			for _, m := range protocol.Migrations(protocol.Postgres) {
				if err := e.Exec(adaptertest.Ctx(t), m.SQL); err != nil {
					t.Fatalf("migration %s: %v", m.Name, err)
				}
			}
			args := protocolArgs()
			set := protocol.Statements(protocol.Postgres)

			runWith := func(st *protocol.Statement, args protocol.Args) []executor.Row {
				t.Helper()
				bound, err := st.Bind(args)
				if err != nil {
					t.Fatal(err)
				}
				var rows []executor.Row
				err = e.Tx(adaptertest.Ctx(t), func(ctx context.Context, s executor.Session) error {
					rows, err = s.Query(ctx, st.SQL, bound...)
					return err
				})
				if err != nil {
					t.Fatalf("%s: %v\n%s", st.Name, err, st.SQL)
				}
				return rows
			}
			run := func(st *protocol.Statement) []executor.Row { t.Helper(); return runWith(st, args) }

			// A task to act on, then every statement in name order.
			rows := run(set.Get("insert_task"))
			if len(rows) != 1 || rows[0]["id"] != "t1" || rows[0]["run_at_ms"] == nil {
				t.Fatalf("insert_task returned %#v", rows)
			}
			if p, ok := rows[0]["payload"].(json.RawMessage); !ok || !json.Valid(p) {
				t.Fatalf("payload = %#v, want the jsonb column's JSON text", rows[0]["payload"])
			}
			rows = run(set.Get("claim"))
			if len(rows) != 1 || rows[0]["status"] != "running" || rows[0]["attempt"] != int32(1) {
				t.Fatalf("claim returned %#v", rows)
			}
			// claim for one queue and one name: equalities on plain text.
			one := protocolArgs()
			one["queues"], one["names"] = protocol.One("default"), protocol.One("send")
			runWith(set.Get("claim").Specialize(one), one)
			for _, name := range set.Names() {
				if name == "insert_task" {
					continue // its id is taken now
				}
				st := set.Get(name)
				if name == "delete_task" { // of another task: the later statements act on t1
					other := protocolArgs()
					other["id"] = "t-other"
					runWith(st, other)
					continue
				}
				run(st)
				if sp := st.Specialize(args); sp != st {
					run(sp)
				}
			}
		})
	}
}

// A workflow's advance on Postgres, as TestSQLiteWorkflowStatements checks
// it on SQLite: its steps read narrowly, its record claimed by id
// whatever its due time, its definition written back while it lives.
func TestWorkflowStatements(t *testing.T) {
	t.Parallel()
	run := statementRunner(t)
	insert := func(id, parent, metadata string, delay int64) {
		t.Helper()
		var p any
		if parent != "" {
			p = parent
		}
		a := protocolArgs()
		a["id"], a["parent_id"], a["root_id"], a["metadata"], a["delay_ms"] = id, p, "wf", metadata, delay
		run("insert_task", a)
	}
	step := func(name string) string { return `{"cairnq_workflow":{"v":1,"record":"wf","step":"` + name + `"}}` }
	insert("wf", "", `{}`, 60_000) // the record, due in a minute
	insert("s1", "wf", step("extract"), 0)
	insert("s2", "wf", step("load"), 0)
	insert("child", "s1", step("extract"), 0) // a step's own child
	insert("other", "wf", `{}`, 0)            // a task of the record, no step
	insert("stranger", "wf", `{"cairnq_workflow":{"v":1,"record":"elsewhere","step":"x"}}`, 0)

	got := map[string]string{}
	for _, r := range run("workflow_steps", protocol.Args{"record_ids": `{"wf"}`}) {
		got[fmt.Sprint(r["id"])] = fmt.Sprint(r["step"], " ", r["status"], " ", r["attempt"])
	}
	if want := map[string]string{"s1": "extract queued 0", "s2": "load queued 0"}; !maps.Equal(got, want) {
		t.Fatalf("workflow_steps = %v, want %v", got, want)
	}

	claim := func() []executor.Row {
		return run("claim_ids", protocol.Args{"ids": `{"wf","nope"}`, "worker_id": "adv", "lease_ms": int64(30_000)})
	}
	claimed := claim()
	if len(claimed) != 1 || claimed[0]["id"] != "wf" || claimed[0]["status"] != "running" ||
		fmt.Sprint(claimed[0]["attempt"]) != "1" || claimed[0]["worker_id"] != "adv" {
		t.Fatalf("claim_ids = %v, want the record running for adv on attempt 1", claimed)
	}
	if again := claim(); len(again) != 0 {
		t.Fatalf("claim_ids of a running task = %v, want nothing", again)
	}

	revise := func() []executor.Row {
		return run("workflow_revise", protocol.Args{"id": "wf", "payload": `{"v":1,"seen":{"extract":"queued"}}`})
	}
	if r := revise(); len(r) != 1 || r[0]["id"] != "wf" {
		t.Fatalf("workflow_revise of a running record = %v", r)
	}
	var payload map[string]any
	if err := json.Unmarshal(run("get", protocol.Args{"id": "wf"})[0]["payload"].(json.RawMessage), &payload); err != nil ||
		fmt.Sprint(payload["seen"]) != "map[extract:queued]" {
		t.Fatalf("payload after workflow_revise = %v (%v)", payload, err)
	}
	run("complete", protocol.Args{"id": "wf", "worker_id": "adv", "result": `{}`})
	if r := revise(); len(r) != 0 {
		t.Fatalf("workflow_revise of a finished record = %v, want nothing", r)
	}
}

// A durable handler's checkpoint on Postgres, as
// TestSQLiteDurableStepStatement checks it on SQLite: appended while the
// caller owns the task and the member holds the steps it expects, the
// rest of the metadata kept; nothing for another worker or a position
// already taken.
func TestDurableStepStatement(t *testing.T) {
	t.Parallel()
	run := statementRunner(t)
	a := protocolArgs()
	a["id"], a["root_id"], a["metadata"] = "d1", "d1", `{"tenant":"a","cairnq_durable":{"v":1,"events":{"go":{"at_ms":5}}}}`
	run("insert_task", a)
	run("claim", protocol.Args{"queues": `{"default"}`, "names": nil, "worker_id": "w", "lease_ms": int64(30_000), "limit": int64(1)})
	step := func(worker string, position int64, entry string) []executor.Row {
		return run("durable_step", protocol.Args{"id": "d1", "worker_id": worker, "attempt": int64(1), "position": position, "entry": entry})
	}
	if r := step("w", 0, `{"name":"charge","output":{"n":1}}`); len(r) != 1 || r[0]["id"] != "d1" {
		t.Fatalf("the first step = %v, want the task's id", r)
	}
	if r := step("w", 0, `{"name":"charge","output":{"n":1}}`); len(r) != 0 {
		t.Fatalf("the first step again = %v, want nothing: it is recorded", r)
	}
	if r := step("other", 1, `{"name":"ship"}`); len(r) != 0 {
		t.Fatalf("another worker's step = %v, want nothing", r)
	}
	if r := run("durable_step", protocol.Args{"id": "d1", "worker_id": "w", "attempt": int64(2), "position": int64(1), "entry": `{"name":"ship"}`}); len(r) != 0 {
		t.Fatalf("another attempt's step = %v, want nothing", r)
	}
	for i, md := range []string{`[]`, `null`, `{"cairnq_durable":null}`, `{"cairnq_durable":{"v":2}}`, `{"cairnq_durable":{"v":1,"steps":null}}`} {
		a := protocolArgs()
		id := fmt.Sprint("odd", i)
		a["id"], a["root_id"], a["metadata"], a["queue"] = id, id, md, "q-"+id
		run("insert_task", a)
		run("claim", protocol.Args{"queues": `{"q-` + id + `"}`, "names": nil, "worker_id": "w", "lease_ms": int64(30_000), "limit": int64(1)})
		if r := run("durable_step", protocol.Args{"id": id, "worker_id": "w", "attempt": int64(1), "position": int64(0), "entry": `{"name":"a"}`}); len(r) != 0 {
			t.Errorf("metadata %s: durable_step = %v, want nothing", md, r)
		}
	}
	// The grouped form: d1's step at the position it holds is appended,
	// one at a taken position and another attempt's are left out.
	b := protocolArgs()
	b["id"], b["root_id"], b["queue"] = "d2", "d2", "q-d2"
	run("insert_task", b)
	run("claim", protocol.Args{"queues": `{"q-d2"}`, "names": nil, "worker_id": "w", "lease_ms": int64(30_000), "limit": int64(1)})
	r := run("durable_step_many", protocol.Args{
		"ids": `{"d1","d2","odd0"}`, "worker_ids": `{"w","w","w"}`, "attempts": `{"1","1","2"}`, "positions": `{"1","1","0"}`,
		"entries": `{"{\"name\":\"ship\",\"output\":null}","{\"name\":\"x\"}","{\"name\":\"y\"}"}`,
	})
	if len(r) != 1 || r[0]["id"] != "d1" {
		t.Fatalf("durable_step_many = %v, want d1 alone", r)
	}
	var got, want any
	md := run("get", protocol.Args{"id": "d1"})[0]["metadata"]
	if err := json.Unmarshal(fmt.Appendf(nil, "%s", md), &got); err != nil {
		t.Fatalf("metadata %v: %v", md, err)
	}
	_ = json.Unmarshal([]byte(`{"tenant":"a","cairnq_durable":{"v":1,"events":{"go":{"at_ms":5}},"steps":[{"name":"charge","output":{"n":1}},{"name":"ship","output":null}]}}`), &want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("metadata = %v\nwant       %v", got, want)
	}
}

// statementRunner migrates a fresh database and returns a func that runs
// one protocol statement on it, specialized and bound to a, in a
// transaction of its own.
func statementRunner(t *testing.T) func(name string, a protocol.Args) []executor.Row {
	t.Helper()
	ctx := adaptertest.Ctx(t)
	e, _ := newExecutor(t, nil)
	for _, m := range protocol.Migrations(protocol.Postgres) {
		if err := e.Exec(ctx, m.SQL); err != nil {
			t.Fatalf("migration %s: %v", m.Name, err)
		}
	}
	set := protocol.Statements(protocol.Postgres)
	return func(name string, a protocol.Args) []executor.Row {
		t.Helper()
		st := set.Get(name).Specialize(a)
		bound, err := st.Bind(a)
		if err != nil {
			t.Fatal(err)
		}
		var rows []executor.Row
		err = e.Tx(ctx, func(ctx context.Context, s executor.Session) error {
			rows, err = s.Query(ctx, st.SQL, bound...)
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return rows
	}
}

// An event delivered to a durable handler's task on Postgres, as
// TestSQLiteDurableEventStatement checks it on SQLite: stored once per
// name; a queued task waiting for it made due now and announced on
// cairnq_queued; a durable wait's snooze refused once the event is there.
func TestDurableEventStatement(t *testing.T) {
	t.Parallel()
	run := statementRunner(t)
	a := protocolArgs()
	a["id"], a["root_id"], a["metadata"] = "e1", "e1", `{"tenant":"a"}`
	run("insert_task", a)
	send := func(id, event, entry string) []executor.Row {
		return run("durable_event", protocol.Args{"id": id, "event": event, "entry": entry, "max_bytes": int64(1 << 24)})
	}
	if r := send("e1", "early", `{"payload":1,"at_ms":1}`); len(r) != 1 || r[0]["woke"] != false {
		t.Fatalf("an event before any wait = %v, want the row, not woken", r)
	}
	if r := send("e1", "early", `{"payload":2,"at_ms":2}`); len(r) != 0 {
		t.Fatalf("the same event again = %v, want nothing", r)
	}
	run("claim", protocol.Args{"queues": `{"default"}`, "names": nil, "worker_id": "w", "lease_ms": int64(30_000), "limit": int64(1)})
	if r := run("snooze", protocol.Args{"id": "e1", "worker_id": "w", "delay_ms": int64(60_000), "event": "early"}); len(r) != 0 {
		t.Fatalf("a wait's snooze with its event there = %v, want nothing", r)
	}
	run("durable_step", protocol.Args{"id": "e1", "worker_id": "w", "attempt": int64(1), "position": int64(0),
		"entry": `{"name":"approval","kind":"wait","until_ms":9000000000000}`})
	if r := run("snooze", protocol.Args{"id": "e1", "worker_id": "w", "delay_ms": int64(3_600_000), "event": "approval"}); len(r) != 1 {
		t.Fatalf("a wait's snooze = %v, want the row", r)
	}
	if r := send("e1", "approval", `{"payload":{"ok":true},"at_ms":3}`); len(r) != 1 || r[0]["woke"] != true || r[0]["status"] != "queued" {
		t.Fatalf("the awaited event = %v, want the row, woken", r)
	}
	if got := run("get", protocol.Args{"id": "e1"})[0]; got["run_at_ms"].(int64) > time.Now().Add(time.Minute).UnixMilli() {
		t.Fatalf("run_at_ms = %v after the event, want now", got["run_at_ms"])
	}
	// An event after the end of a wait the task recorded is refused; the
	// timeout's mark is not.
	b := protocolArgs()
	b["id"], b["root_id"], b["queue"] = "e2", "e2", "q-e2"
	run("insert_task", b)
	run("claim", protocol.Args{"queues": `{"q-e2"}`, "names": nil, "worker_id": "w", "lease_ms": int64(30_000), "limit": int64(1)})
	run("durable_step", protocol.Args{"id": "e2", "worker_id": "w", "attempt": int64(1), "position": int64(0),
		"entry": `{"name":"late","kind":"wait","until_ms":100}`})
	if r := send("e2", "late", `{"payload":1,"at_ms":101}`); len(r) != 0 {
		t.Fatalf("an event after its wait's end = %v, want nothing", r)
	}
	if r := send("e2", "late", `{"payload":1,"at_ms":100}`); len(r) != 1 {
		t.Fatalf("an event at its wait's end = %v, want the row", r)
	}
	if r := send("e2", "other", `{"at_ms":500,"timed_out":true}`); len(r) != 1 {
		t.Fatalf("a timeout's mark = %v, want the row", r)
	}
	run("cancel", protocol.Args{"id": "e1"})
	if r := send("e1", "late", `{"at_ms":4}`); len(r) != 0 {
		t.Fatalf("an event to an ended task = %v, want nothing", r)
	}
	for i, md := range []string{`[]`, `{"cairnq_durable":"x"}`, `{"cairnq_durable":{"v":2}}`, `{"cairnq_durable":{"v":1,"events":[]}}`} {
		a := protocolArgs()
		id := fmt.Sprint("odd", i)
		a["id"], a["root_id"], a["metadata"] = id, id, md
		run("insert_task", a)
		if r := send(id, "x", `{"at_ms":1}`); len(r) != 0 {
			t.Errorf("metadata %s: durable_event = %v, want nothing", md, r)
		}
	}
}
