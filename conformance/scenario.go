package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Target is what the interpreter drives: one cairnq implementation on a fresh database.
type Target interface {
	// Do runs one op with already-resolved args and returns a JSON-shaped result
	// (map[string]any, []any, string, float64, bool or nil; numbers as float64).
	Do(ctx context.Context, op string, args map[string]any) (any, error)
	// ErrorName maps an error to the scenario vocabulary for expectError, e.g.
	// "AlreadyExists", "LostLease", "TaskTimeout"; "" when unknown.
	ErrorName(err error) string
}

// Scenario is one parsed scenario file.
type Scenario struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Steps       []Step `json:"steps"`
	// Path is the file the scenario was loaded from ("" when parsed from bytes).
	Path string `json:"-"`
}

// Step mirrors one element of a scenario's "steps" array.
//
// An ordinary step runs Op with Args, then optionally saves the result under
// Save and asserts on it with Expect, or asserts that it failed with
// ExpectError. A step whose Op is "expect" runs nothing: it asserts the
// embedded Assertions on Target.
type Step struct {
	Op          string         `json:"op"`
	Args        map[string]any `json:"args,omitempty"`
	Save        string         `json:"save,omitempty"`
	Expect      *Assertions    `json:"expect,omitempty"`
	ExpectError string         `json:"expectError,omitempty"`
	Target      Operand        `json:"target,omitzero"`
	Assertions
}

// Assertions are the checks of an "expect". Each one present must hold.
type Assertions struct {
	// Equals: every key's value must deep-equal the target's field of that name.
	Equals map[string]any `json:"equals,omitempty"`
	// EqualsRef / NotEqualsRef: the target must (not) deep-equal the value.
	EqualsRef    Operand `json:"equalsRef,omitzero"`
	NotEqualsRef Operand `json:"notEqualsRef,omitzero"`
	// GreaterThanRef: target and value are numbers, target the greater.
	GreaterThanRef Operand `json:"greaterThanRef,omitzero"`
	// Length: the target is an array of this length.
	Length *int `json:"length,omitempty"`
	// NotNull / IsNull: the named fields of the target are (not) null. A
	// missing field is null, and so is every field of a null target.
	NotNull []string `json:"notNull,omitempty"`
	IsNull  []string `json:"isNull,omitempty"`
}

// Operand is a JSON value that may be absent. Set tells an absent value from
// an explicit null.
type Operand struct {
	Set   bool
	Value any
}

// UnmarshalJSON marks the operand present; encoding/json calls it for null too.
func (o *Operand) UnmarshalJSON(b []byte) error {
	o.Set = true
	return json.Unmarshal(b, &o.Value)
}

// MarshalJSON writes the value alone.
func (o Operand) MarshalJSON() ([]byte, error) { return json.Marshal(o.Value) }

// IsZero reports an absent operand, for omitzero.
func (o Operand) IsZero() bool { return !o.Set }

func (a Assertions) empty() bool {
	return a.Equals == nil && !a.EqualsRef.Set && !a.NotEqualsRef.Set &&
		!a.GreaterThanRef.Set && a.Length == nil && a.NotNull == nil && a.IsNull == nil
}

// StepError is the failure RunE reports: which step of which scenario, with
// the args it ran with (resolved when resolution got that far).
type StepError struct {
	Scenario string
	Path     string
	Index    int // position in Steps, from 0
	Op       string
	Args     map[string]any
	Err      error
}

func (e *StepError) Error() string {
	where := fmt.Sprintf("scenario %q", e.Scenario)
	if e.Path != "" {
		where += " (" + e.Path + ")"
	}
	if e.Args == nil {
		return fmt.Sprintf("%s: steps[%d] op %q: %v", where, e.Index, e.Op, e.Err)
	}
	return fmt.Sprintf("%s: steps[%d] op %q args %s: %v", where, e.Index, e.Op, show(e.Args), e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// LoadScenarios parses every *.json file in dir, in file-name order. A
// malformed file, or two files declaring the same scenario name, is an error
// naming the file.
func LoadScenarios(dir string) ([]Scenario, error) {
	entries, err := os.ReadDir(dir) // sorted by file name
	if err != nil {
		return nil, err
	}
	var out []Scenario
	seen := map[string]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		s, err := ParseScenario(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if prev, dup := seen[s.Name]; dup {
			return nil, fmt.Errorf("%s: scenario name %q already used by %s", path, s.Name, prev)
		}
		seen[s.Name] = path
		s.Path = path
		out = append(out, s)
	}
	return out, nil
}

// ParseScenario parses one scenario strictly: unknown keys anywhere in the
// scenario, its steps or their expectations are errors, so that a misspelt
// assertion fails loudly instead of silently asserting nothing.
func ParseScenario(data []byte) (Scenario, error) {
	var s Scenario
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Scenario{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Scenario{}, errors.New("trailing data after the scenario object")
	}
	if err := s.validate(); err != nil {
		return Scenario{}, err
	}
	return s, nil
}

// validate checks the shape rules JSON decoding alone cannot.
func (s Scenario) validate() error {
	if s.Name == "" {
		return errors.New("scenario has no name")
	}
	if len(s.Steps) == 0 {
		return errors.New("scenario has no steps")
	}
	for i, st := range s.Steps {
		if err := st.validate(); err != nil {
			return fmt.Errorf("steps[%d] (op %q): %w", i, st.Op, err)
		}
	}
	return nil
}

func (st Step) validate() error {
	switch {
	case st.Op == "":
		return errors.New("missing op")
	case st.Op == "expect":
		if !st.Target.Set {
			return errors.New("an expect step needs a target")
		}
		if st.Args != nil || st.Save != "" || st.Expect != nil || st.ExpectError != "" {
			return errors.New("an expect step takes only target and assertions")
		}
		if st.Assertions.empty() {
			return errors.New("an expect step with no assertions")
		}
	default:
		if st.Target.Set || !st.Assertions.empty() {
			return errors.New("target and assertions belong to an expect step (use \"expect\": {...} here)")
		}
		if st.Expect != nil && st.Expect.empty() {
			return errors.New("empty expect")
		}
		if st.Expect != nil && st.ExpectError != "" {
			return errors.New("expect and expectError together: a failing step has no result to assert on")
		}
	}
	return nil
}

// Run executes s against target and fails t on the first failing step.
func Run(t testing.TB, ctx context.Context, target Target, s Scenario) {
	t.Helper()
	if err := RunE(ctx, target, s); err != nil {
		t.Fatal(err)
	}
}

// RunE executes s against target and returns the first failure (a
// *StepError once the steps are under way), or nil when every step held.
func RunE(ctx context.Context, target Target, s Scenario) error {
	if err := s.validate(); err != nil {
		return fmt.Errorf("scenario %q: %w", s.Name, err)
	}
	r := &runner{target: target, saved: map[string]any{}}
	for i, st := range s.Steps {
		args, err := r.step(ctx, st)
		if err != nil {
			return &StepError{Scenario: s.Name, Path: s.Path, Index: i, Op: st.Op, Args: args, Err: err}
		}
	}
	return nil
}

type runner struct {
	target Target
	saved  map[string]any
}

// step runs one step and returns the args it ran with, for error reports.
func (r *runner) step(ctx context.Context, st Step) (map[string]any, error) {
	if err := ctx.Err(); err != nil {
		return st.Args, err
	}
	if st.Op == "expect" {
		target, err := r.value(st.Target.Value)
		if err != nil {
			return nil, fmt.Errorf("target: %w", err)
		}
		return nil, r.check(target, st.Assertions)
	}

	resolved, err := r.value(st.Args)
	if err != nil {
		return st.Args, fmt.Errorf("args: %w", err)
	}
	args, _ := resolved.(map[string]any)
	if args == nil {
		args = map[string]any{}
	}

	result, err := r.do(ctx, st.Op, args)
	if st.ExpectError != "" {
		if err == nil {
			return args, fmt.Errorf("expected error %s, got success: %s", st.ExpectError, show(result))
		}
		name := r.target.ErrorName(err)
		if name != st.ExpectError {
			return args, fmt.Errorf("expected error %s, got %q: %v", st.ExpectError, name, err)
		}
		if st.Save != "" {
			var taskID any
			var withID interface{ TaskID() string }
			if errors.As(err, &withID) {
				taskID = withID.TaskID()
			}
			r.saved[st.Save] = map[string]any{"task_id": taskID, "type": name}
		}
		return args, nil
	}
	if err != nil {
		return args, err
	}
	if result, err = jsonValue(result); err != nil {
		return args, fmt.Errorf("result is not JSON-shaped: %w", err)
	}
	if st.Save != "" {
		r.saved[st.Save] = result
	}
	if st.Expect != nil {
		if err := r.check(result, *st.Expect); err != nil {
			return args, fmt.Errorf("%w (result %s)", err, show(result))
		}
	}
	return args, nil
}

// do runs an op: sleep is the interpreter's own, everything else the target's.
func (r *runner) do(ctx context.Context, op string, args map[string]any) (any, error) {
	if op != "sleep" {
		return r.target.Do(ctx, op, args)
	}
	ms, ok := args["ms"].(float64)
	if !ok || ms < 0 || len(args) != 1 {
		return nil, fmt.Errorf("sleep takes exactly {\"ms\": n} with n >= 0, got %s", show(args))
	}
	timer := time.NewTimer(time.Duration(ms * float64(time.Millisecond)))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// check applies every assertion present in a to target.
func (r *runner) check(target any, a Assertions) error {
	keys := make([]string, 0, len(a.Equals))
	for k := range a.Equals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		want, err := r.value(a.Equals[k])
		if err != nil {
			return fmt.Errorf("equals %s: %w", k, err)
		}
		got, err := field(target, k)
		if err != nil {
			return fmt.Errorf("equals %s: %w", k, err)
		}
		if !jsonEqual(got, want) {
			return fmt.Errorf("equals: field %s is %s, want %s", k, show(got), show(want))
		}
	}
	if a.EqualsRef.Set {
		want, err := r.value(a.EqualsRef.Value)
		if err != nil {
			return fmt.Errorf("equalsRef: %w", err)
		}
		if !jsonEqual(target, want) {
			return fmt.Errorf("equalsRef: got %s, want %s", show(target), show(want))
		}
	}
	if a.NotEqualsRef.Set {
		other, err := r.value(a.NotEqualsRef.Value)
		if err != nil {
			return fmt.Errorf("notEqualsRef: %w", err)
		}
		if jsonEqual(target, other) {
			return fmt.Errorf("notEqualsRef: both are %s", show(target))
		}
	}
	if a.GreaterThanRef.Set {
		ref, err := r.value(a.GreaterThanRef.Value)
		if err != nil {
			return fmt.Errorf("greaterThanRef: %w", err)
		}
		x, ok1 := target.(float64)
		y, ok2 := ref.(float64)
		if !ok1 || !ok2 {
			return fmt.Errorf("greaterThanRef: needs two numbers, got %s and %s", show(target), show(ref))
		}
		if !(x > y) {
			return fmt.Errorf("greaterThanRef: %s is not greater than %s", show(x), show(y))
		}
	}
	if a.Length != nil {
		arr, ok := target.([]any)
		if !ok {
			return fmt.Errorf("length: target is %s, not an array", show(target))
		}
		if len(arr) != *a.Length {
			return fmt.Errorf("length: got %d, want %d", len(arr), *a.Length)
		}
	}
	for _, name := range a.NotNull {
		v, err := field(target, name)
		if err != nil {
			return fmt.Errorf("notNull %s: %w", name, err)
		}
		if v == nil {
			return fmt.Errorf("notNull: field %s is null", name)
		}
	}
	for _, name := range a.IsNull {
		v, err := field(target, name)
		if err != nil {
			return fmt.Errorf("isNull %s: %w", name, err)
		}
		if v != nil {
			return fmt.Errorf("isNull: field %s is %s", name, show(v))
		}
	}
	return nil
}

// value resolves every reference inside v and normalizes the outcome to the
// JSON shapes results have, so that a Go literal 1 and a decoded 1.0 compare
// equal.
func (r *runner) value(v any) (any, error) {
	v, err := r.resolve(v)
	if err != nil {
		return nil, err
	}
	return jsonValue(v)
}

// resolve replaces each "$alias[.field...]" string in v, at any depth, with
// the saved value it names.
func (r *runner) resolve(v any) (any, error) {
	switch v := v.(type) {
	case string:
		if strings.HasPrefix(v, "$") {
			return r.ref(v)
		}
		return v, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			x, err := r.resolve(e)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			x, err := r.resolve(e)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		return out, nil
	default:
		return v, nil
	}
}

// ref looks up "$alias", "$alias.field" or "$alias.0.field". An alias nothing
// saved is an error; a missing field along the way reads as null.
func (r *runner) ref(s string) (any, error) {
	parts := strings.Split(s[1:], ".")
	cur, ok := r.saved[parts[0]]
	if !ok {
		return nil, fmt.Errorf("reference %s: nothing was saved as %q", s, parts[0])
	}
	for _, p := range parts[1:] {
		var err error
		if cur, err = field(cur, p); err != nil {
			return nil, fmt.Errorf("reference %s: %w", s, err)
		}
	}
	return cur, nil
}

// field reads one named field of an object, or one index of an array. A
// missing field, an index past the end, and any field of null are all null;
// reaching into a string, number or bool is an error.
func field(v any, name string) (any, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return v[name], nil
	case []any:
		i, err := strconv.Atoi(name)
		if err != nil {
			return nil, fmt.Errorf("%q is not an array index", name)
		}
		if i < 0 || i >= len(v) {
			return nil, nil
		}
		return v[i], nil
	default:
		return nil, fmt.Errorf("cannot read field %q of %s", name, show(v))
	}
}

// jsonValue converts v to the shapes encoding/json decodes into (and copies
// it, so that a target cannot alias what the interpreter keeps). Values
// already in that form come back equal.
func jsonValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// jsonEqual is deep equality over decoded JSON values.
func jsonEqual(a, b any) bool {
	switch a := a.(type) {
	case nil:
		return b == nil
	case bool, string, float64:
		return a == b
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !jsonEqual(a[i], b[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, x := range a {
			y, ok := b[k]
			if !ok || !jsonEqual(x, y) {
				return false
			}
		}
		return true
	default:
		return false
	}
}

// show renders a value for a failure message.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}
