package cairnq

import (
	"context"
	"errors"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// SubmitTx submits a task inside a transaction the application holds: sess
// is an adapter's session over that transaction (cairnqpgx.TxSession,
// sqlexec.TxSession, the gorm and bun adapters' equivalents). Workers see
// the task only once the application commits; a rollback leaves no task.
// Postgres only: on SQLite it returns ErrUnsupported.
func (c *Client) SubmitTx(ctx context.Context, sess executor.Session, name string, payload any, opts *SubmitOptions) (*Task, error) {
	s := newSubmission(name, payload, opts, true)
	return c.submitThrough(ctx, s, func(ctx context.Context, s *Submission) (*Task, error) {
		return taskResult(c.store.SubmitTx(ctx, sess, submitParams(s.Name, s.Payload, s.Options)))
	})
}

// SucceedIn settles the task in a transaction cairnq opens: fn writes the
// application's rows through sess (adapters offer typed forms handing fn
// the driver's own transaction), then the settlement runs as the last
// statement with fn's result. Both commit or neither does: a lost lease
// rolls fn's writes back and returns ErrLostLease; an error from fn rolls
// back and is returned, leaving the task for the worker to settle by how
// the handler ends. Settling twice is a no-op. Postgres only.
func (tc *TaskContext) SucceedIn(ctx context.Context, fn func(ctx context.Context, sess executor.Session) (any, error)) error {
	st := tc.settlement(engine.Succeeded)
	err := tc.settle(func() error {
		out, err := tc.w.st.SettleWith(ctx, st, fn)
		noteRefusal(tc, out)
		if err == nil {
			// Refused steps: nothing of fn's transaction committed, and
			// the step failed for good.
			tc.w.logSettled(ctx, tc, st, out)
		}
		return err
	})
	if err != nil {
		return err
	}
	return tc.refusal()
}

// SucceedTx settles the task inside a transaction the application holds,
// through sess: the settlement commits or rolls back with the
// application's own writes. For a workflow's step the advance runs in
// that transaction too, and holds the workflow's lock until the
// application commits: commit soon. Steps the handler added that the
// workflow refuses are an error wrapping an *ArgumentError, with nothing
// written: roll back, and the step fails for good once the handler
// returns. The context counts as settled from here on; if
// the application then rolls back, the task keeps its lease until it
// expires and is delivered again (at least once). Postgres only.
func (tc *TaskContext) SucceedTx(ctx context.Context, sess executor.Session, result any) error {
	st := tc.settlement(engine.Succeeded)
	st.Result = result
	return tc.settle(func() error {
		_, err := tc.w.st.SettleTx(ctx, sess, st)
		var refused *engine.AddedStepsError
		if errors.As(err, &refused) {
			// Nothing was written, but the application's transaction
			// holds the workflow's lock, so the step cannot fail from
			// here; it fails for good when the handler returns
			// (failureOf), after the application has rolled back.
			tc.refuse(refused)
		}
		return err
	})
}
