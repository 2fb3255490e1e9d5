package engine

import (
	"context"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/group"
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
	return group.New(s.settleStepsGrouped, func(x *stepSuccess) int {
		r, _ := x.result.(string)
		return len(r) // a group stops growing at group.MaxBytes of results
	}, cairnqtype.ErrClosed)
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
// transaction (settleStepsIn: settleIn, which holds their workers' row
// locks around the complete_many that updates many workers' rows at
// once, as each worker's heartbeat does its own). When the transaction
// fails, each success is written in one of its own, so that one
// success's error is its own alone.
func (s *Store) settleStepsGrouped(ctx context.Context, ss []*stepSuccess) []group.Result[Settled] {
	out := make([]group.Result[Settled], len(ss))
	err := s.be.write(ctx, func(q querier) error {
		return s.settleStepsIn(ctx, q, ss, out)
	})
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

// settleStepsIn is settleStepsGrouped's transaction on q: settleIn of
// the successes as completions of steps (their workflows' locks, their
// rows, their advances), each one's outcome into out.
func (s *Store) settleStepsIn(ctx context.Context, q querier, ss []*stepSuccess, out []group.Result[Settled]) error {
	cs := make([]*Completion, len(ss))
	for i, x := range ss {
		cs[i] = &Completion{ID: x.st.Task.ID, WorkerID: x.st.WorkerID, Result: x.result, Step: &x.mark, Rows: x.st.Rows}
	}
	if err := s.settleIn(ctx, q, cs); err != nil {
		return err
	}
	for i, x := range ss {
		if cs[i].Err != nil {
			out[i] = group.Result[Settled]{Err: cs[i].Err}
			continue
		}
		t := *x.st.Task
		t.Status = cs[i].Status
		out[i] = group.Result[Settled]{Value: Settled{Status: t.Status, Task: &t, Step: cs[i].Step, Advanced: cs[i].Advanced}}
	}
	return nil
}
