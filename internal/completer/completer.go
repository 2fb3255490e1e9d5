// Package completer writes a worker's settlements: how each attempt its
// handlers ran ended, as engine.Settlement values. A Completer has one
// entry, Settle, whatever the task is (a workflow's step included: the
// engine advances it in the settlement's transaction), and one of three
// forms, chosen once by New from what the store answers:
//
//   - inline writes each settlement on the caller's goroutine (a worker
//     outside Run: WorkOne);
//   - ride, where the store settles on claims (SQLite): a success waits
//     for the claim loop's next claim, which writes it in the claim's
//     transaction, so that a busy worker's cycle is one request to
//     SQLite's single writer and one commit;
//   - batch, elsewhere (Postgres): a success is handed to a goroutine of
//     the completer's, which writes everything handed to it since its
//     last write in one statement (one transaction when a workflow's step
//     is among them), and the call that succeeded ends without waiting.
//
// A success that groups is a plain task's, or a workflow step's that
// added no steps (engine.Completion.Step: the write that carries it
// advances the workflow). Every form writes what it cannot group (a
// failure, a snooze, a step that added steps, a result too large or not
// JSON) inline, retried while
// its failure may pass (Transient) for up to a lease's length. The
// claim loop's share of the ride form (Take, Answer, SettleWaiting,
// OpenRide, EndClaims) is a no-op on the other forms.
package completer

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/wake"
)

// Store is what a completer writes through: an *engine.Store, or in tests
// one wrapped to watch or refuse its writes.
type Store interface {
	// Settle writes one settlement (engine.Store.Settle).
	Settle(ctx context.Context, st engine.Settlement) (engine.Settled, error)
	// SettleCompletions writes plain successes in one write of their own.
	SettleCompletions(ctx context.Context, cs []*engine.Completion) error
	// SettleOnClaim reports whether completions ride on claims.
	SettleOnClaim() bool
}

// Recorder is told a settlement's outcome, once: the settlement as
// written (a success the completer failed for good instead, its result
// not JSON, is the failure), what the write did, or why nothing was
// written, and whether it was handed over (told after Settle returned
// true, on the completer's goroutine). An interface, not a func, so
// that a worker passes its task's own pointer and a settlement costs no
// allocation for it.
type Recorder interface {
	Settled(written engine.Settlement, out engine.Settled, err error, handedOver bool)
}

// Config is what a Completer needs from its worker.
type Config struct {
	// Store is what the completer writes through.
	Store Store
	// Lease bounds how long a settlement is retried.
	Lease time.Duration
	// Rows, when set, is held around the statement of each grouped write
	// the completer makes on its own (the batch form's): the worker's heartbeat
	// updates many of its rows in one statement too, and two such
	// statements side by side can deadlock. (The ride form's writes go
	// through SQLite's single writer, which orders them anyway.)
	Rows sync.Locker
	// Busy is told of each back-off while the database is busy.
	Busy func(ctx context.Context, backoff time.Duration)
	// Wake, for the ride form, wakes the claim loop: a success waits for
	// its next claim.
	Wake func()
}

// Completer writes a worker's settlements; see the package doc.
type Completer interface {
	// Settle writes st and tells r its outcome once: before Settle
	// returns false; or, when later allows and the form takes st to
	// write with others after Settle returns (the batch form's plain
	// successes), on the completer's goroutine, and Settle returns true
	// at once.
	Settle(ctx context.Context, st engine.Settlement, r Recorder, later bool) (handedOver bool)

	// Start opens the form's grouping, ctx being the settlements' own;
	// Stop writes what is still handed over and returns a channel closed
	// once it has. Call Stop once, when no call can settle anything any
	// more.
	Start(ctx context.Context)
	Stop() <-chan struct{}

	// RidesClaims reports whether successes wait for the claim loop's
	// next claim (the ride form): the loop then wakes for them.
	RidesClaims() bool
	// OpenRide lets successes wait for the next claim, or not: the loop
	// opens it after a claim that drew several tasks or left calls
	// running or settling; a lone call's success does not wait.
	OpenRide(open bool)
	// Take removes the successes the next claim is to carry.
	Take() []*engine.Completion
	// Answer tells what Take returned how the claim that carried them
	// ended.
	Answer(taken []*engine.Completion, err error)
	// SettleWaiting writes the waiting successes in a write of their own,
	// the loop unable to claim now, and reports whether there were any.
	SettleWaiting(ctx context.Context) bool
	// EndClaims closes the ride: the loop has ended, and what still
	// waits is written on its own.
	EndClaims()
}

// New returns the Completer of cfg.Store's form: ride where the store
// settles on claims, batch elsewhere.
func New(cfg Config) Completer {
	w := &writer{cfg: cfg}
	if cfg.Store.SettleOnClaim() {
		return &ride{writer: w}
	}
	return newBatch(w)
}

// Inline returns the Completer that writes every settlement on its
// caller's goroutine.
func Inline(cfg Config) Completer { return &inline{writer: &writer{cfg: cfg}} }

// writer writes settlements one at a time, retried; every form has one.
type writer struct{ cfg Config }

// settle writes st on the caller's goroutine. A success whose result is
// not JSON fails for good instead: every attempt would fail the same way.
func (w *writer) settle(ctx context.Context, st engine.Settlement, r Recorder) {
	out, err := w.write(ctx, st)
	var se *cairnqtype.SerializationError
	if st.Outcome == engine.Succeeded && errors.As(err, &se) {
		st.Outcome, st.Retryable, st.Result = engine.Failed, false, nil
		st.Error = cairnqtype.ErrorEnvelope{
			Type: "SerializationError", Code: "unserializable_result", Details: map[string]any{},
			Message: "handler result is not JSON-serializable: " + se.Err.Error(),
		}
		out, err = w.write(ctx, st)
	}
	r.Settled(st, out, err, false)
}

// write writes st, again while it fails for a reason that may pass.
func (w *writer) write(ctx context.Context, st engine.Settlement) (out engine.Settled, err error) {
	err = w.retry(ctx, func() error {
		var err error
		out, err = w.cfg.Store.Settle(ctx, st)
		return err
	})
	return out, err
}

// retry runs a write again while it fails for a reason that may pass
// (Transient), for up to a lease's length: the heartbeat keeps the lease
// alive meanwhile where it can, and giving up early would leave the task
// to lease expiry and a second run of work that already finished.
func (w *writer) retry(ctx context.Context, write func() error) error {
	deadline := time.Now().Add(w.cfg.Lease)
	backoff := 10 * time.Millisecond
	for {
		err := write()
		if !Transient(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		if errors.Is(err, cairnqtype.ErrBusy) && w.cfg.Busy != nil {
			w.cfg.Busy(ctx, backoff)
		}
		wake.Sleep(ctx, backoff)
		backoff = min(backoff*2, time.Second)
	}
}

// grouped writes cs in one write of their own, retried. The store holds
// cfg.Rows around the statement that settles them (Completion.Rows), not
// while the write waits for a workflow's lock.
func (w *writer) grouped(ctx context.Context, cs []*engine.Completion) error {
	for _, c := range cs {
		c.Rows = w.cfg.Rows
	}
	return w.retry(ctx, func() error {
		return w.cfg.Store.SettleCompletions(ctx, cs)
	})
}

// errNoOutcome reports a grouped settlement its write neither settled nor
// refused, which the store's statements never leave.
var errNoOutcome = errors.New("cairnq: the settlement's write gave the task no outcome")

// outcomeOf is what the write that carried c made of it: settled (ok),
// or its lease gone (err a *LostLeaseError). ok is false, err nil, when
// it got neither.
func outcomeOf(c *engine.Completion) (out engine.Settled, ok bool, err error) {
	switch {
	case c.Err == nil && c.Status != "":
		return engine.Settled{Status: c.Status, Step: c.Step, Advanced: c.Advanced}, true, nil
	case errors.Is(c.Err, cairnqtype.ErrLostLease):
		return engine.Settled{}, true, c.Err
	}
	return engine.Settled{}, false, c.Err
}

// groupable returns st as a completion that may share a write with
// others: a success whose result is JSON and small enough
// (engine.HandOverResult), of a plain task or of a workflow's step that
// added no steps (the write that carries it advances the workflow in
// its transaction: engine.Completion.Step).
func groupable(st engine.Settlement) (*engine.Completion, bool) {
	if st.Outcome != engine.Succeeded {
		return nil, false
	}
	var step *engine.StepMark
	if engine.MayBeStep(st.Task) {
		mark, ok := engine.StepMarkOf(st.Task)
		if ok && len(st.Added) > 0 {
			// Steps it added may be refused, which fails the step
			// instead: Settle decides, in a write of its own.
			return nil, false
		}
		if ok {
			step = &mark
		}
	}
	enc, ok := engine.HandOverResult(st.Result)
	if !ok {
		return nil, false
	}
	return &engine.Completion{ID: st.Task.ID, WorkerID: st.WorkerID, Result: enc, Step: step}, true
}

// inline is the form that groups nothing.
type inline struct {
	*writer
	noClaims
}

func (f *inline) Settle(ctx context.Context, st engine.Settlement, r Recorder, _ bool) bool {
	f.settle(ctx, st, r)
	return false
}

func (f *inline) Start(context.Context) {}

func (f *inline) Stop() <-chan struct{} { return closed }

// noClaims is the claim loop's share for a form whose successes never
// wait for a claim.
type noClaims struct{}

func (noClaims) RidesClaims() bool                      { return false }
func (noClaims) OpenRide(bool)                          {}
func (noClaims) Take() []*engine.Completion             { return nil }
func (noClaims) Answer([]*engine.Completion, error)     {}
func (noClaims) SettleWaiting(ctx context.Context) bool { return false }
func (noClaims) EndClaims()                             {}

// closed is a channel closed from the start.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
