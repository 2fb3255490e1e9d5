// Package workflowspec holds what a workflow is, apart from where it is
// kept: its definition (the payload of the workflow's record task), the
// keys that make each step a task exactly once, and what an advance does
// given what it reads of the steps' rows (Decide). It holds no state and
// reads no database, so every decision can be tested with made-up rows;
// the engine supplies the lock, the reads and the writes
// (docs/plans/workflows-and-limits.md).
//
// The definition is JSON any SDK can read and write:
//
//	{"v":1,"on_failure":"cancel","steps":[
//	  {"step":"extract","task":"etl.extract","payload":{...}},
//	  {"step":"load","task":"etl.load","after":["extract"]}],
//	 "seen":{"extract":"succeeded","load":"queued"}}
//
// seen is the record's ledger: each step some advance has inserted, with
// the last status an advance read for it. A step in it is never inserted
// again, even once retention has purged its row (and freed its key).
package workflowspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Version is the definition format this package reads and writes.
const Version = 1

// MaxStepBytes bounds a step's name, so that a step's key (KeyPrefix,
// a task id, ":" and the name) stays far below the protocol's key limit.
const MaxStepBytes = 200

// KeyPrefix starts every key of a workflow (StepKey).
const KeyPrefix = "cairnq:workflow:"

// OnFailure says what a step that failed for good does to the rest of its
// workflow.
type OnFailure string

// The failure policies.
const (
	// CancelRest cancels the steps not finished yet (queued ones at once,
	// running ones are asked to stop), inserts no more, and fails the
	// workflow. The default.
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
	// Payload is the task's payload (JSON); absent is {}.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Options are the task's submit options, as the submitting SDK
	// encodes them; this package does not read them.
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

// Parse reads and validates a record's payload.
func Parse(data []byte) (*Definition, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var d Definition
	if err := dec.Decode(&d); err != nil {
		return nil, &Error{Reason: "not a workflow definition: " + err.Error()}
	}
	if dec.More() {
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
		return &Error{Reason: fmt.Sprintf("version %d, this SDK reads %d", d.V, Version)}
	}
	if d.OnFailure != CancelRest && d.OnFailure != ContinueBranches {
		return &Error{Reason: fmt.Sprintf("on_failure %q, want %q or %q", d.OnFailure, CancelRest, ContinueBranches)}
	}
	if len(d.Steps) == 0 {
		return &Error{Reason: "no steps"}
	}
	return validateSteps(d.Steps, d.Seen)
}

func validateSteps(steps []Step, seen map[string]Status) error {
	index := make(map[string]int, len(steps))
	for i, s := range steps {
		if err := ValidateStepName(s.Step); err != nil {
			return err
		}
		if _, dup := index[s.Step]; dup {
			return stepErr(s.Step, "named twice")
		}
		index[s.Step] = i
		if s.Task == "" {
			return stepErr(s.Step, "no task name")
		}
		if len(s.Payload) > 0 && !json.Valid(s.Payload) {
			return stepErr(s.Step, "payload is not JSON")
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
		return stepErr(cycle[0], "waits for itself through %s", strings.Join(cycle, " -> "))
	}
	for name, st := range seen {
		if _, ok := index[name]; !ok {
			return stepErr(name, "in the ledger but not a step of the workflow")
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
	case strings.ContainsAny(name, ":\x00"):
		return stepErr(name, "name holds ':' or NUL, which the step's key cannot carry")
	}
	return nil
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

// StepKey is the key of step's task in workflow (the record task's id):
// KeyPrefix, the id, ":" and the step's name, e.g.
// "cairnq:workflow:task_01J...:extract". Step names hold no ':', so a key
// parses at its last colon (ParseKey). Any process, in any SDK, that
// inserts a step under its key with the reject strategy inserts it at
// most once.
func StepKey(workflow, step string) string { return KeyPrefix + workflow + ":" + step }

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
	if i <= 0 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// Decision is what an advance does, under the workflow's lock.
type Decision struct {
	// Insert are the steps to insert now, in definition order.
	Insert []string
	// Cancel says to cancel the steps still live (queued ones end at
	// once, running ones are asked to stop).
	Cancel bool
	// Done says nothing is live and nothing more will be inserted: the
	// advance finishes the record, failed when Failed.
	Done, Failed bool
	// Skipped are, once Done, the steps never inserted.
	Skipped []string
	// Seen is the ledger to write back: every inserted step (those in
	// Insert as queued) with its status.
	Seen map[string]Status
}

// Decide says what an advance does for d, given the status of each step
// row it read (rows, by step name; a step with no row is absent) and
// whether the record was canceled. A step in the ledger with no row was
// purged: its last status seen stands, and one last seen live counts as
// failed (retention purges only finished rows, so a hand-made delete took
// it).
func Decide(d *Definition, rows map[string]Status, canceled bool) Decision {
	state := make(map[string]Status, len(d.Steps))
	for name, st := range d.Seen {
		if st.live() {
			st = Failed // its row is gone, unless read below
		}
		state[name] = st
	}
	for name, st := range rows {
		state[name] = st
	}
	var dec Decision
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
			}
		}
	}
	dec.Seen = make(map[string]Status, len(state)+len(dec.Insert))
	for name, st := range state {
		dec.Seen[name] = st
	}
	for _, name := range dec.Insert {
		dec.Seen[name] = Queued
	}
	if !anyLive && len(dec.Insert) == 0 {
		dec.Done = true
		dec.Failed = canceled || anyFailed
		for _, s := range d.Steps {
			if _, ok := dec.Seen[s.Step]; !ok {
				dec.Skipped = append(dec.Skipped, s.Step)
			}
		}
	}
	return dec
}
