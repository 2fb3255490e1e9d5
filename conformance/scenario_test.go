package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeTarget is a stand-in implementation for testing the interpreter alone.
//
//	echo   -> returns its args
//	value  -> returns args["v"]
//	int    -> returns a Go int (the interpreter must normalize it)
//	raise  -> fails with namedError{args["name"], args["task_id"]}
//	plain  -> fails with an error that has no name and no TaskID
type fakeTarget struct {
	ops []string
}

type namedError struct{ name, taskID string }

func (e *namedError) Error() string  { return "fake " + e.name }
func (e *namedError) TaskID() string { return e.taskID }

func (f *fakeTarget) Do(_ context.Context, op string, args map[string]any) (any, error) {
	f.ops = append(f.ops, op)
	switch op {
	case "echo":
		return args, nil
	case "value":
		return args["v"], nil
	case "int":
		return map[string]any{"n": 7, "list": []int{1, 2}}, nil
	case "raise":
		name, _ := args["name"].(string)
		id, _ := args["task_id"].(string)
		return nil, fmt.Errorf("wrapped: %w", &namedError{name, id})
	case "plain":
		return nil, errors.New("plain failure")
	default:
		return nil, fmt.Errorf("unknown op %q", op)
	}
}

func (f *fakeTarget) ErrorName(err error) string {
	var ne *namedError
	if errors.As(err, &ne) {
		return ne.name
	}
	return ""
}

// runJSON parses a scenario and runs it against a fresh fake.
func runJSON(t *testing.T, src string) error {
	t.Helper()
	s, err := ParseScenario([]byte(src))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, src)
	}
	return RunE(context.Background(), &fakeTarget{}, s)
}

// scenario wraps steps (a JSON array body) into a scenario document.
func scenario(steps string) string {
	return `{"name": "t", "description": "d", "steps": [` + steps + `]}`
}

const saveNested = `{"op": "echo", "args": {"id": "x1", "obj": {"deep": [10, {"k": "v"}]}, "list": [{"id": "a"}, {"id": "b"}]}, "save": "e"},`

func TestInterpReferences(t *testing.T) {
	pass := map[string]string{
		"whole alias": saveNested + `{"op": "echo", "args": {"copy": "$e"}, "save": "c"},
			{"op": "expect", "target": "$c.copy.id", "equalsRef": "x1"}`,
		"nested field and array index": saveNested + `{"op": "expect", "target": "$e.obj.deep.1.k", "equalsRef": "v"},
			{"op": "expect", "target": "$e.list.1.id", "equalsRef": "b"}`,
		"references inside args arrays and objects": saveNested + `{"op": "echo", "args": {"ids": ["$e.list.0.id", {"x": "$e.id"}]}, "save": "r"},
			{"op": "expect", "target": "$r.ids", "equalsRef": ["a", {"x": "x1"}]}`,
		"references inside expectations":            saveNested + `{"op": "echo", "args": {"who": "$e.id", "n": 3}, "expect": {"equals": {"who": "$e.id", "n": 3}}}`,
		"reference to a list element inside equals": saveNested + `{"op": "expect", "target": "$e", "equals": {"list": [{"id": "$e.list.0.id"}, {"id": "b"}]}}`,
		"missing field reads as null": saveNested + `{"op": "expect", "target": "$e.nope", "equalsRef": null},
			{"op": "expect", "target": "$e.list.9", "equalsRef": null}`,
		"fields of null are null": `{"op": "value", "args": {"v": null}, "save": "n"},
			{"op": "expect", "target": "$n.id.more", "equalsRef": null},
			{"op": "expect", "target": "$n", "isNull": ["id", "status"]}`,
		"numbers from the target are normalized": `{"op": "int", "save": "i", "expect": {"equals": {"n": 7, "list": [1, 2]}}}`,
	}
	for name, steps := range pass {
		t.Run(name, func(t *testing.T) {
			if err := runJSON(t, scenario(steps)); err != nil {
				t.Fatalf("want pass, got %v", err)
			}
		})
	}

	fail := map[string]struct{ steps, msg string }{
		"missing alias in args":        {`{"op": "echo", "args": {"id": "$ghost.id"}}`, `nothing was saved as "ghost"`},
		"missing alias in target":      {`{"op": "expect", "target": "$ghost", "isNull": ["x"]}`, `nothing was saved as "ghost"`},
		"missing alias in expectation": {saveNested + `{"op": "expect", "target": "$e.id", "equalsRef": "$ghost"}`, `nothing was saved as "ghost"`},
		"non-numeric index":            {saveNested + `{"op": "expect", "target": "$e.list.first", "isNull": ["id"]}`, "not an array index"},
		"field of a string":            {saveNested + `{"op": "expect", "target": "$e.id.length", "isNull": ["x"]}`, "cannot read field"},
	}
	for name, c := range fail {
		t.Run(name, func(t *testing.T) {
			err := runJSON(t, scenario(c.steps))
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("want error containing %q, got %v", c.msg, err)
			}
		})
	}
}

func TestInterpAssertions(t *testing.T) {
	const task = `{"op": "echo", "args": {"id": "t1", "status": "queued", "attempt": 0, "lease": 100, "payload": {"a": [1, {"b": null}]}, "none": null}, "save": "t"},
		{"op": "echo", "args": {"items": [1, 2, 3]}, "save": "l"},
		{"op": "value", "args": {"v": 250}, "save": "later"},`
	cases := []struct {
		name, step string
		pass       bool
	}{
		{"equals subset", `{"op": "expect", "target": "$t", "equals": {"status": "queued", "attempt": 0}}`, true},
		{"equals deep value", `{"op": "expect", "target": "$t", "equals": {"payload": {"a": [1, {"b": null}]}}}`, true},
		{"equals deep value differs", `{"op": "expect", "target": "$t", "equals": {"payload": {"a": [1, {"b": 2}]}}}`, false},
		{"equals nested is not a subset match", `{"op": "expect", "target": "$t", "equals": {"payload": {}}}`, false},
		{"equals wrong value", `{"op": "expect", "target": "$t", "equals": {"status": "running"}}`, false},
		{"equals number vs string", `{"op": "expect", "target": "$t", "equals": {"attempt": "0"}}`, false},
		{"equals null on a missing field", `{"op": "expect", "target": "$t", "equals": {"absent": null}}`, true},
		{"equals on the step result", `{"op": "echo", "args": {"x": 1}, "expect": {"equals": {"x": 1}}}`, true},
		{"equals on the step result fails", `{"op": "echo", "args": {"x": 1}, "expect": {"equals": {"x": 2}}}`, false},
		{"equalsRef", `{"op": "expect", "target": "$t.id", "equalsRef": "t1"}`, true},
		{"equalsRef differs", `{"op": "expect", "target": "$t.id", "equalsRef": "t2"}`, false},
		{"equalsRef null", `{"op": "expect", "target": "$t.none", "equalsRef": null}`, true},
		{"equalsRef null differs", `{"op": "expect", "target": "$t.id", "equalsRef": null}`, false},
		{"notEqualsRef", `{"op": "expect", "target": "$t.id", "notEqualsRef": "$t.status"}`, true},
		{"notEqualsRef same", `{"op": "expect", "target": "$t.id", "notEqualsRef": "t1"}`, false},
		{"greaterThanRef", `{"op": "expect", "target": "$later", "greaterThanRef": "$t.lease"}`, true},
		{"greaterThanRef equal", `{"op": "expect", "target": "$t.lease", "greaterThanRef": 100}`, false},
		{"greaterThanRef smaller", `{"op": "expect", "target": "$t.lease", "greaterThanRef": "$later"}`, false},
		{"greaterThanRef on a non-number", `{"op": "expect", "target": "$t.id", "greaterThanRef": 1}`, false},
		{"greaterThanRef on null", `{"op": "expect", "target": "$t.none", "greaterThanRef": 1}`, false},
		{"length", `{"op": "expect", "target": "$l.items", "length": 3}`, true},
		{"length differs", `{"op": "expect", "target": "$l.items", "length": 2}`, false},
		{"length of a non-array", `{"op": "expect", "target": "$t", "length": 0}`, false},
		{"length of null", `{"op": "expect", "target": "$t.none", "length": 0}`, false},
		{"notNull", `{"op": "expect", "target": "$t", "notNull": ["id", "attempt", "payload"]}`, true},
		{"notNull on null", `{"op": "expect", "target": "$t", "notNull": ["id", "none"]}`, false},
		{"notNull on missing", `{"op": "expect", "target": "$t", "notNull": ["absent"]}`, false},
		{"isNull", `{"op": "expect", "target": "$t", "isNull": ["none", "absent"]}`, true},
		{"isNull on a value", `{"op": "expect", "target": "$t", "isNull": ["attempt"]}`, false},
		{"isNull on an array index", `{"op": "expect", "target": "$l.items", "isNull": ["3"], "notNull": ["0"]}`, true},
		{"all assertions must hold", `{"op": "expect", "target": "$t", "equals": {"status": "queued"}, "isNull": ["id"]}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := runJSON(t, scenario(task+c.step))
			if c.pass && err != nil {
				t.Fatalf("want pass, got %v", err)
			}
			if !c.pass && err == nil {
				t.Fatal("want failure, got pass")
			}
		})
	}
}

func TestInterpExpectError(t *testing.T) {
	cases := []struct {
		name, steps string
		errPart     string // "" means the scenario passes
	}{
		{"matching name, saved with task id",
			`{"op": "raise", "args": {"name": "TaskTimeout", "task_id": "task_1"}, "expectError": "TaskTimeout", "save": "err"},
			 {"op": "expect", "target": "$err", "equals": {"task_id": "task_1", "type": "TaskTimeout"}}`, ""},
		{"wrong name",
			`{"op": "raise", "args": {"name": "LostLease"}, "expectError": "AlreadyExists"}`, `expected error AlreadyExists, got "LostLease"`},
		{"unnamed error",
			`{"op": "plain", "expectError": "AlreadyExists"}`, `expected error AlreadyExists, got ""`},
		{"success where an error was expected",
			`{"op": "echo", "args": {"a": 1}, "expectError": "AlreadyExists"}`, "expected error AlreadyExists, got success"},
		{"unexpected error fails the step",
			`{"op": "raise", "args": {"name": "LostLease"}}`, "fake LostLease"},
		{"unknown op is the target's error",
			`{"op": "frobnicate"}`, `unknown op "frobnicate"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := runJSON(t, scenario(c.steps))
			switch {
			case c.errPart == "" && err != nil:
				t.Fatalf("want pass, got %v", err)
			case c.errPart != "" && (err == nil || !strings.Contains(err.Error(), c.errPart)):
				t.Fatalf("want error containing %q, got %v", c.errPart, err)
			}
		})
	}

	t.Run("saved task_id is null without a TaskID method", func(t *testing.T) {
		target := &noIDTarget{}
		s, err := ParseScenario([]byte(scenario(
			`{"op": "anything", "expectError": "Boom", "save": "e"},
			 {"op": "expect", "target": "$e", "equals": {"task_id": null, "type": "Boom"}}`)))
		if err != nil {
			t.Fatal(err)
		}
		if err := RunE(context.Background(), target, s); err != nil {
			t.Fatalf("want pass, got %v", err)
		}
	})
}

// noIDTarget fails every op with an error it names "Boom" but that carries no task id.
type noIDTarget struct{}

func (noIDTarget) Do(context.Context, string, map[string]any) (any, error) {
	return nil, errors.New("boom")
}
func (noIDTarget) ErrorName(error) string { return "Boom" }

func TestInterpStepErrorReport(t *testing.T) {
	err := runJSON(t, scenario(`{"op": "echo", "args": {"x": 1}, "save": "a"},
		{"op": "echo", "args": {"y": "$a.x"}, "expect": {"equals": {"y": 2}}}`))
	var se *StepError
	if !errors.As(err, &se) {
		t.Fatalf("want *StepError, got %T %v", err, err)
	}
	if se.Scenario != "t" || se.Index != 1 || se.Op != "echo" || se.Args["y"] != 1.0 {
		t.Fatalf("unexpected report %+v", se)
	}
	for _, part := range []string{`scenario "t"`, "steps[1]", `op "echo"`, `{"y":1}`, "field y is 1, want 2"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("message %q lacks %q", err.Error(), part)
		}
	}
}

func TestInterpRunFailsTB(t *testing.T) {
	s, err := ParseScenario([]byte(scenario(`{"op": "value", "args": {"v": 1}, "expect": {"equalsRef": 1}},
		{"op": "value", "args": {"v": 1}, "expect": {"equalsRef": 2}}`)))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordTB{TB: t}
	func() {
		defer func() { _ = recover() }()
		Run(rec, context.Background(), &fakeTarget{}, s)
	}()
	if !rec.failed || !strings.Contains(rec.msg, "steps[1]") {
		t.Fatalf("Run should have failed on steps[1], got failed=%v msg=%q", rec.failed, rec.msg)
	}
	Run(t, context.Background(), &fakeTarget{}, Scenario{Name: "ok", Steps: []Step{{Op: "value", Args: map[string]any{"v": 3}, Expect: &Assertions{EqualsRef: Operand{Set: true, Value: 3}}}}})
}

// recordTB captures Fatal instead of failing the enclosing test.
type recordTB struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recordTB) Helper() {}
func (r *recordTB) Fatal(args ...any) {
	r.failed, r.msg = true, fmt.Sprint(args...)
	panic("fatal")
}
func (r *recordTB) Fatalf(format string, args ...any) { r.Fatal(fmt.Sprintf(format, args...)) }

func TestInterpSleep(t *testing.T) {
	start := time.Now()
	if err := runJSON(t, scenario(`{"op": "sleep", "args": {"ms": 20}}`)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("slept only %v", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	s, _ := ParseScenario([]byte(scenario(`{"op": "sleep", "args": {"ms": 60000}}`)))
	start = time.Now()
	if err := RunE(ctx, &fakeTarget{}, s); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want deadline exceeded, got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("sleep ignored the context (%v)", d)
	}

	target := &fakeTarget{}
	s, _ = ParseScenario([]byte(scenario(`{"op": "sleep", "args": {"ms": 1}}, {"op": "sleep", "args": {"seconds": 1}}`)))
	if err := RunE(context.Background(), target, s); err == nil || !strings.Contains(err.Error(), "sleep takes") {
		t.Fatalf("want bad sleep args rejected, got %v", err)
	}
	if len(target.ops) != 0 {
		t.Fatalf("sleep must not reach the target, got %v", target.ops)
	}
}

func TestInterpRejectsMalformedScenarios(t *testing.T) {
	bad := map[string]string{
		"unknown inline assertion":     scenario(`{"op": "echo", "expect": {"equalz": {"a": 1}}}`),
		"unknown standalone assertion": scenario(`{"op": "echo", "save": "a"}, {"op": "expect", "target": "$a", "lenght": 1}`),
		"unknown step key":             scenario(`{"op": "echo", "arg": {}}`),
		"unknown scenario key":         `{"name": "t", "steps": [{"op": "echo"}], "extra": 1}`,
		"missing op":                   scenario(`{"args": {}}`),
		"no steps":                     `{"name": "t", "steps": []}`,
		"no name":                      `{"steps": [{"op": "echo"}]}`,
		"expect without target":        scenario(`{"op": "expect", "length": 1}`),
		"expect without assertions":    scenario(`{"op": "expect", "target": 1}`),
		"expect with args":             scenario(`{"op": "expect", "target": 1, "length": 1, "args": {}}`),
		"assertion on a non-expect op": scenario(`{"op": "echo", "length": 1}`),
		"empty inline expect":          scenario(`{"op": "echo", "expect": {}}`),
		"expect and expectError":       scenario(`{"op": "echo", "expect": {"length": 1}, "expectError": "X"}`),
		"length not an integer":        scenario(`{"op": "echo", "expect": {"length": "1"}}`),
		"trailing data":                scenario(`{"op": "echo"}`) + ` {}`,
		"not JSON":                     `{"name": `,
	}
	for name, src := range bad {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseScenario([]byte(src)); err == nil {
				t.Fatalf("want parse error for %s", src)
			}
		})
	}
	// A Scenario built in Go gets the same shape checks from RunE.
	err := RunE(context.Background(), &fakeTarget{}, Scenario{Name: "g", Steps: []Step{{Op: "expect"}}})
	if err == nil || !strings.Contains(err.Error(), "needs a target") {
		t.Fatalf("want RunE to reject a malformed step, got %v", err)
	}
}

func TestLoadScenariosMalformedFileNamed(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b_second.json", `{"name": "second", "steps": [{"op": "echo"}]}`)
	write("a_first.json", `{"name": "first", "steps": [{"op": "echo"}]}`)
	write("notes.txt", "not a scenario")

	got, err := LoadScenarios(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "first" || got[1].Name != "second" {
		t.Fatalf("want [first second] in file order, got %+v", got)
	}
	if got[0].Path != filepath.Join(dir, "a_first.json") {
		t.Fatalf("Path not recorded: %q", got[0].Path)
	}

	write("c_broken.json", `{"name": "broken", "steps": [{"op": "echo", "expect": {"equalz": {}}}]}`)
	if _, err := LoadScenarios(dir); err == nil || !strings.Contains(err.Error(), "c_broken.json") {
		t.Fatalf("want error naming c_broken.json, got %v", err)
	}
	write("c_broken.json", `{"name": "first", "steps": [{"op": "echo"}]}`)
	if _, err := LoadScenarios(dir); err == nil || !strings.Contains(err.Error(), "c_broken.json") {
		t.Fatalf("want duplicate-name error naming c_broken.json, got %v", err)
	}
	if _, err := LoadScenarios(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("want error for a missing directory")
	}
}

// allOps is every op our scenarios must exercise at least once.
var allOps = []string{
	"submit", "get", "get_by_key", "get_status", "get_status_by_key", "list",
	"cancel", "cancel_by_key", "retry", "retry_by_key", "purge", "stats",
	"queue_depth", "claim", "heartbeat", "heartbeat_batch", "progress",
	"succeed", "complete", "fail", "sleep", "expect",
}

func TestScenarioFilesParse(t *testing.T) {
	scenarios, err := LoadScenarios("scenarios")
	if err != nil {
		t.Fatal(err)
	}
	if len(scenarios) == 0 {
		t.Fatal("no scenarios in conformance/scenarios")
	}
	used := map[string]bool{}
	for _, s := range scenarios {
		if s.Description == "" {
			t.Errorf("%s: no description", s.Path)
		}
		if want := strings.TrimSuffix(filepath.Base(s.Path), ".json"); s.Name != want {
			t.Errorf("%s: name %q differs from the file name", s.Path, s.Name)
		}
		checkAliases(t, s)
		for _, st := range s.Steps {
			used[st.Op] = true
			// Sleeps stand for time passing (a delay or a lease running
			// out), and every executor runs every scenario. Windows under
			// a second between two steps flaked on a loaded 2-core
			// machine, so a sleep may reach 2s, and no further.
			if st.Op == "sleep" {
				if ms, _ := st.Args["ms"].(float64); ms > 2000 {
					t.Errorf("%s: sleep of %vms; keep sleeps <= 2000ms", s.Path, ms)
				}
			}
		}
	}
	for _, op := range allOps {
		if !used[op] {
			t.Errorf("no scenario exercises op %q", op)
		}
	}
}

// checkAliases verifies statically that every "$alias" a scenario uses was
// saved by an earlier step, since a typo would otherwise surface only when
// the scenario first runs against an implementation.
func checkAliases(t *testing.T, s Scenario) {
	t.Helper()
	saved := map[string]bool{}
	var walk func(i int, v any)
	walk = func(i int, v any) {
		switch v := v.(type) {
		case string:
			if alias, ok := strings.CutPrefix(v, "$"); ok {
				alias, _, _ = strings.Cut(alias, ".")
				if !saved[alias] {
					t.Errorf("%s: steps[%d] uses %s before anything is saved as %q", s.Path, i, v, alias)
				}
			}
		case []any:
			for _, e := range v {
				walk(i, e)
			}
		case map[string]any:
			for _, e := range v {
				walk(i, e)
			}
		}
	}
	asserts := func(i int, a *Assertions) {
		if a == nil {
			return
		}
		walk(i, a.Equals)
		walk(i, a.EqualsRef.Value)
		walk(i, a.NotEqualsRef.Value)
		walk(i, a.GreaterThanRef.Value)
	}
	for i, st := range s.Steps {
		walk(i, st.Args)
		walk(i, st.Target.Value)
		asserts(i, &st.Assertions)
		if st.Save != "" {
			saved[st.Save] = true
		}
		asserts(i, st.Expect)
	}
}

func TestScenarioExternalDirParses(t *testing.T) {
	dir := os.Getenv("CAIRNQ_SCENARIOS_DIR")
	if dir == "" {
		t.Skip("CAIRNQ_SCENARIOS_DIR is not set: set it to the directory of scenario JSON files (CI sets it to ../shared/cairnq-scenarios)")
	}
	scenarios, err := LoadScenarios(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(scenarios) == 0 {
		t.Fatalf("no scenarios in %s", dir)
	}
	for _, s := range scenarios {
		checkAliases(t, s)
	}
}
