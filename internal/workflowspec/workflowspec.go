// Package workflowspec holds what a workflow is, apart from where it is
// kept: its definition (the payload of the workflow's record task), the
// keys that make each step a task exactly once, and what an advance does
// given what it reads of the steps' rows (Definition.Advance). It holds
// no state and reads no database, so every decision can be tested with
// made-up rows; the engine supplies the lock, the reads and the writes
// (docs/plans/workflows-and-limits.md).
//
// The definition is JSON any SDK can read and write:
//
//	{"v":1,"on_failure":"cancel","steps":[
//	  {"step":"extract","task":"etl.extract","payload":{...}},
//	  {"step":"load","task":"etl.load","after":["extract"]}],
//	 "seen":{"extract":"succeeded","load":"queued"}}
//
// seen is the record's ledger as a full advance last wrote it: each step
// it found inserted, with the last status it read. An advance from one
// settled step writes nothing to the record (its payload may be large);
// every step is marked inserted by its ledger key (LedgerKey) instead,
// written with it. A step in seen or with a ledger key is never inserted
// again, even once retention has purged its row (and freed its key).
// ended is written in the transaction that settles the record, so that a
// record found queued again with ended set was retried by someone.
//
// The engine checks each step's task name, payload and options against
// the submit rules when the workflow is submitted and when steps are
// added, and the whole payload against the value limit; this package
// checks the shape.
package workflowspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// Version is the definition format this package reads and writes.
const Version = 1

// MaxStepBytes bounds a step's name, so that a step's key (KeyPrefix,
// a task id, ":" and the name) stays far below the protocol's key limit.
const MaxStepBytes = 200

// maxTaskBytes is the protocol's bound on a task name.
const maxTaskBytes = 255

// KeyPrefix starts every key of a workflow (StepKey).
const KeyPrefix = "cairnq:workflow:"

// OnFailure says what a step that failed for good does to the rest of its
// workflow.
type OnFailure string

// The failure policies.
const (
	// CancelRest cancels the steps not finished yet (queued ones at once,
	// running ones are asked to stop), inserts no more, and fails the
	// workflow. What the SDK's builders choose unless told otherwise; the
	// JSON always names its policy.
	CancelRest OnFailure = "cancel"
	// ContinueBranches lets every step that does not wait on the failed
	// one run on; the workflow fails once nothing more can run.
	ContinueBranches OnFailure = "continue"
)

// Status is a step's status as the protocol writes it.
type Status string

// The statuses of protocol v1.
const (
	Queued    Status = "queued"
	Running   Status = "running"
	Succeeded Status = "succeeded"
	Failed    Status = "failed"
	Canceled  Status = "canceled"
)

// live reports whether a step in status s may still change by itself.
func (s Status) live() bool { return s == Queued || s == Running }

// Step is one step of a workflow: an ordinary task, inserted once every
// step in After has succeeded.
type Step struct {
	// Step names the step within its workflow: non-empty, at most
	// MaxStepBytes, without ':' or NUL.
	Step string `json:"step"`
	// Task is the task's name, the handler that runs it.
	Task string `json:"task"`
	// Payload is the task's payload (JSON), submitted as given; absent
	// means {}.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Options are the task's submit options, a JSON object as the
	// submitting SDK encodes them; this package reads nothing in it.
	Options json.RawMessage `json:"options,omitempty"`
	// After names the steps this one waits for.
	After []string `json:"after,omitempty"`
}

// Definition is a workflow record's payload.
type Definition struct {
	V         int       `json:"v"`
	OnFailure OnFailure `json:"on_failure"`
	Steps     []Step    `json:"steps"`
	// Seen is the ledger: every step an advance inserted, with the last
	// status one read for it.
	Seen map[string]Status `json:"seen,omitempty"`
	// Ended is the status the record was settled with (Succeeded, Failed
	// or Canceled), written in the transaction that settles it; empty
	// while the workflow runs.
	Ended Status `json:"ended,omitempty"`
	// Changed is when an advance last changed the ledger (or the steps),
	// Unix milliseconds by the advancer's clock: a sweep finding nothing
	// new waits longer the longer nothing has changed.
	Changed int64 `json:"changed_ms,omitempty"`
}

// Step returns the step of d named name, and the zero Step when there is
// none.
func (d *Definition) Step(name string) Step {
	for _, s := range d.Steps {
		if s.Step == name {
			return s
		}
	}
	return Step{}
}

// Error is a definition that breaks a rule; Step names the step at fault
// when there is one.
type Error struct {
	Step   string
	Reason string
}

func (e *Error) Error() string {
	if e.Step == "" {
		return "workflowspec: " + e.Reason
	}
	return fmt.Sprintf("workflowspec: step %q: %s", e.Step, e.Reason)
}

func stepErr(step, format string, args ...any) error {
	return &Error{Step: step, Reason: fmt.Sprintf(format, args...)}
}

// Parse reads and validates a record's payload. (Field names match as
// encoding/json matches them, whatever their case.)
func Parse(data []byte) (*Definition, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var d Definition
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return nil, &Error{Reason: "not a workflow definition: null"}
	}
	if err := dec.Decode(&d); err != nil {
		return nil, &Error{Reason: "not a workflow definition: " + err.Error()}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &Error{Reason: "not a workflow definition: text after the value"}
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

// Validate checks d: the version and policy, each step's name and task,
// names unique, every After naming another step of d, no cycle, and a
// ledger that names only d's steps.
func (d *Definition) Validate() error {
	if d.V != Version {
		// A later version is a newer SDK's record: the engine leaves it
		// alone rather than failing it.
		return &Error{Reason: fmt.Sprintf("version %d (v), this SDK reads %d", d.V, Version)}
	}
	if d.OnFailure != CancelRest && d.OnFailure != ContinueBranches {
		return &Error{Reason: fmt.Sprintf("on_failure %q, want %q or %q", d.OnFailure, CancelRest, ContinueBranches)}
	}
	if len(d.Steps) == 0 {
		return &Error{Reason: "no steps"}
	}
	switch d.Ended {
	case "", Succeeded, Failed, Canceled:
	default:
		return &Error{Reason: fmt.Sprintf("ended %q, want succeeded, failed or canceled", d.Ended)}
	}
	return validateSteps(d.Steps, d.Seen)
}

func validateSteps(steps []Step, seen map[string]Status) error {
	index := make(map[string]int, len(steps))
	for i, s := range steps {
		if err := ValidateStepName(s.Step); err != nil {
			var e *Error
			if errors.As(err, &e) && e.Step == "" {
				e.Reason += fmt.Sprintf(" (step %d)", i)
			}
			return err
		}
		if _, dup := index[s.Step]; dup {
			return stepErr(s.Step, "named twice")
		}
		index[s.Step] = i
		switch {
		case s.Task == "":
			return stepErr(s.Step, "no task name")
		case len(s.Task) > maxTaskBytes || !utf8.ValidString(s.Task) || strings.ContainsRune(s.Task, 0):
			return stepErr(s.Step, "task name is not a protocol name (at most %d bytes of UTF-8, no NUL)", maxTaskBytes)
		case len(s.Payload) > 0 && !json.Valid(s.Payload):
			return stepErr(s.Step, "payload is not JSON")
		case len(s.Options) > 0 && (!json.Valid(s.Options) || bytes.TrimSpace(s.Options)[0] != '{'):
			return stepErr(s.Step, "options are not a JSON object")
		}
	}
	for _, s := range steps {
		for _, a := range s.After {
			if a == s.Step {
				return stepErr(s.Step, "waits for itself")
			}
			if _, ok := index[a]; !ok {
				return stepErr(s.Step, "waits for %q, which is not a step of the workflow", a)
			}
		}
	}
	if cycle := findCycle(steps, index); cycle != nil {
		return cycleErr(cycle)
	}
	for name, st := range seen {
		if _, ok := index[name]; !ok {
			return &Error{Reason: fmt.Sprintf("the ledger names %q, not a step of the workflow", name)}
		}
		switch st {
		case Queued, Running, Succeeded, Failed, Canceled:
		default:
			return stepErr(name, "ledger status %q", st)
		}
	}
	return nil
}

// ValidateStepName checks one step name.
func ValidateStepName(name string) error {
	switch {
	case name == "":
		return &Error{Reason: "a step with no name"}
	case len(name) > MaxStepBytes:
		return stepErr(strings.ToValidUTF8(name[:32], "")+"...", "name longer than %d bytes", MaxStepBytes)
	case !utf8.ValidString(name):
		return stepErr(strings.ToValidUTF8(name, "\uFFFD"), "name is not UTF-8")
	case strings.ContainsAny(name, ":\x00"):
		return stepErr(name, "name holds ':' or NUL, which the step's key cannot carry")
	}
	return nil
}

// cycleErr is the error for cycle, a path whose first step repeats at
// its end.
func cycleErr(cycle []string) error {
	if len(cycle) > 10 {
		cycle = append(cycle[:9:9], fmt.Sprintf("... (%d more)", len(cycle)-9))
	}
	return stepErr(cycle[0], "waits for itself through %s", strings.Join(cycle, " -> "))
}

// findCycle returns the steps of a cycle of After edges, the first
// repeated at the end, or nil when there is none.
func findCycle(steps []Step, index map[string]int) []string {
	const (
		unseen = iota
		onPath
		done
	)
	state := make([]int, len(steps))
	var path []string
	var visit func(i int) []string
	visit = func(i int) []string {
		state[i] = onPath
		path = append(path, steps[i].Step)
		for _, a := range steps[i].After {
			j := index[a]
			switch state[j] {
			case onPath:
				from := slices.Index(path, a)
				return append(slices.Clone(path[from:]), a)
			case unseen:
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[i] = done
		return nil
	}
	for i := range steps {
		if state[i] == unseen {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}

// AddSteps adds steps to d while step by runs: each added step waits for
// by (added to its After if absent), may wait for other added steps and
// for steps of d, and may be waited for by nothing already in d (d's
// steps were inserted or decided on without them). d is unchanged when it
// returns an error.
func (d *Definition) AddSteps(by string, steps []Step) error {
	if !slices.ContainsFunc(d.Steps, func(s Step) bool { return s.Step == by }) {
		return stepErr(by, "adds steps but is not a step of the workflow")
	}
	if len(steps) == 0 {
		return nil
	}
	all := slices.Clone(d.Steps)
	for _, s := range steps {
		s.After = slices.Clone(s.After)
		s.Payload, s.Options = bytes.Clone(s.Payload), bytes.Clone(s.Options)
		if !slices.Contains(s.After, by) {
			s.After = append(s.After, by)
		}
		all = append(all, s)
	}
	if err := validateSteps(all, d.Seen); err != nil {
		return err
	}
	d.Steps = all
	return nil
}

// CheckAdded checks steps that step by adds while it runs on their own,
// before the workflow is read: what AddSteps would refuse whatever the
// workflow holds. Each step's name and task, names unique among them and
// none of them by, no step waiting for itself, and no cycle among them
// (nothing already in a workflow can wait for an added step, so a cycle
// can only run through added ones). An After naming no added step names
// one of the workflow's, which only AddSteps can check.
func CheckAdded(by string, steps []Step) error {
	added := make(map[string]bool, len(steps))
	for _, s := range steps {
		added[s.Step] = true
	}
	if added[by] {
		return stepErr(by, "is added by itself, the step that adds it")
	}
	own := make([]Step, len(steps))
	for i, s := range steps {
		own[i] = s
		own[i].After = slices.DeleteFunc(slices.Clone(s.After), func(a string) bool { return !added[a] && a != s.Step })
	}
	return validateSteps(own, nil)
}

// Added is what a running step has added so far, checked as it comes
// (Add): each call costs what it adds and what its steps reach, so a
// fan-out added one step per call stays linear whatever its order. The
// zero value is empty.
type Added struct {
	Steps []Step
	index map[string]int // each added step's position in Steps
	// waits are the After names of Steps that name no added step: steps
	// of the workflow, or steps a later call may add. Only a step of one
	// of those names can close a cycle through the steps added before.
	waits map[string]bool
}

// Add checks steps, added by step by, as CheckAdded does and against the
// steps added before (no name twice, no cycle through them), and adds
// them; a refused call adds nothing.
func (a *Added) Add(by string, steps []Step) error {
	if err := CheckAdded(by, steps); err != nil {
		return err
	}
	if a.index == nil {
		a.index, a.waits = map[string]int{}, map[string]bool{}
	}
	var starts []int
	for i, s := range steps {
		if _, dup := a.index[s.Step]; dup {
			return stepErr(s.Step, "is added twice")
		}
		if a.waits[s.Step] {
			starts = append(starts, len(a.Steps)+i)
		}
	}
	all := append(a.Steps, steps...)
	for i, s := range steps {
		a.index[s.Step] = len(a.Steps) + i
	}
	if cycle := cycleFrom(all, a.index, starts); cycle != nil {
		for _, s := range steps {
			delete(a.index, s.Step)
		}
		return cycleErr(cycle)
	}
	a.Steps = all
	for _, s := range steps {
		delete(a.waits, s.Step)
		for _, w := range s.After {
			if _, ok := a.index[w]; !ok {
				a.waits[w] = true
			}
		}
	}
	return nil
}

// cycleFrom returns a cycle of After edges among steps through one of
// the steps at starts (the first repeated at the end), or nil. Edges to
// names index lacks are not followed. It visits only what starts reach.
func cycleFrom(steps []Step, index map[string]int, starts []int) []string {
	const onPath, done = 1, 2
	state := map[int]int{}
	var path []string
	var visit func(i int) []string
	visit = func(i int) []string {
		state[i] = onPath
		path = append(path, steps[i].Step)
		for _, a := range steps[i].After {
			j, ok := index[a]
			if !ok {
				continue
			}
			switch state[j] {
			case onPath:
				from := slices.Index(path, a)
				return append(slices.Clone(path[from:]), a)
			case 0:
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[i] = done
		return nil
	}
	for _, i := range starts {
		if state[i] == 0 {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}

// StepKey is the key of step's task in workflow (the record task's id):
// KeyPrefix, the id, ":" and the step's name, e.g.
// "cairnq:workflow:task_01J...:extract". Step names hold no ':', so a key
// parses at its last colon (ParseKey). Any process, in any SDK, that
// inserts a step under its key with the reject strategy inserts it at
// most once while the step's row is kept; the ledger (Definition.Seen)
// keeps a step whose row was purged from running again.
func StepKey(workflow, step string) string { return KeyPrefix + workflow + ":" + step }

// LedgerPrefix starts every ledger key (LedgerKey).
const LedgerPrefix = "cairnq:workflow-ledger:"

// LedgerKey is the key that marks step of workflow as inserted:
// LedgerPrefix, the record task's id, ":" and the step's name, pointing
// at the record itself, so that it outlives the step's task (a purge
// takes a task's keys with it) and goes with the record. The step's own
// key (StepKey) keeps it from being inserted twice while its task is
// kept; its ledger key, after that.
func LedgerKey(workflow, step string) string { return LedgerPrefix + workflow + ":" + step }

// SucceededKey marks step of workflow as succeeded, pointing at the
// record as LedgerKey does: the ledger key followed by ":succeeded"
// (step names hold no ':'). Written by a success an advance from a
// settled step reads (which writes no ledger into the record), so that a
// purge of the step's task leaves it known to have succeeded.
func SucceededKey(workflow, step string) string { return LedgerKey(workflow, step) + ":succeeded" }

// WorkflowKey is the record's own key: StepKey with an empty step name,
// which no step has.
func WorkflowKey(workflow string) string { return StepKey(workflow, "") }

// ParseKey splits a key made by StepKey or WorkflowKey; ok is false for
// any other key.
func ParseKey(key string) (workflow, step string, ok bool) {
	rest, found := strings.CutPrefix(key, KeyPrefix)
	if !found {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, ':')
	if i <= 0 || strings.HasSuffix(rest[:i], ":") {
		return "", "", false
	}
	workflow, step = rest[:i], rest[i+1:]
	if step != "" && ValidateStepName(step) != nil {
		return "", "", false
	}
	return workflow, step, true
}

// Decision is what an advance does, under the workflow's lock.
type Decision struct {
	// Insert are the steps to insert now, in definition order.
	Insert []string
	// Cancel says to cancel the steps still live (queued ones end at
	// once, running ones are asked to stop).
	Cancel bool
	// Done says nothing is live and nothing more will be inserted: the
	// advance settles the record, failed when Failed, unless the record
	// was canceled (then it is left as it is).
	Done, Failed bool
	// Skipped are, once Done, the steps never inserted.
	Skipped []string
	// Lost are the steps whose rows are gone while the ledger last saw
	// them live: finished and purged before an advance read them, or
	// deleted by hand. Their outcome is unknown; they count as failed, and
	// nothing runs them again.
	Lost []string
}

// Advance decides what an advance does for d and records in d.Seen what
// it read and inserts, so that d is the payload to write back with the
// steps. rows holds the status of each step row read, by step name (a
// step with no row is absent); canceled says the record was canceled.
// d must be valid (Validate). A row that names no step of d is ignored,
// and a status outside the protocol's five counts as failed.
func (d *Definition) Advance(rows map[string]Status, canceled bool) Decision {
	var dec Decision
	state := make(map[string]Status, len(d.Steps))
	for name, st := range d.Seen {
		state[name] = st
	}
	steps := make(map[string]bool, len(d.Steps))
	for _, s := range d.Steps {
		steps[s.Step] = true
	}
	for name, st := range rows {
		if !steps[name] {
			continue
		}
		switch st {
		case Queued, Running, Succeeded, Failed, Canceled:
		default:
			st = Failed
		}
		state[name] = st
	}
	for _, s := range d.Steps {
		if _, read := rows[s.Step]; !read && state[s.Step].live() {
			// Gone while last seen live: its outcome is unknown.
			dec.Lost = append(dec.Lost, s.Step)
			state[s.Step] = Failed
		}
	}
	anyFailed, anyLive := false, false
	for _, s := range d.Steps {
		switch st, ok := state[s.Step]; {
		case !ok:
		case st.live():
			anyLive = true
		case st == Failed || st == Canceled:
			anyFailed = true
		}
	}
	stop := canceled || (anyFailed && d.OnFailure == CancelRest)
	dec.Cancel = stop && anyLive
	if !stop {
		for _, s := range d.Steps {
			if _, inserted := state[s.Step]; inserted {
				continue
			}
			ready := true
			for _, a := range s.After {
				if state[a] != Succeeded {
					ready = false
					break
				}
			}
			if ready {
				dec.Insert = append(dec.Insert, s.Step)
				state[s.Step] = Queued
			}
		}
	}
	if !anyLive && len(dec.Insert) == 0 {
		dec.Done = true
		for _, s := range d.Steps {
			if _, ok := state[s.Step]; !ok {
				dec.Skipped = append(dec.Skipped, s.Step)
			}
		}
		dec.Failed = canceled || anyFailed || len(dec.Skipped) > 0
	}
	if len(state) > 0 {
		d.Seen = state
	}
	return dec
}
