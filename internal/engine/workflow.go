package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/workflowspec"
	"github.com/cairnq/cairnq-go/protocol"
)

// A workflow is kept as one record task (name and queue WorkflowName,
// the definition as its payload, key workflowspec.WorkflowKey of its id)
// and one ordinary task per step, inserted when its step is ready, keyed
// workflowspec.StepKey, with the record as its root and parent. Nothing
// but this file and the statements it names writes them
// (docs/plans/workflows-and-limits.md).

// WorkflowName is the name and the queue of every workflow's record
// task. A worker must not register a handler of this name: the SDK's own
// sweeper claims records.
const WorkflowName = "cairnq.workflow"

// workflowMember is the metadata member that marks a task as a step.
const workflowMember = "cairnq_workflow"

// firstCheck is how long after it is submitted a workflow's record
// becomes due for its first sweep; a Go worker's settlement advances the
// workflow before then.
const firstCheck = time.Second

// StepSpec is one step of a workflow to submit, as Go values: Submit's
// name (Task), payload and options, less what the workflow fixes (the
// key, the conflict strategy, the parent and root ids).
type StepSpec struct {
	Step    string
	Task    string
	Payload any
	Options cairnqtype.SubmitOptions
	After   []string
}

// stepOptions is how a step's submit options are kept in the definition
// (workflowspec.Step.Options), in every SDK's terms: JSON names, a delay
// in milliseconds. A field absent is Submit's default.
type stepOptions struct {
	Queue         string          `json:"queue,omitempty"`
	MaxAttempts   int             `json:"max_attempts,omitempty"`
	Priority      int             `json:"priority,omitempty"`
	DelayMS       int64           `json:"delay_ms,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	CorrelationID string          `json:"correlation_id,omitempty"`
}

// StepMark is the metadata member every step's task carries: what any
// SDK needs to find the step's workflow and the tasks it waited for.
type StepMark struct {
	V      int               `json:"v"`
	Record string            `json:"record"`
	Step   string            `json:"step"`
	After  map[string]string `json:"after,omitempty"` // step name -> task id
}

// NewDefinition checks steps as Submit would check each step's task and
// builds the definition a workflow's record keeps. A bad step is an
// *ArgumentError naming it; nothing is written.
func NewDefinition(op string, onFailure workflowspec.OnFailure, steps []StepSpec) (*workflowspec.Definition, error) {
	if onFailure == "" {
		onFailure = workflowspec.CancelRest
	}
	d := &workflowspec.Definition{V: workflowspec.Version, OnFailure: onFailure}
	for i, sp := range steps {
		s, err := specStep(op, sp)
		if err != nil {
			return nil, err
		}
		if sp.Step == "" {
			return nil, argError(op, fmt.Sprintf("step %d", i), "has no name")
		}
		d.Steps = append(d.Steps, s)
	}
	if err := d.Validate(); err != nil {
		return nil, definitionError(op, err)
	}
	if err := checkRoom(op, d); err != nil {
		return nil, err
	}
	return d, nil
}

// SpecSteps checks and encodes steps a running step adds (AddSteps).
func SpecSteps(op string, steps []StepSpec) ([]workflowspec.Step, error) {
	out := make([]workflowspec.Step, 0, len(steps))
	for _, sp := range steps {
		s, err := specStep(op, sp)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// specStep checks one step and encodes it for the definition.
func specStep(op string, sp StepSpec) (workflowspec.Step, error) {
	arg := fmt.Sprintf("step %q", sp.Step)
	o := sp.Options
	switch {
	case o.Key != "" || o.Conflict != "":
		return workflowspec.Step{}, argError(op, arg, "names a key or a conflict strategy; a step's key is its workflow's (StepKey)")
	case o.ParentID != "" || o.RootID != "":
		return workflowspec.Step{}, argError(op, arg, "names a parent or root id; a step's are its workflow's record")
	}
	payload, err := encodeJSON("payload", sp.Payload, "{}")
	if err != nil {
		return workflowspec.Step{}, err
	}
	so := stepOptions{Queue: o.Queue, MaxAttempts: o.MaxAttempts, Priority: o.Priority,
		DelayMS: ms(o.Delay), CorrelationID: o.CorrelationID}
	if o.Metadata != nil {
		md, err := encodeJSON("metadata", o.Metadata, "{}")
		if err != nil {
			return workflowspec.Step{}, err
		}
		so.Metadata = json.RawMessage(md)
	}
	opts, err := json.Marshal(so)
	if err != nil {
		return workflowspec.Step{}, &cairnqtype.SerializationError{Field: "options", Err: err}
	}
	s := workflowspec.Step{Step: sp.Step, Task: sp.Task, Payload: json.RawMessage(payload), Options: opts, After: sp.After}
	if bytes.Equal(opts, []byte("{}")) {
		s.Options = nil
	}
	// What the step's insertion will submit, checked now: the same
	// function builds it then.
	if _, err := stepParams(op, "task_check", s, nil); err != nil {
		return workflowspec.Step{}, err
	}
	return s, nil
}

// definitionError turns a definition's rule broken into the SDK's
// argument error.
func definitionError(op string, err error) error {
	var e *workflowspec.Error
	if errors.As(err, &e) {
		arg := "workflow"
		if e.Step != "" {
			arg = fmt.Sprintf("step %q", e.Step)
		}
		return argError(op, arg, "%s", e.Reason)
	}
	return err
}

// stepParams is what a step's insertion submits: its task, payload and
// options, as the record's child and root, marked with the workflow's
// member. after maps each step it waited for to that step's task id.
func stepParams(op, record string, s workflowspec.Step, after map[string]string) (SubmitParams, error) {
	var so stepOptions
	if len(s.Options) > 0 {
		dec := json.NewDecoder(bytes.NewReader(s.Options))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&so); err != nil {
			return SubmitParams{}, argError(op, fmt.Sprintf("step %q", s.Step), "options: %v", err)
		}
	}
	md := map[string]json.RawMessage{}
	if len(so.Metadata) > 0 {
		if err := json.Unmarshal(so.Metadata, &md); err != nil || md == nil {
			return SubmitParams{}, argError(op, fmt.Sprintf("step %q", s.Step), "metadata must be a JSON object")
		}
		if _, taken := md[workflowMember]; taken {
			return SubmitParams{}, argError(op, fmt.Sprintf("step %q", s.Step), "metadata member %q is the SDK's", workflowMember)
		}
	}
	mark, err := json.Marshal(StepMark{V: workflowspec.Version, Record: record, Step: s.Step, After: after})
	if err != nil {
		return SubmitParams{}, err
	}
	md[workflowMember] = mark
	p := SubmitParams{Name: s.Task, Payload: s.Payload, SubmitOptions: cairnqtype.SubmitOptions{
		Queue: so.Queue, MaxAttempts: so.MaxAttempts, Priority: so.Priority,
		Delay: time.Duration(so.DelayMS) * time.Millisecond, Metadata: md,
		CorrelationID: so.CorrelationID, ParentID: record, RootID: record,
		Key: workflowspec.StepKey(record, s.Step), Conflict: cairnqtype.ConflictReject,
	}}
	if s.Payload == nil {
		p.Payload = nil
	}
	if _, err := submitArgs(p); err != nil {
		var ae *cairnqtype.ArgumentError
		if errors.As(err, &ae) {
			return SubmitParams{}, argError(op, fmt.Sprintf("step %q", s.Step), "%s %s", ae.Arg, ae.Reason)
		}
		return SubmitParams{}, fmt.Errorf("step %q: %w", s.Step, err)
	}
	return p, nil
}

// MayBeStep reports whether t may be a workflow's step, without decoding
// its metadata: false is certain, true is for StepMarkOf to confirm.
func MayBeStep(t *cairnqtype.Task) bool {
	return bytes.Contains(t.Metadata, []byte(`"`+workflowMember+`"`))
}

// StepMarkOf reads t's step mark; ok is false for a task that is no
// workflow's step (its parent is not the record its mark names).
func StepMarkOf(t *cairnqtype.Task) (m StepMark, ok bool) {
	if !MayBeStep(t) {
		return StepMark{}, false // most tasks: no decoding
	}
	var md struct {
		Mark *StepMark `json:"cairnq_workflow"`
	}
	if json.Unmarshal(t.Metadata, &md) != nil || md.Mark == nil || md.Mark.Record == "" ||
		md.Mark.Step == "" || t.ParentID != md.Mark.Record {
		return StepMark{}, false
	}
	return *md.Mark, true
}

// WorkflowParams is a workflow to submit: its definition (NewDefinition)
// and what its record carries besides.
type WorkflowParams struct {
	Def           *workflowspec.Definition
	Metadata      any
	CorrelationID string
}

// insertSteps inserts the named steps of def, each under its key with
// the reject strategy and with its ledger key (workflowspec.LedgerKey),
// and returns the queues they went to. ids maps the steps already
// inserted to their task ids (for each step's mark). Every step's task is
// built before any is written, so a step this SDK cannot submit (options
// of a later version) is an *unreadableError and writes nothing. No key
// lock per step: every writer of a workflow's step keys holds the
// workflow's lock, and a fan-out of thousands of steps would otherwise
// hold as many advisory locks. A step whose key already points at a task
// was inserted by an advance before this one knew of it, and is left
// (a key whose task was purged is free, as for Submit).
func (s *Store) insertSteps(ctx context.Context, q querier, op, record string, def *workflowspec.Definition, names []string, ids map[string]string) ([]string, error) {
	ins, err := buildSteps(op, record, def, names, ids, s.now())
	if err != nil {
		return nil, err
	}
	return s.writeSteps(ctx, q, ins, nil, nil, nil)
}

// stepInserts are steps to insert, of one workflow or several: each
// one's row, key, ledger key and record. fresh says an advance from
// settled steps decided them, which reads no ledger (writeSteps).
type stepInserts struct {
	rows                   []*insertRow
	keys, ledgers, records []string
	fresh                  bool
}

// buildSteps builds the rows insertSteps writes for names, or an
// *unreadableError.
func buildSteps(op, record string, def *workflowspec.Definition, names []string, ids map[string]string, now time.Time) (*stepInserts, error) {
	byName := make(map[string]int, len(names))
	for _, name := range names {
		byName[name] = -1
	}
	for i, st := range def.Steps {
		if _, want := byName[st.Step]; want {
			byName[st.Step] = i
		}
	}
	out := &stepInserts{}
	for _, name := range names {
		step := def.Steps[byName[name]]
		var after map[string]string
		for _, a := range step.After {
			if after == nil {
				after = make(map[string]string, len(step.After))
			}
			after[a] = ids[a]
		}
		p, err := stepParams(op, record, step, after)
		if err != nil {
			return nil, &unreadableError{err}
		}
		ins, err := insertArgs(p, now)
		if err != nil {
			return nil, &unreadableError{err}
		}
		out.add(ins, p.Key, workflowspec.LedgerKey(record, name), record)
	}
	return out, nil
}

func (si *stepInserts) add(row *insertRow, key, ledger, record string) {
	si.rows, si.keys = append(si.rows, row), append(si.keys, key)
	si.ledgers, si.records = append(si.ledgers, ledger), append(si.records, record)
}

// writeSteps writes si: the rows whose keys point at no task, their
// keys, and every ledger key; and points each of also at the task of the
// same index in alsoTo (an advance's succeeded keys). It returns the
// queues of the rows written. On both backends that is three statements
// whatever the steps: workflow_look (the keys taken), insert_many and
// upsert_keys; on Postgres the rows go by COPY from copyMinRows of them
// (writeManyPG), and so do the keys the look found free from copyMinRows
// of those (copyKeys), both at one read of the clock. When si.fresh, a
// step whose ledger key is there already is not written either: inserted
// before, and purged since. known holds what looks of this transaction,
// under the same locks, read already (nil for none): the keys it answers
// are not looked up again.
func (s *Store) writeSteps(ctx context.Context, q querier, si *stepInserts, also, alsoTo []string, known map[string]stepLook) ([]string, error) {
	var at []int // the steps to insert
	if len(si.rows) > 0 {
		asked := si.keys
		if si.fresh {
			asked = append(slices.Clone(si.keys), si.ledgers...)
		}
		looks := known
		if looks == nil {
			looks = make(map[string]stepLook, len(asked))
		}
		var missing []string
		for _, k := range asked {
			if !has(looks, k) {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			if err := s.look(ctx, q, missing, looks); err != nil {
				return nil, err
			}
		}
		for i, k := range si.keys {
			if looks[k].id == "" && (!si.fresh || looks[si.ledgers[i]].id == "") {
				at = append(at, i)
			}
		}
	}
	out := make([]*cairnqtype.Task, len(si.rows))
	b := &manyBatch{ins: si.rows, maxBytes: insertManyBytes}
	if s.dialect == protocol.Postgres {
		if err := s.writeManyPG(ctx, q, b, at, out); err != nil {
			return nil, err
		}
	} else if err := s.insertManySQLite(ctx, q, si.rows, at, out); err != nil {
		return nil, err
	}
	// The keys the look found free: each inserted step's key, and when
	// si.fresh its ledger key too. Under the workflow's lock no other
	// writer takes them, so many go by COPY (copyKeys) rather than an
	// upsert; the others (the ledger keys of steps not inserted, or of
	// every step when not fresh, and also) are upserted.
	free := make([]string, 0, 2*len(at))
	freeTo := make([]string, 0, cap(free))
	queues := make([]string, 0, len(at))
	inserted := make([]bool, len(si.rows))
	for _, i := range at {
		free, freeTo, queues = append(free, si.keys[i]), append(freeTo, out[i].ID), append(queues, out[i].Queue)
		inserted[i] = true
	}
	var keys, to []string
	for i, ledger := range si.ledgers {
		if si.fresh && inserted[i] {
			free, freeTo = append(free, ledger), append(freeTo, si.records[i])
		} else {
			keys, to = append(keys, ledger), append(to, si.records[i])
		}
	}
	keys, to = append(keys, also...), append(to, alsoTo...)
	copied, err := s.copyKeys(ctx, q, free, freeTo, b.copiedAt)
	if err != nil {
		return nil, err
	}
	if !copied {
		keys, to = append(free, keys...), append(freeTo, to...)
	}
	if len(keys) == 0 {
		return queues, nil
	}
	return queues, s.pointKeys(ctx, q, keys, to)
}

// pointKeys points each of keys at the task of the same index in to, in
// one upsert_keys.
func (s *Store) pointKeys(ctx context.Context, q querier, keys, to []string) error {
	if s.dialect == protocol.Postgres {
		_, err := s.exec(ctx, q, stmtUpsertKeys, protocol.Args{"keys": pgArray(keys), "task_ids": pgArray(to)})
		return err
	}
	pairs := make([][2]string, len(keys))
	for i, k := range keys {
		pairs[i] = [2]string{k, to[i]}
	}
	b, err := json.Marshal(pairs)
	if err != nil {
		return err
	}
	_, err = s.exec(ctx, q, stmtUpsertKeys, protocol.Args{"pairs": string(b)})
	return err
}

// insertManySQLite writes the rows at of rows with SQLite's insert_many,
// each task into out at its index: queued, as insert_task writes it.
func (s *Store) insertManySQLite(ctx context.Context, q querier, rows []*insertRow, at []int, out []*cairnqtype.Task) error {
	if len(at) == 0 {
		return nil
	}
	null := func(v string) any {
		if v == "" {
			return nil
		}
		return v
	}
	each := make([][11]any, len(at))
	for j, i := range at {
		r := rows[i]
		each[j] = [11]any{r.id, r.name, r.queue, r.payload, r.metadata, r.maxAttempts, r.priority, r.delayMS,
			null(r.parentID), null(r.rootID), null(r.correlationID)}
	}
	b, err := json.Marshal(each)
	if err != nil {
		return err
	}
	if _, err := s.exec(ctx, q, stmtInsertMany, protocol.Args{"rows": string(b)}); err != nil {
		return err
	}
	for _, i := range at {
		r := rows[i]
		out[i] = &cairnqtype.Task{ID: r.id, Name: r.name, Queue: r.queue, Status: cairnqtype.StatusQueued}
	}
	return nil
}

// unreadableError is a workflow this SDK cannot advance as it stands: a
// step it cannot submit, a definition past the value limit. The advance
// leaves the workflow alone (Advanced.Unread) rather than fail the
// settlement or the sweep it runs in.
type unreadableError struct{ err error }

func (e *unreadableError) Error() string { return e.err.Error() }
func (e *unreadableError) Unwrap() error { return e.err }

// AddedStepsError is the steps a step added (TaskContext.AddSteps) that
// its workflow refuses at the step's settlement: a name taken, a cycle,
// a definition past the value limit. Nothing of the settlement is
// written.
type AddedStepsError struct{ Err error }

func (e *AddedStepsError) Error() string {
	return "the steps the handler added were refused: " + e.Err.Error()
}
func (e *AddedStepsError) Unwrap() error { return e.Err }

// AddedSteps are the steps a running step has added so far (AddSteps),
// checked as they come (workflowspec.Added) and bounded by
// MaxWorkflowSteps: what the settlement would refuse whatever the
// workflow holds is an *ArgumentError at the call instead, and the steps
// of a refused call are not added. The zero value is empty.
type AddedSteps struct{ workflowspec.Added }

// Add checks steps, added by the step named by, and adds them.
func (a *AddedSteps) Add(op, by string, steps []workflowspec.Step) error {
	if n := len(a.Steps) + len(steps); n > MaxWorkflowSteps {
		return argError(op, "steps", "%d added, the limit of a workflow's steps is %d", n, MaxWorkflowSteps)
	}
	if err := a.Added.Add(by, steps); err != nil {
		return definitionError(op, err)
	}
	return nil
}

// MaxWorkflowSteps bounds the steps of one workflow, those added while it
// runs included.
const MaxWorkflowSteps = 10_000

// checkRoom checks that def, with every step in its ledger and its end
// written, still fits the value limit and the step bound: the record's
// payload only grows as the workflow runs, and an advance must never
// find it cannot write its ledger.
func checkRoom(op string, def *workflowspec.Definition) error {
	if len(def.Steps) > MaxWorkflowSteps {
		return argError(op, "workflow", "has %d steps, the limit is %d", len(def.Steps), MaxWorkflowSteps)
	}
	full := *def
	full.Seen = make(map[string]workflowspec.Status, len(def.Steps))
	for _, st := range def.Steps {
		full.Seen[st.Step] = workflowspec.Succeeded
	}
	full.Ended, full.Changed = workflowspec.Succeeded, 1<<52
	if _, err := definitionPayload(&full); err != nil {
		return argError(op, "workflow", "its record would outgrow the value limit once every step has run: %v", err)
	}
	return nil
}

// definitionPayload is d as its record's payload: its JSON, checked as
// every payload is (encodeJSON, the value limit among its checks). A definition
// always encodes, so a failure to is a defect, not an error.
func definitionPayload(d *workflowspec.Definition) (string, error) {
	b, err := json.Marshal(d)
	if err != nil {
		panic("engine: a workflow definition did not encode: " + err.Error())
	}
	return encodeJSON("payload", json.RawMessage(b), "{}")
}

// StepRow is what workflow_steps reads of one step's task.
type StepRow struct {
	ID      string
	Step    string
	Status  cairnqtype.Status
	Attempt int
	// UpdatedMS is the row's updated_at_ms.
	UpdatedMS int64
}

// WorkflowState is a workflow as Get reads it: its record, the record's
// definition (nil when the payload is not one this SDK reads), and its
// steps' tasks.
type WorkflowState struct {
	Record *cairnqtype.Task
	Def    *workflowspec.Definition // shared: read it, never change it
	DefErr error
	Steps  []StepRow
	// Seen is Def's ledger with what the ledger keys say of the steps
	// with no row (ledgerSeen).
	Seen map[string]workflowspec.Status
}

// GetWorkflow reads the workflow whose record is id: ErrNotFound when
// there is no such task, and an *ArgumentError when the task is not a
// workflow's record.
func (s *Store) GetWorkflow(ctx context.Context, id string) (*WorkflowState, error) {
	const op = "get workflow"
	if err := checkID(op, id); err != nil {
		return nil, err
	}
	// The steps are read beside the record, on a read of their own,
	// while the record's definition (a megabyte at 10,000 steps) is read
	// and parsed. (Each read is its own snapshot, as every statement on
	// Postgres always was: a step may move between them.)
	var steps []StepRow
	stepsRead := make(chan error, 1)
	go func() {
		stepsRead <- s.be.read(ctx, func(q querier) error {
			var err error
			steps, err = s.workflowSteps(ctx, q, id)
			return err
		})
	}()
	var st WorkflowState
	err := s.be.read(ctx, func(q querier) error {
		hs, err := s.heads(ctx, q, []string{id})
		if err != nil {
			return err
		}
		h, ok := hs[id]
		if !ok {
			// Not a record through its key: say what it is.
			rows, err := s.exec(ctx, q, stmtGet, protocol.Args{"id": id})
			if err != nil {
				return err
			}
			if len(rows) == 0 {
				return cairnqtype.ErrNotFound
			}
			if h.rec, err = rowToTask(rows[0]); err != nil {
				return err
			}
		}
		if st.Record = h.rec; st.Record.Name != WorkflowName {
			return argError(op, "id", "task %s (named %q) is not a workflow's record", id, st.Record.Name)
		}
		st.Def, st.DefErr = s.cachedDefinition(id, h.keyUpdatedAt, st.Record.Payload)
		return nil
	})
	stepsErr := <-stepsRead
	if err != nil {
		return nil, err
	}
	if stepsErr != nil {
		return nil, stepsErr
	}
	if st.Steps = steps; st.DefErr == nil {
		err = s.be.read(ctx, func(q querier) error {
			var err error
			st.Seen, err = s.ledgerSeen(ctx, q, id, st.Def, st.Steps)
			return err
		})
	}
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// cachedDefinition is the definition payload holds, from the store's
// cache when its entry is current (generation is the record's key's
// updated_at_ms): a wide definition's parse is most of what reading the
// workflow costs. A definition parsed here is cached.
func (s *Store) cachedDefinition(id string, generation int64, payload []byte) (*workflowspec.Definition, error) {
	e := s.flows.get(id)
	if e != nil && generation != 0 && e.updatedAt == generation {
		return e.def, nil
	}
	def, err := workflowspec.Parse(payload)
	if err == nil && generation != 0 {
		s.flows.put(newFlowEntry(id, generation, def))
	}
	return def, err
}

// workflowSteps reads the steps' tasks of the workflow whose record is
// record.
func (s *Store) workflowSteps(ctx context.Context, q querier, record string) ([]StepRow, error) {
	steps, err := s.workflowStepsOf(ctx, q, []string{record})
	return steps[record], err
}

// workflowStepsOf reads the steps' tasks of the workflows whose records
// are records, in one workflow_steps, by record.
func (s *Store) workflowStepsOf(ctx context.Context, q querier, records []string) (map[string][]StepRow, error) {
	// By position (execRows): a wide workflow's read is 10,000 rows, and a
	// map for each cost SQLite's read a tenth of its time.
	rs, err := s.execRows(ctx, q, stmtWorkflowSteps, protocol.Args{"record_ids": s.list(records)})
	if err != nil {
		return nil, err
	}
	out := make(map[string][]StepRow, len(records))
	for i := range rs.len() {
		var sr StepRow
		var record, st string
		var att int64
		var err error
		if record, _, err = asString("record_id", rs.value(i, "record_id")); err != nil {
			return nil, err
		}
		if sr.ID, _, err = asString("id", rs.value(i, "id")); err != nil {
			return nil, err
		}
		if sr.Step, _, err = asString("step", rs.value(i, "step")); err != nil {
			return nil, err
		}
		if st, _, err = asString("status", rs.value(i, "status")); err != nil {
			return nil, err
		}
		if att, _, err = asInt64("attempt", rs.value(i, "attempt")); err != nil {
			return nil, err
		}
		if sr.UpdatedMS, _, err = asInt64("updated_at_ms", rs.value(i, "updated_at_ms")); err != nil {
			return nil, err
		}
		sr.Status, sr.Attempt = cairnqtype.Status(st), int(att)
		out[record] = append(out[record], sr)
	}
	return out, nil
}
