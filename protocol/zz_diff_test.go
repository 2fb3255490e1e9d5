package protocol

import (
	"github.com/ncruces/go-sqlite3"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestZZSQLiteDifferential(t *testing.T) {
	refSet := map[string]*Statement{}
	for _, n := range Statements(SQLite).Names() {
		b, err := os.ReadFile(filepath.Join("/tmp/ref/cairnq-protocol/sql/sqlite", n+".sql"))
		if err != nil { t.Fatal(err) }
		st, err := Compile(n, string(b), SQLite)
		if err != nil { t.Fatal(err) }
		refSet[n] = st
	}
	mine := migratedDB(t)
	ref := openDB(t, filepath.Join(t.TempDir(), "ref.db"))
	ms, _ := filepath.Glob("/tmp/ref/cairnq-protocol/migrations/sqlite/*.sql")
	slices.Sort(ms)
	for _, m := range ms { b, _ := os.ReadFile(m); exec(t, ref, string(b)) }
	exec(t, ref, "PRAGMA foreign_keys = ON")

	names := Statements(SQLite).Names()
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(xs ...any) any { return xs[r.IntN(len(xs))] }
	now := int64(1000)
	counts := map[string]int{}
	nonEmpty := map[string]int{}
	for step := 0; step < 20000; step++ {
		now += int64(r.IntN(300))
		id := fmt.Sprintf("t%d", r.IntN(12))
		args := Args{
			"id": id, "name": pick("a", "b"), "queue": pick("q0", "q1", nil), "payload": `{"p":1}`, "metadata": pick("{}", `{"m":2}`),
			"max_attempts": r.IntN(4) + 1, "priority": r.IntN(3), "run_at_ms": now + int64(pick(0, 0, 500).(int)),
			"parent_id": pick(nil, "t1"), "root_id": id, "correlation_id": pick(nil, "c1", "c2"), "now_ms": now,
			"queues": pick(`["q0"]`, `["q0","q1"]`, `[]`), "names": pick(nil, `["a"]`, `["a","b"]`, `[]`),
			"worker_id": pick("w0", "w1"), "lease_until_ms": now + int64(r.IntN(2000)), "limit": r.IntN(4),
			"result": pick(nil, `{"r":1}`), "error": `{"e":1}`, "retryable": r.IntN(2), "delay_ms": r.IntN(1000),
			"ids": pick(`["t1","t2","t3"]`, `[]`, `["t0"]`), "progress": pick(nil, 0.25, 0.75), "message": pick(nil, "m1", "m2"),
			"status": pick(nil, nil, "queued", "running", "succeeded", "failed", "canceled"),
			"root_id_filter": nil, "offset": r.IntN(3), "before_ms": now - int64(r.IntN(3000)), "max_depth": r.IntN(5),
			"lease_expired_error": `{"x":"lease"}`, "reset_attempt": r.IntN(2), "key": pick("k0", "k1"), "task_id": fmt.Sprintf("t%d", r.IntN(12)),
		}
		if r.IntN(3) == 0 { args["root_id"] = nil }
		if r.IntN(2) == 0 { args["queue"] = pick("q0", "q1") }
		n := names[r.IntN(len(names))]
		if n == StmtInsertTask && args["queue"] == nil { args["queue"] = "q0" }
		if n == StmtInsertTask && args["root_id"] == nil { args["root_id"] = id }
		res := func(conn any, st *Statement) string {
			sp := st.Specialize(args)
			pos, err := sp.Bind(args)
			if err != nil { t.Fatal(err) }
			rows, err := tryQuery(conn.(*sqlite3.Conn), sp.SQL, pos...)
			if err != nil { return "ERR " + strings.SplitN(err.Error(), ":", 2)[0] }
			var out []string
			for _, rw := range rows {
				var keys []string
				for k := range rw { keys = append(keys, k) }
				slices.Sort(keys)
				var parts []string
				for _, k := range keys { parts = append(parts, fmt.Sprintf("%s=%v", k, rw[k])) }
				out = append(out, strings.Join(parts, ","))
			}
			return strings.Join(out, "\n")
		}
		a, b := res(mine, Statements(SQLite).Get(n)), res(ref, refSet[n])
		counts[n]++
		if a != "" && !strings.HasPrefix(a, "ERR") { nonEmpty[n]++ }
		if a != b {
			t.Fatalf("step %d %s args %v\nmine: %s\nref:  %s", step, n, args, a, b)
		}
	}
	dump := func(c *sqlite3.Conn) string { return fmt.Sprint(query(t, c, "SELECT * FROM cairnq_tasks ORDER BY id"), query(t, c, "SELECT * FROM cairnq_task_keys ORDER BY key")) }
	if dump(mine) != dump(ref) { t.Fatal("final state differs") }
	t.Logf("counts %v\nnon-empty %v", counts, nonEmpty)
}
