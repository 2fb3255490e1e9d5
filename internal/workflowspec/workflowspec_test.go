package workflowspec

import (
	"encoding/json"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// diamond is a -> (b, c) -> d.
func diamond(policy OnFailure) *Definition {
	return &Definition{V: Version, OnFailure: policy, Steps: []Step{
		{Step: "a", Task: "t.a"},
		{Step: "b", Task: "t.b", After: []string{"a"}},
		{Step: "c", Task: "t.c", After: []string{"a"}},
		{Step: "d", Task: "t.d", After: []string{"b", "c"}},
	}}
}

func TestParseRoundTrip(t *testing.T) {
	d := diamond(CancelRest)
	d.Steps[0].Payload = json.RawMessage(`{"rows":3}`)
	d.Seen = map[string]Status{"a": Succeeded, "b": Running}
	text, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	back, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if string(back) != string(text) {
		t.Fatalf("round trip changed the definition:\n%s\n%s", text, back)
	}
}

func TestValidateRefuses(t *testing.T) {
	step := func(name string, after ...string) Step { return Step{Step: name, Task: "t", After: after} }
	def := func(steps ...Step) *Definition { return &Definition{V: Version, OnFailure: CancelRest, Steps: steps} }
	for _, c := range []struct {
		name, step, reason string
		d                  *Definition
	}{
		{"a later version", "", "version 2", &Definition{V: 2, OnFailure: CancelRest, Steps: []Step{step("a")}}},
		{"an unknown policy", "", "on_failure", &Definition{V: Version, OnFailure: "retry", Steps: []Step{step("a")}}},
		{"no steps", "", "no steps", def()},
		{"a step with no name", "", "no name", def(step(""))},
		{"a colon in a name", "a:b", "':'", def(step("a:b"))},
		{"a name too long", "", "longer than", def(step(strings.Repeat("x", MaxStepBytes+1)))},
		{"a name twice", "a", "twice", def(step("a"), step("a"))},
		{"no task", "a", "no task", def(Step{Step: "a"})},
		{"a payload not JSON", "a", "not JSON", def(Step{Step: "a", Task: "t", Payload: json.RawMessage(`{`)})},
		{"waiting for itself", "a", "waits for itself", def(step("a", "a"))},
		{"waiting for no step", "a", `"z"`, def(step("a", "z"))},
		{"a cycle", "a", "a -> c -> b -> a", def(step("a", "c"), step("b", "a"), step("c", "b"))},
		{"a ledger naming no step", "", `ledger names "z"`, &Definition{V: Version, OnFailure: CancelRest, Steps: []Step{step("a")}, Seen: map[string]Status{"z": Queued}}},
		{"options not JSON", "a", "options", def(Step{Step: "a", Task: "t", Options: json.RawMessage(`{`)})},
		{"options not an object", "a", "options", def(Step{Step: "a", Task: "t", Options: json.RawMessage(`[1]`)})},
		{"a name not UTF-8", "", "not UTF-8", def(step("a\xff"))},
		{"a task name with NUL", "a", "task name", def(Step{Step: "a", Task: "t\x00"})},
		{"a task name too long", "a", "task name", def(Step{Step: "a", Task: strings.Repeat("t", 256)})},
		{"an end not a final status", "", "ended", &Definition{V: Version, OnFailure: CancelRest, Steps: []Step{step("a")}, Ended: Running}},
		{"a ledger status not the protocol's", "a", "ledger status", &Definition{V: Version, OnFailure: CancelRest, Steps: []Step{step("a")}, Seen: map[string]Status{"a": "waiting"}}},
	} {
		err := c.d.Validate()
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), c.reason) || (c.step != "" && e.Step != c.step) {
			t.Errorf("%s: Validate = %v, want an *Error about step %q saying %q", c.name, err, c.step, c.reason)
		}
	}
	if err := diamond(ContinueBranches).Validate(); err != nil {
		t.Fatalf("a diamond: %v", err)
	}
}

func TestParseRefusesOtherJSON(t *testing.T) {
	for _, text := range []string{
		``, `[]`, `null`, `{"v":1,"on_failure":"cancel","steps":[{"step":"a","task":"t"}],"extra":1}`,
		`{"v":1,"on_failure":"cancel","steps":[{"step":"a","task":"t"}]} {}`,
		`{"v":1,"on_failure":"cancel","steps":[{"step":"a","task":"t"}]}]`,
	} {
		var e *Error
		if _, err := Parse([]byte(text)); !errors.As(err, &e) {
			t.Errorf("Parse(%q) = %v, want an *Error", text, err)
		}
	}
}

func TestKeys(t *testing.T) {
	const wf = "task_01JABCDEFGHJKMNPQRSTVWXYZ0"
	if got, want := StepKey(wf, "load"), "cairnq:workflow:"+wf+":load"; got != want {
		t.Fatalf("StepKey = %q, want %q", got, want)
	}
	for _, step := range []string{"load", "", "with space", "ünï"} {
		w, s, ok := ParseKey(StepKey(wf, step))
		if !ok || w != wf || s != step {
			t.Errorf("ParseKey(StepKey(%q)) = %q, %q, %v", step, w, s, ok)
		}
	}
	if WorkflowKey(wf) == StepKey(wf, "a") || ValidateStepName("") == nil {
		t.Fatal("the record's key can be a step's")
	}
	for _, key := range []string{"", "cairnq:periodic:x:1", "cairnq:workflow:", "cairnq:workflow:nocolon", "cairnq:workflow::a",
		"cairnq:workflow:w::", "cairnq:workflow:w:a\x00", "cairnq:workflow:w:" + strings.Repeat("s", MaxStepBytes+1)} {
		if w, s, ok := ParseKey(key); ok {
			t.Errorf("ParseKey(%q) = %q, %q, true; want false", key, w, s)
		}
	}
}

func TestAddSteps(t *testing.T) {
	d := diamond(CancelRest)
	err := d.AddSteps("b", []Step{
		{Step: "b.1", Task: "t.item"},
		{Step: "b.2", Task: "t.item"},
		{Step: "b.all", Task: "t.merge", After: []string{"b.1", "b.2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Steps[4].After; !slices.Equal(got, []string{"b"}) {
		t.Fatalf("an added step waits for %v, want its adder", got)
	}
	if got := d.Steps[6].After; !slices.Equal(got, []string{"b.1", "b.2", "b"}) {
		t.Fatalf("the fan-in waits for %v", got)
	}
	before, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		by    string
		steps []Step
	}{
		{"z", []Step{{Step: "x", Task: "t"}}}, // no such adder
		{"b", []Step{{Step: "a", Task: "t"}}}, // a name taken
		{"b", []Step{{Step: "x", Task: "t", After: []string{"y"}}, {Step: "y", Task: "t", After: []string{"x"}}}}, // a cycle
	} {
		if err := d.AddSteps(c.by, c.steps); err == nil {
			t.Errorf("AddSteps(%q, %v) succeeded", c.by, c.steps)
		}
	}
	if after, err := json.Marshal(d); err != nil || string(after) != string(before) {
		t.Fatalf("a refused AddSteps changed the definition:\n%s\n%s", before, after)
	}
	// The definition keeps its own copies of what it was given.
	payload := json.RawMessage(`{"n":1}`)
	if err := d.AddSteps("a", []Step{{Step: "x", Task: "t", Payload: payload}}); err != nil {
		t.Fatal(err)
	}
	payload[5] = '2'
	if got := string(d.Steps[len(d.Steps)-1].Payload); got != `{"n":1}` {
		t.Fatalf("the added step's payload changed with the caller's slice: %s", got)
	}
}

func TestAdvance(t *testing.T) {
	type rows = map[string]Status
	for _, c := range []struct {
		name     string
		d        *Definition
		seen     rows
		rows     rows
		canceled bool
		want     Decision
		wantSeen rows
	}{
		{name: "a new workflow starts its roots", d: diamond(CancelRest),
			want: Decision{Insert: []string{"a"}}, wantSeen: rows{"a": Queued}},
		{name: "fan-out", d: diamond(CancelRest), seen: rows{"a": Queued}, rows: rows{"a": Succeeded},
			want: Decision{Insert: []string{"b", "c"}}, wantSeen: rows{"a": Succeeded, "b": Queued, "c": Queued}},
		{name: "fan-in waits for every branch", d: diamond(CancelRest), seen: rows{"a": Succeeded, "b": Queued, "c": Queued}, rows: rows{"a": Succeeded, "b": Succeeded, "c": Running},
			want: Decision{}, wantSeen: rows{"a": Succeeded, "b": Succeeded, "c": Running}},
		{name: "fan-in", d: diamond(CancelRest), seen: rows{"a": Succeeded, "b": Running, "c": Queued}, rows: rows{"a": Succeeded, "b": Succeeded, "c": Succeeded},
			want: Decision{Insert: []string{"d"}}, wantSeen: rows{"a": Succeeded, "b": Succeeded, "c": Succeeded, "d": Queued}},
		{name: "done", d: diamond(CancelRest), seen: rows{"a": Succeeded, "b": Succeeded, "c": Succeeded, "d": Queued}, rows: rows{"a": Succeeded, "b": Succeeded, "c": Succeeded, "d": Succeeded},
			want: Decision{Done: true}, wantSeen: rows{"a": Succeeded, "b": Succeeded, "c": Succeeded, "d": Succeeded}},
		{name: "a failure cancels the rest", d: diamond(CancelRest), seen: rows{"a": Succeeded, "b": Queued, "c": Queued}, rows: rows{"a": Succeeded, "b": Failed, "c": Running},
			want: Decision{Cancel: true}, wantSeen: rows{"a": Succeeded, "b": Failed, "c": Running}},
		{name: "and then fails the workflow", d: diamond(CancelRest), seen: rows{"a": Succeeded, "b": Failed, "c": Running}, rows: rows{"a": Succeeded, "b": Failed, "c": Canceled},
			want: Decision{Done: true, Failed: true, Skipped: []string{"d"}}, wantSeen: rows{"a": Succeeded, "b": Failed, "c": Canceled}},
		{name: "continue lets a branch run on", d: diamond(ContinueBranches), seen: rows{"a": Succeeded, "b": Queued, "c": Queued}, rows: rows{"a": Succeeded, "b": Failed, "c": Running},
			want: Decision{}, wantSeen: rows{"a": Succeeded, "b": Failed, "c": Running}},
		{name: "continue inserts on another branch after a failure", d: &Definition{V: Version, OnFailure: ContinueBranches, Steps: []Step{
			{Step: "a", Task: "t"}, {Step: "b", Task: "t"}, {Step: "b2", Task: "t", After: []string{"b"}}}},
			seen: rows{"a": Queued, "b": Queued}, rows: rows{"a": Failed, "b": Succeeded},
			want: Decision{Insert: []string{"b2"}}, wantSeen: rows{"a": Failed, "b": Succeeded, "b2": Queued}},
		{name: "continue, then fails", d: diamond(ContinueBranches), seen: rows{"a": Succeeded, "b": Failed, "c": Running}, rows: rows{"a": Succeeded, "b": Failed, "c": Succeeded},
			want: Decision{Done: true, Failed: true, Skipped: []string{"d"}}, wantSeen: rows{"a": Succeeded, "b": Failed, "c": Succeeded}},
		{name: "a canceled workflow cancels what is live", d: diamond(ContinueBranches), seen: rows{"a": Succeeded, "b": Queued}, rows: rows{"a": Succeeded, "b": Queued}, canceled: true,
			want: Decision{Cancel: true}, wantSeen: rows{"a": Succeeded, "b": Queued}},
		{name: "a canceled workflow ends once nothing is live", d: diamond(CancelRest), seen: rows{"a": Succeeded, "b": Queued}, rows: rows{"a": Succeeded, "b": Canceled}, canceled: true,
			want: Decision{Done: true, Failed: true, Skipped: []string{"c", "d"}}, wantSeen: rows{"a": Succeeded, "b": Canceled}},
		{name: "a workflow canceled before any step", d: diamond(CancelRest), canceled: true,
			want: Decision{Done: true, Failed: true, Skipped: []string{"a", "b", "c", "d"}}, wantSeen: nil},
		{name: "a purged step's last status stands", d: diamond(CancelRest), seen: rows{"a": Succeeded, "b": Succeeded, "c": Running}, rows: rows{"c": Succeeded},
			want: Decision{Insert: []string{"d"}}, wantSeen: rows{"a": Succeeded, "b": Succeeded, "c": Succeeded, "d": Queued}},
		{name: "a purged step is never inserted again", d: diamond(CancelRest), seen: rows{"a": Succeeded},
			want: Decision{Insert: []string{"b", "c"}}, wantSeen: rows{"a": Succeeded, "b": Queued, "c": Queued}},
		{name: "a step purged before an advance saw it finish is lost", d: diamond(ContinueBranches), seen: rows{"a": Running},
			want: Decision{Done: true, Failed: true, Skipped: []string{"b", "c", "d"}, Lost: []string{"a"}}, wantSeen: rows{"a": Failed}},
		{name: "rows that are no step's are ignored", d: diamond(CancelRest), seen: rows{"a": Queued}, rows: rows{"": Running, "a.child": Failed, "a": Succeeded},
			want: Decision{Insert: []string{"b", "c"}}, wantSeen: rows{"a": Succeeded, "b": Queued, "c": Queued}},
		{name: "a status not the protocol's counts as failed", d: diamond(ContinueBranches), seen: rows{"a": Queued}, rows: rows{"a": "paused"},
			want: Decision{Done: true, Failed: true, Skipped: []string{"b", "c", "d"}}, wantSeen: rows{"a": Failed}},
	} {
		c.d.Seen = c.seen
		got := c.d.Advance(c.rows, c.canceled)
		if !slices.Equal(got.Insert, c.want.Insert) || got.Cancel != c.want.Cancel || got.Done != c.want.Done ||
			got.Failed != c.want.Failed || !slices.Equal(got.Skipped, c.want.Skipped) || !slices.Equal(got.Lost, c.want.Lost) {
			t.Errorf("%s: Advance = %+v, want %+v", c.name, got, c.want)
		}
		if !maps.Equal(c.d.Seen, c.wantSeen) {
			t.Errorf("%s: the ledger is %v, want %v", c.name, c.d.Seen, c.wantSeen)
		}
		if err := c.d.Validate(); err != nil {
			t.Errorf("%s: the definition written back is invalid: %v", c.name, err)
		}
	}
}

// Advancing by Advance alone, each inserted step settling as told, runs
// every step of a workflow exactly once and ends it, whatever order the
// settlements come in; with one step failing, the workflow ends failed
// and the step waiting on it never runs.
func TestAdvanceRunsEachStepOnce(t *testing.T) {
	for _, fail := range []string{"", "c.1"} {
		for order := range 3 {
			d := diamond(CancelRest)
			if err := d.AddSteps("c", []Step{{Step: "c.1", Task: "t"}, {Step: "c.2", Task: "t"}, {Step: "c.all", Task: "t", After: []string{"c.1", "c.2"}}}); err != nil {
				t.Fatal(err)
			}
			rows := map[string]Status{}
			inserted := map[string]int{}
			var last Decision
			for range 30 {
				last = d.Advance(rows, false)
				if last.Done {
					break
				}
				for _, name := range last.Insert {
					inserted[name]++
					rows[name] = Queued
				}
				if last.Cancel {
					for name, st := range rows {
						if st.live() {
							rows[name] = Canceled
						}
					}
					continue
				}
				// Settle one live step: the first, the last or the middle.
				var live []string
				for _, s := range d.Steps {
					if rows[s.Step] == Queued {
						live = append(live, s.Step)
					}
				}
				if len(live) == 0 {
					t.Fatalf("fail %q, order %d: nothing live and not done: %+v", fail, order, last)
				}
				pick := live[[]int{0, len(live) - 1, len(live) / 2}[order]]
				rows[pick] = Succeeded
				if pick == fail {
					rows[pick] = Failed
				}
			}
			if !last.Done || last.Failed != (fail != "") {
				t.Fatalf("fail %q, order %d: ended %+v", fail, order, last)
			}
			for _, s := range d.Steps {
				if inserted[s.Step] > 1 {
					t.Fatalf("fail %q, order %d: step %s inserted %d times", fail, order, s.Step, inserted[s.Step])
				}
				if fail == "" && rows[s.Step] != Succeeded {
					t.Fatalf("order %d: step %s ends %s", order, s.Step, rows[s.Step])
				}
			}
			if fail != "" && inserted["c.all"] > 0 {
				t.Fatalf("order %d: the step after the failed one ran: %v", order, inserted)
			}
		}
	}
}

func TestCheckAdded(t *testing.T) {
	leaf := func(name string, after ...string) Step { return Step{Step: name, Task: "t", After: after} }
	for _, tc := range []struct {
		name  string
		steps []Step
		bad   string // a part of the error, "" for none
	}{
		{"waits for the workflow's steps", []Step{leaf("a", "elsewhere"), leaf("b", "a", "by")}, ""},
		{"a cycle among them", []Step{leaf("p", "q"), leaf("q", "p")}, "waits for itself through"},
		{"a longer cycle", []Step{leaf("a", "c"), leaf("b", "a"), leaf("c", "b", "elsewhere")}, "waits for itself through"},
		{"waits for itself", []Step{leaf("a", "a")}, "waits for itself"},
		{"a name twice", []Step{leaf("a"), leaf("a")}, "named twice"},
		{"the adder's name", []Step{leaf("by")}, "added by itself"},
		{"no task", []Step{{Step: "a"}}, "no task name"},
		{"a bad name", []Step{leaf("a:b")}, ""},
	} {
		err := CheckAdded("by", tc.steps)
		switch {
		case tc.name == "a bad name":
			if err == nil {
				t.Errorf("%s: nil, want an error", tc.name)
			}
		case tc.bad == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.bad)
		}
	}
}

// Added.Add accepts and refuses exactly what CheckAdded over every step
// added so far would, on random calls over a few names, and a refused
// call leaves it as it was.
func TestAddedAgreesWithCheckAdded(t *testing.T) {
	names := []string{"by", "a", "b", "c", "d", "e", "f"}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func() string { return names[rng.IntN(len(names))] }
	for round := range 20000 {
		var a Added
		var kept []Step
		for range 1 + rng.IntN(4) {
			var call []Step
			for range 1 + rng.IntN(3) {
				s := Step{Step: pick(), Task: "t"}
				for range rng.IntN(3) {
					s.After = append(s.After, pick())
				}
				call = append(call, s)
			}
			want := CheckAdded("by", append(slices.Clip(kept), call...))
			got := a.Add("by", call)
			if (got == nil) != (want == nil) {
				t.Fatalf("round %d: adding %+v after %+v: Add %v, CheckAdded %v", round, call, kept, got, want)
			}
			if got == nil {
				kept = append(kept, call...)
			}
			if len(a.Steps) != len(kept) {
				t.Fatalf("round %d: %d steps kept, want %d", round, len(a.Steps), len(kept))
			}
		}
	}
}
