package engine

import (
	"context"
	"errors"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/group"
	"github.com/cairnq/cairnq-go/internal/workflowspec"
	"github.com/cairnq/cairnq-go/protocol"
)

// A workflow's submit writes its record and the steps that wait for
// nothing. The record's id is the submit's own, so nothing holds its key
// or its steps' keys and no one sees the workflow before it commits: no
// lock and no look, the rows in one insert_many and every key in one
// upsert_keys. Submits that arrive together go in one transaction
// (Store.workflowSubmits): inserting a task notifies, and on Postgres
// every commit that notifies holds the notify lock through its WAL
// flush, so one commit each made concurrent submits take turns at the
// disk. A workflow of more than groupedFirstSteps first steps is
// written alone, so that small submits do not wait behind its rows.

// groupedFirstSteps is the most first steps a workflow has that goes
// through the group of submits.
const groupedFirstSteps = 64

// preparedWorkflow is a workflow to submit, checked and built: its
// record's row and its first steps'.
type preparedWorkflow struct {
	rec   *insertRow
	steps *stepInserts
}

// newWorkflowSubmitter starts the store's group of workflow submits;
// Close on the store stops it.
func newWorkflowSubmitter(s *Store) *group.Grouper[*preparedWorkflow, *cairnqtype.Task] {
	return group.New(s.submitWorkflowsGrouped, func(w *preparedWorkflow) int {
		n := w.rec.weight()
		for _, r := range w.steps.rows {
			n += r.weight()
		}
		return n
	}, cairnqtype.ErrClosed)
}

// SubmitWorkflow writes a workflow's record and the steps that wait for
// nothing, in one transaction, and returns the record: all of it or
// nothing.
func (s *Store) SubmitWorkflow(ctx context.Context, p WorkflowParams) (*cairnqtype.Task, error) {
	w, err := s.prepareWorkflow(p)
	if err != nil {
		return nil, err
	}
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if len(w.steps.rows) > groupedFirstSteps {
		rec, queues, err := s.writeWorkflow(ctx, w)
		s.announceQueued(queues)
		return rec, err
	}
	out, err := s.workflowSubmits.Do(ctx, w)
	if err != nil {
		return nil, err
	}
	return out.Value, out.Err
}

// SubmitWorkflowTx is SubmitWorkflow inside a transaction the application
// holds, through sess. Postgres only.
func (s *Store) SubmitWorkflowTx(ctx context.Context, sess executor.Session, p WorkflowParams) (*cairnqtype.Task, error) {
	if err := s.needsPostgres(ctx, "SubmitWorkflowTx", sess); err != nil {
		return nil, err
	}
	w, err := s.prepareWorkflow(p)
	if err != nil {
		return nil, err
	}
	recs, _, err := s.insertWorkflows(ctx, pgQuerier{sess}, []*preparedWorkflow{w})
	if err != nil {
		return nil, err
	}
	return recs[0], nil
}

// submitWorkflowsGrouped writes ws in one write transaction. When the
// server refuses it for the data it carried (rowsRefused: nothing of it
// was committed), each workflow is written in one of its own, so that a
// refused row fails only its own caller. Any other error goes to every
// caller, whose outcome is then as uncertain as a lone transaction's
// would be: a commit whose answer was lost may have landed, and written
// again each would fail on its own rows.
func (s *Store) submitWorkflowsGrouped(ctx context.Context, ws []*preparedWorkflow) []group.Result[*cairnqtype.Task] {
	out := make([]group.Result[*cairnqtype.Task], len(ws))
	var recs []*cairnqtype.Task
	var queues []string
	err := s.be.write(ctx, func(q querier) error {
		var err error
		recs, queues, err = s.insertWorkflows(ctx, q, ws)
		return err
	})
	switch {
	case err == nil:
		for i, r := range recs {
			out[i].Value = r
		}
	case len(ws) == 1 || !rowsRefused(err):
		for i := range out {
			out[i].Err = err
		}
	default:
		for i, w := range ws {
			var qs []string
			out[i].Value, qs, out[i].Err = s.writeWorkflow(ctx, w)
			queues = append(queues, qs...)
		}
	}
	s.announceQueued(queues)
	return out
}

// writeWorkflow writes w in a write transaction of its own and returns
// its record and the queues its first steps went to.
func (s *Store) writeWorkflow(ctx context.Context, w *preparedWorkflow) (rec *cairnqtype.Task, queues []string, err error) {
	err = s.be.write(ctx, func(q querier) error {
		recs, qs, err := s.insertWorkflows(ctx, q, []*preparedWorkflow{w})
		if err == nil {
			rec, queues = recs[0], qs
		}
		return err
	})
	return rec, queues, err
}

// announceQueued tells this process's workers of the queues new steps
// went to.
func (s *Store) announceQueued(queues []string) {
	for _, queue := range queues {
		s.hub.Queued(queue)
	}
}

// prepareWorkflow checks p and builds its workflow's rows: the record,
// whose payload is the definition, and the steps that wait for nothing.
func (s *Store) prepareWorkflow(p WorkflowParams) (*preparedWorkflow, error) {
	const op = "submit workflow"
	if p.Def == nil {
		return nil, argError(op, "definition", "is nil")
	}
	def := *p.Def // the ledger the advance writes is this call's
	def.Seen, def.Ended = nil, ""
	if err := def.Validate(); err != nil {
		return nil, definitionError(op, err)
	}
	recP := SubmitParams{Name: WorkflowName, SubmitOptions: cairnqtype.SubmitOptions{
		Queue: WorkflowName, MaxAttempts: cairnqtype.MaxAttemptsLimit, Delay: firstCheck,
		Metadata: p.Metadata, CorrelationID: p.CorrelationID,
	}}
	rec, err := submitArgs(recP)
	if err != nil {
		return nil, err
	}
	stampID(rec, recP, s.now())
	dec := def.Advance(nil, false)
	def.Changed = s.now().UnixMilli()
	if rec.payload, err = definitionPayload(&def); err != nil {
		return nil, err
	}
	steps, err := buildSteps(op, rec.id, &def, dec.Insert, nil, s.now())
	var unreadable *unreadableError
	if errors.As(err, &unreadable) {
		return nil, unreadable.err // NewDefinition checked them: not expected
	}
	if err != nil {
		return nil, err
	}
	return &preparedWorkflow{rec: rec, steps: steps}, nil
}

// insertWorkflows writes ws in q's transaction and returns their records
// and the queues their steps went to. On Postgres every record and step
// goes in one insert_many; on SQLite each record goes by insert_task,
// which returns its row whole, and the steps by one insert_many. Every
// key (each record's, each step's and its ledger key) goes in one
// upsert_keys.
func (s *Store) insertWorkflows(ctx context.Context, q querier, ws []*preparedWorkflow) ([]*cairnqtype.Task, []string, error) {
	var rows []*insertRow // steps only on SQLite
	for _, w := range ws {
		if s.dialect == protocol.Postgres {
			rows = append(rows, w.rec)
		}
		rows = append(rows, w.steps.rows...)
	}
	out := make([]*cairnqtype.Task, len(rows))
	recs := make([]*cairnqtype.Task, len(ws))
	if s.dialect == protocol.Postgres {
		if err := s.insertManyPG(ctx, q, &manyBatch{ins: rows, maxBytes: insertManyBytes}, indexes(len(rows)), out); err != nil {
			return nil, nil, err
		}
	} else {
		for i, w := range ws {
			var err error
			if recs[i], err = s.insertTask(ctx, q, w.rec); err != nil {
				return nil, nil, err
			}
		}
		if err := s.insertManySQLite(ctx, q, rows, indexes(len(rows)), out); err != nil {
			return nil, nil, err
		}
	}
	var keys, to, queues []string
	at := 0
	for i, w := range ws {
		if s.dialect == protocol.Postgres {
			recs[i] = out[at]
			at++
		}
		keys, to = append(keys, workflowspec.WorkflowKey(recs[i].ID)), append(to, recs[i].ID)
		for j := range w.steps.rows {
			t := out[at]
			at++
			keys, to, queues = append(keys, w.steps.keys[j]), append(to, t.ID), append(queues, t.Queue)
		}
		keys, to = append(keys, w.steps.ledgers...), append(to, w.steps.records...)
	}
	return recs, queues, s.pointKeys(ctx, q, keys, to)
}

// indexes is 0, 1, ..., n-1.
func indexes(n int) []int {
	at := make([]int, n)
	for i := range at {
		at[i] = i
	}
	return at
}
