package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/workflowspec"
	"github.com/cairnq/cairnq-go/protocol"
)

// recordLease is how long an advance or a sweep leases the record it
// claims: the claim and the settlement (or the snooze) run in one
// transaction, so the lease only has to outlive it; a process that dies
// in it rolls the claim back.
const recordLease = time.Minute

// Added is what a running step adds to its workflow (TaskContext's
// AddSteps), written at the step's settlement.
type Added struct {
	By    string
	Steps []workflowspec.Step
}

// Advanced is what one advance did.
type Advanced struct {
	// Queues holds the queue of every step inserted.
	Queues []string
	// Inserted counts the steps inserted, Canceled the live steps it
	// canceled or asked to stop.
	Inserted, Canceled int
	// Record is the record as settled when the advance finished the
	// workflow, nil otherwise.
	Record *cairnqtype.Task
	// Progress says the advance changed something: it inserted, canceled
	// or settled, or its ledger read a step's new status.
	Progress bool
	// Unread is why the record was left as it was: not a definition this
	// SDK reads, or already ended. Empty when the advance ran.
	Unread string
	// Ended says the workflow had ended already: its record is
	// terminal, or its definition says it ended (a record queued again
	// after that was retried by someone).
	Ended bool
	// changed is when the ledger (Definition.Changed) or a step's row
	// last changed: the sweep's pace.
	changed int64
	// learn, when set, keeps in the store's workflow cache what the
	// advance read, once its transaction has committed
	// (advanceFromStep).
	learn func()
}

// advanceIn advances the workflow whose record is record, in q's write
// transaction, under the workflow's lock: it reads the record and its
// steps, inserts each step now ready (once: its key and the ledger),
// cancels the live steps when the workflow stopped, and, once nothing is
// live or insertable, claims the record by id and settles it, as worker
// workerID. add, when set, is written into the definition first. A
// failed workflow one of whose steps was retried since is revived first
// (reviveIn); the steps of a canceled one are asked to stop.
func (s *Store) advanceIn(ctx context.Context, q querier, op, record, workerID string, add *Added) (Advanced, error) {
	if _, err := s.exec(ctx, q, stmtLockKey, protocol.Args{"key": workflowspec.WorkflowKey(record)}); err != nil {
		return Advanced{}, err
	}
	return s.advanceHeldIn(ctx, q, op, record, workerID, add)
}

// advanceHeldIn is advanceIn once the workflow's lock is held (a
// settlement's, a sweep's): taking it again would cost a round trip.
func (s *Store) advanceHeldIn(ctx context.Context, q querier, op, record, workerID string, add *Added) (Advanced, error) {
	reads, err := s.readWorkflows(ctx, q, []string{record})
	if err != nil {
		return Advanced{}, err
	}
	return s.advanceReadIn(ctx, q, op, reads[record], workerID, add, nil)
}

// advanceReadIn is advanceHeldIn once the workflow is read (w). When end
// is set and every step succeeded, the record's end goes into end, for
// the caller to write with others' (writeEndings), and Advanced.Record
// stays nil until then.
func (s *Store) advanceReadIn(ctx context.Context, q querier, op string, w *workflowRead, workerID string, add *Added, end *endings) (Advanced, error) {
	var adv Advanced
	if w.unread != "" {
		adv.Unread = w.unread
		return adv, nil
	}
	rec, def, steps, record := w.rec, w.def, w.steps, w.rec.ID
	var err error
	if rec.Status == cairnqtype.StatusFailed && stepsRetried(def, steps) {
		// A plain retry of a step (Client.Retry, another SDK's retry)
		// since the workflow failed: the workflow goes on.
		if rec, err = s.reviveIn(ctx, q, rec, def); err != nil {
			return adv, err
		}
		adv.Progress = true
	}
	canceled := rec.Status == cairnqtype.StatusCanceled || !rec.CancelRequestedAt.IsZero()
	if !rec.Status.IsTerminal() && def.Ended != "" && !canceled {
		// Ended, and live again: someone retried the record (RetryWorkflow,
		// or any SDK's retry), or a step of it under CancelRest. The
		// workflow resumes.
		if steps, adv.Queues, err = s.resumeIn(ctx, q, record, def, steps); err != nil {
			return adv, err
		}
		adv.Progress = true
	}
	if rec.Status.IsTerminal() || def.Ended != "" {
		if canceled {
			// Canceled by hand, maybe by another SDK's console: its steps
			// go with it.
			adv.Canceled, err = s.cancelLive(ctx, q, steps)
			adv.Progress = adv.Canceled > 0
			return adv, err
		}
		adv.Ended = true
		return adv, nil
	}
	if add != nil {
		if err := def.AddSteps(add.By, add.Steps); err != nil {
			return adv, &AddedStepsError{definitionError(op, err)}
		}
		if err := checkRoom(op, def); err != nil {
			return adv, &AddedStepsError{err}
		}
		adv.Progress = true
	}
	return s.goOnIn(ctx, q, op, rec, def, steps, workerID, adv, end)
}

// workflowRead is a workflow as an advance reads it, under its lock:
// its record, definition (with the ledger keys' word on the steps with
// no row, ledgerSeen) and steps; or why the advance leaves it alone
// (unread): its record gone, a definition this SDK does not read.
type workflowRead struct {
	rec    *cairnqtype.Task
	def    *workflowspec.Definition
	steps  []StepRow
	unread string
}

// readWorkflows reads the workflows whose records are records, in q's
// transaction, under their locks the caller holds: the records through
// their own keys in one workflow_heads (through their ids, one get each,
// should a key be gone), every one's steps in one workflow_steps. An
// advance that finishes several workflows reads them together.
func (s *Store) readWorkflows(ctx context.Context, q querier, records []string) (map[string]*workflowRead, error) {
	hs, err := s.heads(ctx, q, records)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*workflowRead, len(records))
	var found []string
	for _, r := range records {
		h, ok := hs[r]
		if !ok {
			rows, err := s.exec(ctx, q, stmtGet, protocol.Args{"id": r})
			if err != nil {
				return nil, err
			}
			if len(rows) == 0 {
				out[r] = &workflowRead{unread: "the record is gone"}
				continue
			}
			if h.rec, err = rowToTask(rows[0]); err != nil {
				return nil, err
			}
		}
		def, err := workflowspec.Parse(h.rec.Payload)
		if err != nil {
			out[r] = &workflowRead{unread: err.Error()}
			continue
		}
		out[r] = &workflowRead{rec: h.rec, def: def}
		found = append(found, r)
	}
	if len(found) == 0 {
		return out, nil
	}
	steps, err := s.workflowStepsOf(ctx, q, found)
	if err != nil {
		return nil, err
	}
	for _, r := range found {
		w := out[r]
		w.steps = steps[r]
		if w.def.Seen, err = s.ledgerSeen(ctx, q, r, w.def, w.steps); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ledgerSeen returns def's ledger with what became of each step with no
// row that the ledger does not say ended: inserted (the ledger saw it
// live, or its ledger key marks it) and gone since, maybe inserted and
// settled by advances from a settled step, which write no ledger into
// the record. It succeeded if a step waiting for it was inserted, or its
// succeeded key says so; otherwise it counts as last seen queued, which
// Advance counts lost. Either way it is never inserted again.
func (s *Store) ledgerSeen(ctx context.Context, q querier, record string, def *workflowspec.Definition, steps []StepRow) (map[string]workflowspec.Status, error) {
	found := make(map[string]bool, len(steps))
	for _, st := range steps {
		found[st.Step] = true
	}
	open := func(name string) bool { // no row, and not known ended
		st, seen := def.Seen[name]
		return !found[name] && (!seen || st == workflowspec.Queued || st == workflowspec.Running)
	}
	var keys []string
	for _, st := range def.Steps {
		if open(st.Step) {
			keys = append(keys, workflowspec.LedgerKey(record, st.Step), workflowspec.SucceededKey(record, st.Step))
		}
	}
	if len(keys) == 0 {
		return def.Seen, nil
	}
	looks := make(map[string]stepLook, len(keys))
	if err := s.look(ctx, q, keys, looks); err != nil {
		return nil, err
	}
	inserted := func(name string) bool {
		_, seen := def.Seen[name]
		return seen || found[name] || looks[workflowspec.LedgerKey(record, name)].id != ""
	}
	waitedFor := map[string]bool{} // steps a step inserted waits for
	for _, st := range def.Steps {
		if inserted(st.Step) {
			for _, a := range st.After {
				waitedFor[a] = true
			}
		}
	}
	seen := maps.Clone(def.Seen)
	for _, st := range def.Steps {
		if !open(st.Step) || !inserted(st.Step) {
			continue
		}
		if seen == nil {
			seen = map[string]workflowspec.Status{}
		}
		seen[st.Step] = workflowspec.Queued
		if waitedFor[st.Step] || looks[workflowspec.SucceededKey(record, st.Step)].id != "" {
			seen[st.Step] = workflowspec.Succeeded
		}
	}
	return seen, nil
}

// goOnIn is the advance of a workflow still running, in q's transaction
// under its lock: the ledger updated from steps, the steps now ready
// inserted, the live ones canceled when the workflow stops, and the
// record settled once nothing more can run, or else its ledger written
// back. adv is what the advance did so far; end is advanceReadIn's.
func (s *Store) goOnIn(ctx context.Context, q querier, op string, rec *cairnqtype.Task, def *workflowspec.Definition, steps []StepRow, workerID string, adv Advanced, end *endings) (Advanced, error) {
	var err error
	canceled := !rec.CancelRequestedAt.IsZero()
	statuses := make(map[string]workflowspec.Status, len(steps))
	ids := make(map[string]string, len(steps))
	for _, st := range steps {
		statuses[st.Step] = workflowspec.Status(st.Status)
		ids[st.Step] = st.ID
	}
	before := maps.Clone(def.Seen)
	dec := def.Advance(statuses, canceled)
	// Progress is a decision, or a step's end that is not a success:
	// the statuses of the steps that succeeded since the ledger was last
	// written are left to the next write. Writing them alone would
	// rewrite the whole definition (and make every process's cache read
	// it again) for nothing an advance needs: a step's success is in its
	// row, and once its row is gone, in the steps inserted after it or
	// its succeeded key (seenByLedger).
	adv.Progress = adv.Progress || len(dec.Insert) > 0 || dec.Cancel || endedBadly(before, def.Seen)
	if len(dec.Insert) > 0 {
		queues, err := s.insertSteps(ctx, q, op, rec.ID, def, dec.Insert, ids)
		var unreadable *unreadableError
		if errors.As(err, &unreadable) {
			// Nothing inserted: the workflow is left as it is, but for
			// what this advance was given to keep (steps a step added, a
			// retry's resumed steps), and a sweep finds it the same way
			// and logs why.
			for _, name := range dec.Insert {
				delete(def.Seen, name)
			}
			if adv.Progress {
				def.Changed = s.now().UnixMilli()
				if err := s.revise(ctx, q, rec.ID, def); err != nil {
					return adv, err
				}
			}
			return Advanced{Unread: unreadable.Error(), Queues: adv.Queues}, nil
		}
		if err != nil {
			return adv, err
		}
		adv.Queues = append(adv.Queues, queues...)
		adv.Inserted = len(dec.Insert)
	}
	if dec.Cancel {
		if adv.Canceled, err = s.cancelLive(ctx, q, steps); err != nil {
			return adv, err
		}
	}
	if adv.Progress {
		def.Changed = s.now().UnixMilli()
	}
	// The sweep's pace: the last change the ledger or a step's row shows
	// (an advance from a settled step writes no ledger).
	adv.changed = def.Changed
	for _, st := range steps {
		adv.changed = max(adv.changed, st.UpdatedMS)
	}
	if !dec.Done {
		if adv.Progress {
			err = s.revise(ctx, q, rec.ID, def)
		}
		return adv, err
	}
	adv.Progress = true
	adv.Record, err = s.finishRecord(ctx, q, rec, def, dec, steps, workerID, end)
	return adv, err
}

// endedBadly reports whether a step the ledger before did not say failed
// or canceled is so in after: what the caches' doomed steps are read
// from (flowEntry.doom), and what a retry of the step looks for.
func endedBadly(before, after map[string]workflowspec.Status) bool {
	for name, st := range after {
		if (st == workflowspec.Failed || st == workflowspec.Canceled) && before[name] != st {
			return true
		}
	}
	return false
}

// cancelLive cancels the queued steps among steps and asks the running
// ones to stop, returning how many it reached.
func (s *Store) cancelLive(ctx context.Context, q querier, steps []StepRow) (int, error) {
	n := 0
	for _, st := range steps {
		if st.Status != cairnqtype.StatusQueued && st.Status != cairnqtype.StatusRunning {
			continue
		}
		rows, err := s.exec(ctx, q, stmtCancel, protocol.Args{"id": st.ID})
		if err != nil {
			return n, err
		}
		n += len(rows)
	}
	return n, nil
}

// revise writes def back into the record's payload, and moves the
// record's own key, which tells every process's cache of it
// (advanceFromStep) to read the definition again.
func (s *Store) revise(ctx context.Context, q querier, record string, def *workflowspec.Definition) error {
	payload, err := definitionPayload(def)
	if err != nil {
		return err
	}
	if _, err = s.exec(ctx, q, stmtWorkflowRevise, protocol.Args{"id": record, "payload": payload}); err != nil {
		return err
	}
	_, err = s.exec(ctx, q, stmtWorkflowTouch, protocol.Args{"key": workflowspec.WorkflowKey(record)})
	return err
}

// finishRecord settles a workflow nothing more will happen in: it claims
// the record by id and completes it (every step succeeded; one
// workflow_finish when the record is queued, or into end to write with
// others' when end is set) or fails it, with the
// ledger and ended written first. A record another advance holds
// (a sweeper claimed it) is left to that advance, with the ledger
// written; it returns nil then.
func (s *Store) finishRecord(ctx context.Context, q querier, rec *cairnqtype.Task, def *workflowspec.Definition, dec workflowspec.Decision, steps []StepRow, workerID string, end *endings) (*cairnqtype.Task, error) {
	ended := workflowspec.Succeeded
	if dec.Failed {
		ended = workflowspec.Failed
	}
	if rec.Status == cairnqtype.StatusQueued && !dec.Failed {
		if end != nil {
			return nil, end.add(rec.ID, def, steps, workerID)
		}
		e := &endings{}
		if err := e.add(rec.ID, def, steps, workerID); err != nil {
			return nil, err
		}
		done, err := s.writeEndings(ctx, q, e)
		return done[rec.ID], err
	}
	if rec.Status == cairnqtype.StatusQueued {
		claimed, err := s.claimRecord(ctx, q, rec.ID, workerID)
		if err != nil {
			return nil, err
		}
		if !claimed {
			return nil, s.revise(ctx, q, rec.ID, def)
		}
	} else if rec.WorkerID != workerID {
		return nil, s.revise(ctx, q, rec.ID, def)
	}
	def.Ended = ended
	if err := s.revise(ctx, q, rec.ID, def); err != nil {
		return nil, err
	}
	if !dec.Failed {
		res, err := encodeJSON("result", workflowResult(def, steps), "null")
		if err != nil {
			return nil, err
		}
		out, err := s.exec(ctx, q, stmtComplete, protocol.Args{"id": rec.ID, "worker_id": workerID, "result": res})
		if err != nil {
			return nil, err
		}
		return oneTask(out)
	}
	text, err := storableEnvelope(workflowFailure(def, dec))
	if err != nil {
		return nil, err
	}
	out, err := s.exec(ctx, q, stmtFail, protocol.Args{
		"id": rec.ID, "worker_id": workerID, "error": text, "retryable": false, "delay_ms": int64(0),
	})
	if err != nil {
		return nil, err
	}
	return oneTask(out)
}

// endings are queued records whose every step succeeded, to claim and
// complete in one workflow_finish (writeEndings): an advance of several
// workflows (finishStepAdvances) writes all its ends together.
type endings struct {
	ids, payloads, results, workers, keys []string
	defs                                  []*workflowspec.Definition
}

// add puts record's end into e: def, ended succeeded, with the result
// of steps, finished as workerID. def is left as it was on an error.
func (e *endings) add(record string, def *workflowspec.Definition, steps []StepRow, workerID string) error {
	res, err := encodeJSON("result", workflowResult(def, steps), "null")
	if err != nil {
		return err
	}
	def.Ended = workflowspec.Succeeded
	payload, err := definitionPayload(def)
	if err != nil {
		def.Ended = ""
		return err
	}
	e.ids, e.payloads, e.results = append(e.ids, record), append(e.payloads, payload), append(e.results, res)
	e.workers, e.keys = append(e.workers, workerID), append(e.keys, workflowspec.WorkflowKey(record))
	e.defs = append(e.defs, def)
	return nil
}

// writeEndings claims and completes the records of e in one
// workflow_finish on Postgres, which moves their keys too (on SQLite one
// workflow_finish and one workflow_touch a record), and returns the finished records by id. A
// record no longer queued is not finished: its definition is written
// back without its end (revise), as an advance leaves a record another
// holds.
func (s *Store) writeEndings(ctx context.Context, q querier, e *endings) (map[string]*cairnqtype.Task, error) {
	if len(e.ids) == 0 {
		return nil, nil
	}
	var out []executor.Row
	if s.dialect == protocol.Postgres {
		var err error
		if out, err = s.exec(ctx, q, stmtWorkflowFinish, protocol.Args{"ids": pgArray(e.ids), "payloads": pgArray(e.payloads),
			"results": pgArray(e.results), "worker_ids": pgArray(e.workers), "keys": pgArray(e.keys)}); err != nil {
			return nil, err
		}
	} else {
		for i, id := range e.ids { // one record a statement on SQLite
			rows, err := s.exec(ctx, q, stmtWorkflowFinish, protocol.Args{"id": id, "payload": e.payloads[i],
				"result": e.results[i], "worker_id": e.workers[i]})
			if err != nil {
				return nil, err
			}
			out = append(out, rows...)
		}
	}
	done := make(map[string]*cairnqtype.Task, len(out))
	for _, r := range out {
		t, err := rowToTask(r)
		if err != nil {
			return nil, err
		}
		done[t.ID] = t
	}
	for i, id := range e.ids {
		switch {
		case done[id] == nil:
			e.defs[i].Ended = ""
			if err := s.revise(ctx, q, id, e.defs[i]); err != nil {
				return nil, err
			}
		case s.dialect == protocol.SQLite:
			if _, err := s.exec(ctx, q, stmtWorkflowTouch, protocol.Args{"key": e.keys[i]}); err != nil {
				return nil, err
			}
		}
	}
	return done, nil
}

// stepOutcome is one step in a succeeded workflow's result.
type stepOutcome struct {
	ID     string            `json:"id"`
	Status cairnqtype.Status `json:"status"`
}

// workflowResult is a succeeded workflow's result: each step's task id
// and status, by step name.
func workflowResult(def *workflowspec.Definition, steps []StepRow) map[string]map[string]stepOutcome {
	out := make(map[string]stepOutcome, len(def.Steps))
	for _, st := range steps {
		out[st.Step] = stepOutcome{ID: st.ID, Status: st.Status}
	}
	return map[string]map[string]stepOutcome{"steps": out}
}

// WorkflowFailedType is the error envelope's type on a failed
// workflow's record.
const WorkflowFailedType = "WorkflowFailed"

// workflowFailure is the envelope a failed workflow's record keeps.
func workflowFailure(def *workflowspec.Definition, dec workflowspec.Decision) cairnqtype.ErrorEnvelope {
	failed := []string{}
	for name, st := range def.Seen {
		if st == workflowspec.Failed || st == workflowspec.Canceled {
			failed = append(failed, name)
		}
	}
	slices.Sort(failed)
	msg := "workflow failed"
	if len(failed) > 0 {
		msg = "workflow failed: step " + strings.Join(failed, ", ") + " did not succeed"
	}
	nonNil := func(v []string) []string {
		if v == nil {
			return []string{}
		}
		return v
	}
	return cairnqtype.ErrorEnvelope{
		Type: WorkflowFailedType, Code: "workflow_failed", Message: msg, Retryable: false,
		Details: map[string]any{"failed": failed, "skipped": nonNil(dec.Skipped), "lost": nonNil(dec.Lost)},
	}
}

// checkAdd is an *AddedStepsError when the workflow whose record is
// record, as it stands, refuses add. A workflow this SDK cannot read, or
// one that has ended, refuses nothing here: its advance leaves it alone.
func (s *Store) checkAdd(ctx context.Context, q querier, record string, add *Added) error {
	rows, err := s.exec(ctx, q, stmtGet, protocol.Args{"id": record})
	if err != nil || len(rows) == 0 {
		return err
	}
	rec, err := rowToTask(rows[0])
	if err != nil {
		return err
	}
	def, err := workflowspec.Parse(rec.Payload)
	if err != nil || rec.IsTerminal() || def.Ended != "" {
		return nil
	}
	try := *def // AddSteps replaces Steps, never changes it in place
	if err := try.AddSteps(add.By, add.Steps); err != nil {
		return &AddedStepsError{definitionError("settle step", err)}
	}
	if err := checkRoom("settle step", &try); err != nil {
		return &AddedStepsError{err}
	}
	return nil
}

// AdvanceWorkflow advances the workflow whose record is record in a write
// transaction of its own, as workerID: for a step that ended outside a
// settlement that advances (a snooze a cancel won).
func (s *Store) AdvanceWorkflow(ctx context.Context, record, workerID string) (Advanced, error) {
	var adv Advanced
	err := s.be.write(ctx, func(q querier) error {
		var err error
		adv, err = s.advanceIn(ctx, q, "advance workflow", record, workerID, nil)
		return err
	})
	if err != nil {
		return Advanced{}, err
	}
	s.afterAdvance(adv)
	return adv, nil
}

// afterAdvance tells this process's workers and waiters what an advance
// committed.
func (s *Store) afterAdvance(adv Advanced) {
	if adv.learn != nil {
		adv.learn()
	}
	if adv.Record != nil {
		s.flows.drop(adv.Record.ID) // ended: its advances are over
	}
	s.announceQueued(adv.Queues)
	s.settled(adv.Record)
}

// The sweep's pace: a record is checked again sweepMin after a sweep that
// found something new, and then less often the longer nothing changes,
// up to sweepMax.
const (
	sweepMin = time.Second
	sweepMax = 5 * time.Minute
)

// sweepSkipMax bounds how long a sweep of a workflow this process is
// advancing leaves its steps unread (sweepOne): what other SDKs'
// settlements left ready is found within sweepSkipMax and sweepMin even
// while this process's settlements advance it without pause.
const sweepSkipMax = 5 * time.Second

// skipSweep reports whether the sweep of record may skip its reads: this
// process advanced it from a step less than sweepMin ago (its steps'
// settlements do what the sweep would, for the steps they settle) and
// read it whole less than sweepSkipMax ago. A wide workflow's full read
// holds its lock for 100 ms and more, while its steps wait to settle.
func (s *Store) skipSweep(record string, now time.Time) bool {
	e := s.flows.peek(record)
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return now.Sub(e.advanced) < sweepMin && now.Sub(e.swept) < sweepSkipMax
}

// markSwept notes that this process's sweep read record whole at now.
func (s *Store) markSwept(record string, now time.Time) {
	if e := s.flows.peek(record); e != nil {
		e.mu.Lock()
		e.swept = now
		e.mu.Unlock()
	}
}

// sweepDelay is how long a record waits for its next sweep when the
// last change it saw was at changedMS (Unix ms): half the quiet time so
// far, within sweepMin and sweepMax.
func sweepDelay(now time.Time, changedMS int64) time.Duration {
	quiet := now.Sub(time.UnixMilli(changedMS))
	return min(max(quiet/2, sweepMin), sweepMax)
}

// Swept is what SweepWorkflows did.
type Swept struct {
	// Records counts the records swept (another sweep may take one of
	// those found due first).
	Records int
	// Unread are the records left alone, each with why.
	Unread map[string]string
}

// SweepWorkflows sweeps up to limit records that are due, as workerID,
// each in a write transaction of its own that takes the workflow's lock,
// claims the record by id, advances the workflow and then settles the
// record or hands it back due later (snooze: its attempt given back). It
// inserts the steps other SDKs' settlements left ready, and finishes the
// workflows they left done. A process that dies in a sweep leaves its
// transaction to roll back: no record is left claimed. A record whose
// payload this SDK cannot read is handed back for sweepMax.
func (s *Store) SweepWorkflows(ctx context.Context, workerID string, limit int) (Swept, error) {
	var sw Swept
	rows, err := s.readOne(ctx, stmtWorkflowDue, protocol.Args{"name": WorkflowName, "limit": int64(limit)})
	if err != nil {
		return sw, err
	}
	var firstErr error
	for _, r := range rows {
		id, _, err := asString("id", r["id"])
		if err != nil {
			return sw, err
		}
		adv, swept, err := s.sweepOne(ctx, id, workerID)
		if err != nil && errors.Is(err, cairnqtype.ErrInvalidArgument) {
			// A record the advance refuses whatever it tries (a payload
			// broken by hand): handed back for sweepMax, so that it does
			// not stay the oldest due record every sweep meets first.
			adv, swept, err = Advanced{Unread: err.Error()}, true, s.holdRecord(ctx, id, workerID)
		}
		if err != nil {
			// The others are swept all the same; the first error is
			// reported.
			firstErr = cmp.Or(firstErr, fmt.Errorf("sweeping workflow %s: %w", id, err))
			continue
		}
		if !swept {
			continue
		}
		sw.Records++
		if adv.Unread != "" {
			if sw.Unread == nil {
				sw.Unread = map[string]string{}
			}
			sw.Unread[id] = adv.Unread
		}
	}
	return sw, firstErr
}

// holdRecord hands a record back due in sweepMax, in a transaction of its
// own: claimed by id under the workflow's lock, snoozed.
func (s *Store) holdRecord(ctx context.Context, id, workerID string) error {
	return s.be.write(ctx, func(q querier) error {
		claimed, err := s.lockAndClaimRecord(ctx, q, id, workerID)
		if err != nil || !claimed {
			return err
		}
		_, err = s.exec(ctx, q, stmtSnooze, snoozeArgs(id, workerID, sweepMax, ""))
		return err
	})
}

// lockAndClaimRecord takes the workflow's lock and then claims its
// record by id, in that order, as every writer of a workflow takes them:
// the other way round, a settlement holding the lock and waiting for the
// record's row would deadlock with this claim. claimed is false when the
// record is not queued (another sweep or advance took it).
func (s *Store) lockAndClaimRecord(ctx context.Context, q querier, id, workerID string) (claimed bool, err error) {
	if _, err := s.exec(ctx, q, stmtLockKey, protocol.Args{"key": workflowspec.WorkflowKey(id)}); err != nil {
		return false, err
	}
	return s.claimRecord(ctx, q, id, workerID)
}

// claimRecord claims the record by id, whatever its due time, under the
// workflow's lock the caller holds.
func (s *Store) claimRecord(ctx context.Context, q querier, id, workerID string) (bool, error) {
	rows, err := s.exec(ctx, q, stmtClaimIDs, protocol.Args{
		"ids": s.list([]string{id}), "worker_id": workerID, "lease_ms": ms(recordLease),
	})
	return len(rows) > 0, err
}

// sweepOne claims, advances and settles or snoozes one record in one
// write transaction; swept is false when the record was no longer queued
// (another sweep or advance took it).
func (s *Store) sweepOne(ctx context.Context, id, workerID string) (adv Advanced, swept bool, err error) {
	var snoozed *cairnqtype.Task
	var skip bool
	var locked time.Time // when the workflow's lock was taken
	err = s.be.write(ctx, func(q querier) error {
		adv, swept, snoozed = Advanced{}, false, nil
		var err error
		if swept, err = s.lockAndClaimRecord(ctx, q, id, workerID); err != nil || !swept {
			return err
		}
		locked = s.now()
		if skip = s.skipSweep(id, locked); !skip {
			if adv, err = s.advanceHeldIn(ctx, q, "sweep workflow", id, workerID, nil); err != nil {
				return err
			}
			if adv.Record != nil {
				return nil
			}
		}
		delay := sweepMin
		switch {
		case skip:
		case adv.Unread != "" || adv.Ended:
			delay = sweepMax
		case !adv.Progress:
			delay = sweepDelay(s.now(), adv.changed)
		}
		rows, err := s.exec(ctx, q, stmtSnooze, snoozeArgs(id, workerID, delay, ""))
		if err != nil {
			return err
		}
		snoozed, err = oneTask(rows)
		return err
	})
	if err != nil {
		return adv, false, err
	}
	if swept && !skip {
		s.markSwept(id, locked)
	}
	s.afterAdvance(adv)
	s.settled(snoozed) // a cancel that won the snooze
	return adv, swept, nil
}
