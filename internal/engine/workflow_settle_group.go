package engine

import (
	"context"
	"sync"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/group"
	"github.com/cairnq/cairnq-go/internal/workflowspec"
	"github.com/cairnq/cairnq-go/protocol"
)

// A workflow step's success that added no steps is settled in a group of
// them (Store.stepSettles): one transaction holds the locks of their
// workflows, settles their rows in one complete_many and advances each
// from its dependents (advanceFromSteps), the reads and writes of the
// group's advances shared. A step's settlement holds its workflow's
// lock until it commits, so one transaction each would make the steps
// of one workflow settle one commit at a time.

// stepSuccess is one workflow step's success on its way to a group.
type stepSuccess struct {
	st     Settlement
	mark   StepMark
	result any // EncodeResult's
}

// newStepSettler starts the store's group of step successes; Close on
// the store stops it.
func newStepSettler(s *Store) *group.Grouper[*stepSuccess, Settled] {
	return group.New(s.settleStepsGrouped, nil, cairnqtype.ErrClosed)
}

// settleStepGrouped writes a step's success through the store's groups
// of them.
func (s *Store) settleStepGrouped(ctx context.Context, st Settlement, mark StepMark) (Settled, error) {
	res, err := EncodeResult(st.Result)
	if err != nil {
		return Settled{}, err
	}
	if err := checkCtx(ctx); err != nil {
		return Settled{}, err
	}
	out, err := s.stepSettles.Do(ctx, &stepSuccess{st: st, mark: mark, result: res})
	if err != nil {
		return Settled{}, err
	}
	return out.Value, out.Err
}

// settleStepsGrouped settles the successes in ss in one write
// transaction (settleStepsIn), holding each of their workers' row locks
// as a group of durable steps does: the group's complete_many updates
// many workers' rows at once, as each worker's heartbeat does its own.
// When the transaction fails, each success is written in one of its
// own, so that one success's error is its own alone.
func (s *Store) settleStepsGrouped(ctx context.Context, ss []*stepSuccess) []group.Result[Settled] {
	out := make([]group.Result[Settled], len(ss))
	err := func() error {
		locks := make([]sync.Locker, len(ss))
		for i, x := range ss {
			locks[i] = x.st.Rows
		}
		defer lockRows(locks)()
		return s.be.write(ctx, func(q querier) error {
			return s.settleStepsIn(ctx, q, ss, out)
		})
	}()
	if err != nil {
		for i, x := range ss {
			stmt, args, err := s.settleStatement(x.st)
			if err == nil {
				err = s.be.write(ctx, func(q querier) error {
					var err error
					out[i].Value, err = s.settleStepIn(ctx, q, x.st, x.mark, stmt, args, true)
					return err
				})
			}
			out[i].Err = err
		}
	}
	for i := range out {
		if out[i].Err == nil {
			s.settled(out[i].Value.Task)
			s.afterAdvance(out[i].Value.Advanced)
		}
	}
	return out
}

// settleStepsIn is settleStepsGrouped's transaction on q: the workflows'
// locks in lock_keys' order (Postgres; SQLite's writer holds the
// database), the rows settled together, then the advances of those that
// succeeded, each one's outcome into out.
func (s *Store) settleStepsIn(ctx context.Context, q querier, ss []*stepSuccess, out []group.Result[Settled]) error {
	if s.dialect == protocol.Postgres {
		locks := make([]string, len(ss))
		for i, x := range ss {
			locks[i] = workflowspec.WorkflowKey(x.mark.Record)
		}
		if _, err := s.exec(ctx, q, stmtLockKeys, protocol.Args{"keys": pgArray(locks)}); err != nil {
			return err
		}
	}
	cs := make([]*Completion, len(ss))
	for i, x := range ss {
		cs[i] = &Completion{ID: x.st.Task.ID, WorkerID: x.st.WorkerID, Result: x.result}
	}
	if err := s.settleIn(ctx, q, cs); err != nil {
		return err
	}
	var as []*stepAdvance
	var at []int // the index in ss of each of as
	for i, x := range ss {
		if cs[i].Err != nil {
			out[i] = group.Result[Settled]{Err: cs[i].Err}
			continue
		}
		t := *x.st.Task
		t.Status = cs[i].Status
		mark := x.mark
		out[i] = group.Result[Settled]{Value: Settled{Status: t.Status, Task: &t, Step: &mark}}
		if t.IsTerminal() {
			as, at = append(as, &stepAdvance{mark: x.mark, workerID: x.st.WorkerID}), append(at, i)
		}
	}
	if len(as) == 0 {
		return nil
	}
	if err := s.advanceFromSteps(ctx, q, "settle step", as); err != nil {
		return err
	}
	for j, a := range as {
		out[at[j]].Value.Advanced = a.adv
	}
	return nil
}
