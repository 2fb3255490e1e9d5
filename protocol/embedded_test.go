package protocol

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// sqliteParams is every SQLite statement's parameter set, as the other SDKs
// bind it.
var sqliteParams = map[string][]string{
	"cancel":            {"id", "now_ms"},
	"claim":             {"queues", "names", "now_ms", "worker_id", "lease_until_ms", "limit"},
	"claimable_probe":   {"queues", "names", "now_ms"},
	"complete":          {"id", "worker_id", "now_ms", "result"},
	"fail":              {"id", "worker_id", "now_ms", "error", "retryable", "delay_ms"},
	"get":               {"id"},
	"get_by_key":        {"key"},
	"get_key":           {"key"},
	"get_status":        {"id"},
	"get_status_by_key": {"key"},
	"get_status_many":   {"ids"},
	"heartbeat":         {"id", "worker_id", "now_ms", "lease_until_ms"},
	"heartbeat_batch":   {"ids", "worker_id", "now_ms", "lease_until_ms"},
	"insert_task": {"id", "name", "queue", "payload", "metadata", "max_attempts", "priority",
		"run_at_ms", "parent_id", "root_id", "correlation_id", "now_ms"},
	"list":             {"status", "queue", "name", "root_id", "correlation_id", "limit", "offset"},
	"lock_key":         {},
	"progress":         {"id", "worker_id", "now_ms", "progress", "message"},
	"protocol_version": {},
	"purge":            {"before_ms", "queue", "status", "name", "limit"},
	"purge_from":       {"before_ms", "queue", "status", "name", "limit"},
	"queue_depth":      {"queue", "max_depth"},
	"recover_leases":   {"now_ms", "lease_expired_error"},
	"retry":            {"id", "now_ms", "reset_attempt"},
	"stats":            {"queue"},
	"succeed":          {"id", "worker_id", "now_ms", "result", "message"},
	"upsert_key":       {"key", "task_id", "now_ms"},
	"expired_leases":   {"now_ms", "limit"},
	"queue_ages":       {"now_ms"},
	"recent_failures":  {"before_ms"},
	"snooze":           {"id", "worker_id", "now_ms", "delay_ms", "event"},
	// A workflow's advance (issue 31): its record claimed by id, its
	// steps read, its definition written back.
	"claim_ids":       {"worker_id", "lease_until_ms", "now_ms", "ids"},
	"workflow_steps":  {"record_ids"},
	"workflow_revise": {"payload", "now_ms", "id"},
	"workflow_due":    {"name", "now_ms", "limit"},
	"workflow_look":   {"keys"},
	"workflow_touch":  {"now_ms", "key"},
	"workflow_forget": {"keys"},
	"workflow_finish": {"payload", "result", "worker_id", "now_ms", "id"},
	"workflow_heads":  {"keys"},
	// The sweep's looks over the ended workflows (issue 46).
	"workflow_ended":           {"name", "from_ms", "from_id", "limit"},
	"workflow_ended_by_status": {"name", "status", "from_ms", "from_id", "limit"},
	// A global limit's: the running count per tenant, the candidates.
	"limit_running": {"tenant_key", "now_ms", "name"},
	"limit_pick":    {"tenant_key", "queues", "name", "now_ms", "full", "limit"},
	// A durable handler's step checkpoint (issue 48).
	"durable_step": {"entry", "now_ms", "id", "worker_id", "attempt", "position"},
	// An event delivered to a durable handler's task.
	"durable_event": {"event", "entry", "max_bytes", "now_ms", "id"},
	// A queue paused for every Go worker (issue 50): rows of cairnq_meta.
	"queue_pause": {"key", "value"},
	"meta_rows":   {"prefix"},
	// A Go worker's beat (issue 50): its row of cairnq_meta.
	"meta_put":     {"key", "value"},
	"meta_delete":  {"key"},
	"queue_resume": {"key"},
	// A task deleted by an operator (issue 50).
	"delete_task":     {"id", "status"},
	"cancel_matching": {"id", "status", "now_ms"},
	"fail_recorded":   {"id", "worker_id", "now_ms", "error", "retryable", "delay_ms", "entry"},
}

// dialectDiff is the complete list of ways a statement's Postgres parameters
// may differ from its SQLite ones. SQLite takes absolute times from the SDK
// clock; Postgres reads its own clock and takes relative durations instead.
// Any difference not listed here is drift.
var dialectDiff = map[string]struct{ sqliteOnly, postgresOnly []string }{
	"cancel":          {sqliteOnly: []string{"now_ms"}},
	"cancel_matching": {sqliteOnly: []string{"now_ms"}},
	"fail_recorded":   {sqliteOnly: []string{"now_ms"}},
	"claim":           {[]string{"now_ms", "lease_until_ms"}, []string{"lease_ms"}},
	"claimable_probe": {[]string{"now_ms"}, []string{"look_for_expired"}}, // Postgres: a worker paces the look
	"complete":        {sqliteOnly: []string{"now_ms"}},
	"fail":            {sqliteOnly: []string{"now_ms"}}, // delay_ms is relative in both
	"heartbeat":       {[]string{"now_ms", "lease_until_ms"}, []string{"lease_ms"}},
	"heartbeat_batch": {[]string{"now_ms", "lease_until_ms"}, []string{"lease_ms"}},
	"insert_task":     {[]string{"now_ms", "run_at_ms"}, []string{"delay_ms"}},
	"lock_key":        {postgresOnly: []string{"key"}}, // SQLite's BEGIN IMMEDIATE already serializes
	"progress":        {sqliteOnly: []string{"now_ms"}},
	"purge":           {[]string{"before_ms"}, []string{"older_than_ms"}},
	"purge_from":      {[]string{"before_ms"}, []string{"from_ms", "older_than_ms"}},
	"recover_leases":  {sqliteOnly: []string{"now_ms"}},
	"retry":           {sqliteOnly: []string{"now_ms"}},
	"succeed":         {sqliteOnly: []string{"now_ms"}},
	"upsert_key":      {sqliteOnly: []string{"now_ms"}},
	"expired_leases":  {sqliteOnly: []string{"now_ms"}},
	"queue_ages":      {sqliteOnly: []string{"now_ms"}},
	"recent_failures": {[]string{"before_ms"}, []string{"older_than_ms"}},
	"snooze":          {sqliteOnly: []string{"now_ms"}}, // delay_ms is relative in both, as on fail
	"claim_ids":       {[]string{"now_ms", "lease_until_ms"}, []string{"lease_ms"}},
	"workflow_revise": {sqliteOnly: []string{"now_ms"}},
	"workflow_due":    {sqliteOnly: []string{"now_ms"}},
	"workflow_touch":  {sqliteOnly: []string{"now_ms"}},
	"workflow_finish": {[]string{"payload", "result", "worker_id", "now_ms", "id"}, []string{"ids", "payloads", "results", "worker_ids", "keys"}}, // one record on SQLite, a list on Postgres, which moves their keys too
	"limit_running":   {sqliteOnly: []string{"now_ms"}},
	"limit_pick":      {sqliteOnly: []string{"now_ms"}},
	"durable_step":    {sqliteOnly: []string{"now_ms"}},
	"durable_event":   {sqliteOnly: []string{"now_ms"}},
}

var allStatementNames = []string{
	"cancel", "claim", "claimable_probe", "complete", "fail", "get", "get_by_key", "get_key",
	"get_status", "get_status_by_key", "get_status_many", "heartbeat", "heartbeat_batch", "insert_task",
	"list", "lock_key", "progress", "protocol_version", "purge", "queue_depth",
	"recover_leases", "retry", "stats", "succeed", "upsert_key",
	"expired_leases", "queue_ages", "recent_failures", "snooze",
	"claim_ids", "workflow_steps", "workflow_revise", "workflow_due", "workflow_look", "workflow_touch", "workflow_forget", "workflow_finish", "workflow_heads", "workflow_ended",
	"workflow_ended_by_status", "limit_running", "limit_pick", "purge_from", "durable_step",
	"durable_event", "queue_pause", "meta_rows", "queue_resume", "meta_put", "meta_delete",
	"delete_task", "cancel_matching", "fail_recorded",
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func without(s, drop []string) []string {
	return slices.DeleteFunc(slices.Clone(s), func(p string) bool { return slices.Contains(drop, p) })
}

func TestEmbeddedStatementSets(t *testing.T) {
	want := sorted(append(slices.Clone(allStatementNames), "complete_many", "insert_many", "upsert_keys"))
	if got := Statements(SQLite).Names(); !slices.Equal(got, want) {
		t.Errorf("sqlite statements = %q\nwant %q", got, want)
	}
	wantPG := sorted(append(slices.Clone(allStatementNames), "installations", "complete_many", "insert_many", "lock_keys", "get_by_keys", "upsert_keys", "claim_window", "claimable_probe_window", "durable_step_many", "clock_ms", "task_json", "complete_steps"))
	if got := Statements(Postgres).Names(); !slices.Equal(got, wantPG) {
		t.Errorf("postgres statements = %q\nwant %q", got, wantPG)
	}
	// complete_many takes its group in each dialect's own list form: one
	// JSON array of [id, worker_id, result] triples on SQLite, parallel
	// text[] on Postgres.
	if got := sorted(Statements(SQLite).Get("complete_many").Params); !slices.Equal(got, []string{"done", "now_ms"}) {
		t.Errorf("sqlite complete_many params = %q", got)
	}
	// So do insert_many (a JSON array of rows on SQLite, a text[] per
	// column on Postgres) and upsert_keys (an array of [key, task_id]
	// pairs on SQLite, two parallel text[] on Postgres).
	if got := sorted(Statements(SQLite).Get("insert_many").Params); !slices.Equal(got, []string{"now_ms", "rows"}) {
		t.Errorf("sqlite insert_many params = %q", got)
	}
	if got := sorted(Statements(SQLite).Get("upsert_keys").Params); !slices.Equal(got, []string{"now_ms", "pairs"}) {
		t.Errorf("sqlite upsert_keys params = %q", got)
	}
	if Statements(SQLite).Get("installations") != nil {
		t.Error("installations is Postgres only")
	}
	if Statements(SQLite).Get("nope") != nil {
		t.Error("Get of an unknown name must be nil")
	}
	if Statements(SQLite) != Statements(SQLite) {
		t.Error("Statements must compile once")
	}
	for _, d := range []Dialect{SQLite, Postgres} {
		set := Statements(d)
		for _, n := range set.Names() {
			if st := set.Get(n); st.Name != n || st.Dialect != d {
				t.Errorf("%s/%s: Name, Dialect = %q, %q", d, n, st.Name, st.Dialect)
			}
		}
	}
}

func TestUnknownDialectPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"Statements": func() { Statements("oracle") },
		"Migrations": func() { Migrations("oracle") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s(unknown) did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestEmbeddedParams(t *testing.T) {
	if len(sqliteParams) != len(allStatementNames) {
		t.Fatalf("sqliteParams covers %d statements, want %d", len(sqliteParams), len(allStatementNames))
	}
	for _, name := range allStatementNames {
		lite := Statements(SQLite).Get(name)
		pg := Statements(Postgres).Get(name)
		if got, want := sorted(lite.Params), sorted(sqliteParams[name]); !slices.Equal(got, want) {
			t.Errorf("sqlite %s params = %q, want %q", name, got, want)
		}
		diff := dialectDiff[name]
		for _, p := range diff.sqliteOnly {
			if !slices.Contains(lite.Params, p) {
				t.Errorf("%s: allowed difference %q is not a sqlite param; stale table", name, p)
			}
		}
		wantPG := append(without(sqliteParams[name], diff.sqliteOnly), diff.postgresOnly...)
		if got := sorted(pg.Params); !slices.Equal(got, sorted(wantPG)) {
			t.Errorf("postgres %s params = %q, want %q", name, got, sorted(wantPG))
		}
		// Beyond the sets: the shared parameters appear in the same order.
		a, b := without(lite.Params, diff.sqliteOnly), without(pg.Params, diff.postgresOnly)
		if !slices.Equal(a, b) {
			t.Errorf("%s: shared params in different order: sqlite %q, postgres %q", name, a, b)
		}
	}
	if got := Statements(Postgres).Get("installations").Params; len(got) != 0 {
		t.Errorf("installations params = %q, want none", got)
	}
}

func TestEmbeddedOptionalFilters(t *testing.T) {
	want := map[string][]string{
		"list":  {"status", "queue", "name", "root_id", "correlation_id"},
		"purge": {"queue", "status", "name"},
		// The SDK's own purge, which keeps live workflows' tasks.
		"purge_from":      {"queue", "status", "name"},
		"delete_task":     {"status"},
		"cancel_matching": {"status"},
		"stats":           {"queue"},
	}
	for _, d := range []Dialect{SQLite, Postgres} {
		set := Statements(d)
		for _, name := range set.Names() {
			if got := set.Get(name).filterParams(false); !slices.Equal(got, want[name]) {
				t.Errorf("%s/%s optional filters = %q, want %q", d, name, got, want[name])
			}
		}
	}
}

func TestEmbeddedWrite(t *testing.T) {
	reads := []string{
		"claimable_probe", "claimable_probe_window", "get", "get_by_key", "get_key", "get_status", "get_status_by_key",
		"get_status_many", "installations", "list", "lock_key", "lock_keys", "get_by_keys", "protocol_version", "queue_depth", "stats",
		"expired_leases", "queue_ages", "recent_failures", "workflow_steps", "workflow_due", "workflow_look", "workflow_heads",
		"workflow_ended", "workflow_ended_by_status", "limit_running", "limit_pick", "clock_ms", "task_json",
		"meta_rows",
	}
	for _, d := range []Dialect{SQLite, Postgres} {
		set := Statements(d)
		for _, name := range set.Names() {
			if got, want := set.Get(name).Write, !slices.Contains(reads, name); got != want {
				t.Errorf("%s/%s Write = %v, want %v", d, name, got, want)
			}
		}
	}
}

// TestClaimSpecializations pins claim, specialized for One queue and/or One
// name, to the text the hand-written variants it replaced compiled to:
// claim with exactly those predicates turned into equalities, so it plans
// as they did. (Until the variants went, this compared against their
// files.) The parameters keep their numbers, so only the names differ.
func TestClaimSpecializations(t *testing.T) {
	type swap struct{ from, to string }
	queue := map[Dialect]swap{
		SQLite:   {"queue IN (SELECT value FROM json_each(:queues))", "queue = :queues"},
		Postgres: {"queue = ANY (:queues::text[])", "queue = :queues"},
	}
	name := map[Dialect]swap{
		SQLite:   {"(:names IS NULL OR name IN (SELECT value FROM json_each(:names)))", "name = :names"},
		Postgres: {"(:names::text[] IS NULL OR name = ANY (:names::text[]))", "name = :names"},
	}
	for _, d := range []Dialect{SQLite, Postgres} {
		claim := Statements(d).Get("claim")
		for _, c := range []struct {
			variant string
			args    Args
			swaps   []swap
		}{
			{"claim_one_queue", Args{"queues": One("q"), "names": nil}, []swap{queue[d]}},
			{"claim_one_name", Args{"queues": "list", "names": One("n")}, []swap{name[d]}},
			{"claim_one_queue_one_name", Args{"queues": One("q"), "names": One("n")}, []swap{queue[d], name[d]}},
		} {
			want := claim.src
			for _, s := range c.swaps {
				if strings.Count(want, s.from) != 1 {
					t.Fatalf("%s claim: predicate %q not found exactly once", d, s.from)
				}
				want = strings.Replace(want, s.from, s.to, 1)
			}
			variant, err := Compile(c.variant, want, d)
			if err != nil {
				t.Fatal(err)
			}
			if got := claim.Specialize(c.args); got.SQL != variant.SQL {
				t.Errorf("%s: claim specialized as %s:\n got  %s\n want %s", d, c.variant, got.SQL, variant.SQL)
			}
		}
	}
}

func TestEmbeddedListFilters(t *testing.T) {
	want := map[string][]string{
		"claim":           {"queues", "names"},
		"claimable_probe": {"queues", "names"},
		"get_by_keys":     {"keys"},
		// Postgres only: the claim and probe from a known front.
		"claim_window":           {"queues", "names"},
		"claimable_probe_window": {"queues", "names"},
		"get_status_many":        {"ids"},
		"heartbeat_batch":        {"ids"},
		"claim_ids":              {"ids"},
		"limit_pick":             {"queues"},
		"workflow_look":          {"keys"},
		"workflow_forget":        {"keys"},
		"workflow_heads":         {"keys"},
	}
	// Postgres's looks unnest their keys and look each up on its own
	// (see workflow_look's comment): no list filter there.
	unnested := map[Dialect][]string{Postgres: {"workflow_look", "workflow_heads"}}
	for _, d := range []Dialect{SQLite, Postgres} {
		set := Statements(d)
		for _, name := range set.Names() {
			w := want[name]
			if slices.Contains(unnested[d], name) {
				w = nil
			}
			if got := set.Get(name).filterParams(true); !slices.Equal(got, w) {
				t.Errorf("%s/%s list filters = %q, want %q", d, name, got, w)
			}
		}
	}
}

func TestMigrationNames(t *testing.T) {
	common := []string{
		"0001_init.sql", "0002_purge_index.sql", "0004_lease_index.sql",
		"0005_clear_terminal_lease.sql", "0006_claim_name_index.sql", "0007_purge_status_index.sql",
		"0008_claim_due_index.sql", "0009_purge_queue_index.sql", "0010_drop_status_index.sql",
	}
	want := map[Dialect][]string{
		SQLite:   common,
		Postgres: sorted(append(slices.Clone(common), "0003_notify.sql")),
	}
	for d, names := range want {
		ms := Migrations(d)
		var got []string
		for _, m := range ms {
			got = append(got, m.Name)
			if strings.TrimSpace(m.SQL) == "" {
				t.Errorf("%s/%s is empty", d, m.Name)
			}
			// Scripts carry no parameters and must tokenize cleanly.
			toks, err := lex(m.SQL, d)
			if err != nil {
				t.Errorf("%s/%s: %v", d, m.Name, err)
			}
			for _, tk := range toks {
				if tk.kind == tokParam || tk.kind == tokNative {
					t.Errorf("%s/%s: parameter %q in a migration", d, m.Name, m.SQL[tk.start:tk.end])
				}
			}
		}
		if !slices.Equal(got, names) {
			t.Errorf("%s migrations = %q\nwant %q", d, got, names)
		}
		ms[0].Name = "mutated"
		if Migrations(d)[0].Name == "mutated" {
			t.Errorf("%s: Migrations returns shared storage", d)
		}
	}
}

// SchemaVersion is what the newest migration of each dialect sets: the
// file number of the last migration, which writes it.
func TestSchemaVersionIsTheNewestMigration(t *testing.T) {
	for _, d := range []Dialect{SQLite, Postgres} {
		ms := Migrations(d)
		last := ms[len(ms)-1]
		n, err := strconv.Atoi(strings.SplitN(last.Name, "_", 2)[0])
		if err != nil {
			t.Fatalf("%s: migration %q has no number: %v", d, last.Name, err)
		}
		if n != SchemaVersion || !strings.Contains(last.SQL, fmt.Sprintf("'%d'", SchemaVersion)) {
			t.Errorf("%s: newest migration %s, SchemaVersion %d: they must agree", d, last.Name, SchemaVersion)
		}
	}
}

// complete_steps settles as complete_many does: its update is
// complete_many's statement to the letter (bar indentation), so that a
// change to one cannot leave the other behind.
func TestCompleteStepsUpdatesAsCompleteMany(t *testing.T) {
	read := func(name string) []string {
		b, err := files.ReadFile("sql/postgres/" + name + ".sql")
		if err != nil {
			t.Fatal(err)
		}
		var code []string
		for line := range strings.Lines(string(b)) {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "--") {
				code = append(code, line)
			}
		}
		return code
	}
	many := read("complete_many")
	many[len(many)-1] = strings.TrimSuffix(many[len(many)-1], ";")
	steps := read("complete_steps")
	at := slices.Index(steps, many[0])
	if at < 0 || at+len(many) > len(steps) || !slices.Equal(steps[at:at+len(many)], many) {
		t.Fatalf("complete_steps does not hold complete_many's update:\n%s", strings.Join(many, "\n"))
	}
}
