package cairnqpgx_test

import (
	"context"
	"encoding/json"
	"testing"

	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/adaptertest"
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
				run(st)
				if sp := st.Specialize(args); sp != st {
					run(sp)
				}
			}
		})
	}
}
