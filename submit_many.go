package cairnq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// SubmitItem is one task of a SubmitMany batch: Submit's arguments as a
// value. The zero Options are Submit's nil options.
type SubmitItem struct {
	// Name is the task's name. Required.
	Name string
	// Payload is any JSON-encodable value; nil is JSON {}.
	Payload any
	// Options are the task's own options: queue, key and conflict
	// strategy, attempts, priority, delay, metadata, links.
	Options SubmitOptions
}

// MaxSubmitMany is the most tasks one SubmitMany call takes; a longer
// batch is an *ArgumentError and nothing is written.
const MaxSubmitMany = cairnqtype.MaxSubmitMany

// SubmitMany stores many tasks in one call and one transaction, each
// exactly as Submit would store it (its own key and conflict strategy,
// hooks, links, delay, priority), and returns them in items' order.
//
// The items apply in order, as the same Submits one after another would,
// so an item whose key an earlier item of the batch used meets the task
// that item left: ConflictReuse and ConflictReuseSucceeded return it
// (the same task twice in the result), ConflictReplace cancels it and
// writes a new one (the earlier item's result is the task as it was
// written, queued), ConflictReject fails the batch.
//
// A bad item (invalid input, a reject-strategy key that is taken, a hook
// refusing it) fails the whole call with a *SubmitItemError naming its
// index, and nothing is written. A batch longer than MaxSubmitMany is an
// *ArgumentError. An empty batch writes nothing and returns an empty
// slice.
//
// Every SubmitHook runs once per item, in items' order, and each item's
// next returns once the whole batch is written (or has failed): every
// item's hooks run up to next before any item is written. So a hook must
// not hold across next what another item's hook waits for (a mutex, a
// semaphore smaller than the batch): such a batch waits until ctx ends,
// then fails with a *SubmitItemError wrapping ctx's error and writes
// nothing. A hook that calls next twice gets an error the second time,
// and one that calls next after its item's SubmitMany returned gets an
// error and writes nothing. The
// batch is written under SubmitMany's ctx: a context a hook passes to
// next is not the write's. Hooks finish in items' order after the write;
// an error a hook returns then, once its task is written, is returned as
// a *SubmitItemError beside the tasks (which are committed: the error
// cannot undo them, as it cannot undo Submit's). A hook that returns a
// task without calling next has that task in the result, and nothing of
// its own written.
//
// When a queue is gated (Options.MaxQueueDepth), the batch waits for room
// once per queue, as one Submit does, and may take the queue past its
// limit by up to its number of tasks for that queue; the submits after it
// see the depth it left. A queue that stays full fails the batch with
// ErrQueueFull, naming the first item bound there.
//
// On Postgres, keyed items take their keys' advisory locks first, all in
// one statement and in one fixed order, so two batches naming the same
// keys in different orders never deadlock; the unkeyed items are one
// multi-row insert.
func (c *Client) SubmitMany(ctx context.Context, items []SubmitItem) ([]*Task, error) {
	if err := checkCtx(ctx, "submit many"); err != nil {
		return nil, err
	}
	return c.submitManyThrough(ctx, items, false, func(ctx context.Context, subs []*Submission) ([]*Task, error) {
		ps := manyParams(subs)
		if c.gate != nil {
			perQueue := map[string]int{} // the engine admits each queue once
			for _, s := range subs {
				perQueue[queueOf(s.Options)]++
			}
			admit := func(ctx context.Context, queue string) error {
				return c.gate.acquireMany(ctx, queue, perQueue[queue])
			}
			for i := range ps {
				ps[i].Admit = admit
			}
		}
		return tasksResult(c.store.SubmitMany(ctx, ps))
	})
}

// SubmitManyTx is SubmitMany inside a transaction the application holds,
// through sess (as SubmitTx): workers see the tasks once the application
// commits, and a rollback leaves none. A batch that fails leaves nothing
// of itself in the transaction, which stays usable (the batch runs under
// a savepoint of it); sess must therefore be in a transaction. Postgres
// only: on SQLite it returns ErrUnsupported.
func (c *Client) SubmitManyTx(ctx context.Context, sess executor.Session, items []SubmitItem) ([]*Task, error) {
	if err := checkCtx(ctx, "submit many"); err != nil {
		return nil, err
	}
	return c.submitManyThrough(ctx, items, true, func(ctx context.Context, subs []*Submission) ([]*Task, error) {
		return tasksResult(c.store.SubmitManyTx(ctx, sess, manyParams(subs)))
	})
}

// queueOf is the queue a submit with o goes to.
func queueOf(o SubmitOptions) string {
	if o.Queue == "" {
		return DefaultQueue
	}
	return o.Queue
}

// manyParams is what the engine submits for subs.
func manyParams(subs []*Submission) []engine.SubmitParams {
	ps := make([]engine.SubmitParams, len(subs))
	for i, s := range subs {
		ps[i] = submitParams(s.Name, s.Payload, s.Options)
	}
	return ps
}

// Item returns the SubmitItem of a task with payload p, for a batch of
// Client.SubmitMany that mixes tasks or gives each its own options.
func (d TaskDef[P, R]) Item(p P, opts *SubmitOptions) SubmitItem {
	it := SubmitItem{Name: d.Name, Payload: p}
	if opts != nil {
		it.Options = *opts
	}
	return it
}

// SubmitMany submits one task per payload, all with opts, as
// Client.SubmitMany. opts must not name a key: a key names one task
// (build the items with Item to key each); one is an *ArgumentError.
func (d TaskDef[P, R]) SubmitMany(ctx context.Context, c *Client, ps []P, opts *SubmitOptions) ([]*Task, error) {
	if opts != nil && opts.Key != "" && len(ps) > 1 {
		return nil, &ArgumentError{Op: "submit many", Arg: "key", Reason: "names one task, and would be every task's: give each its own with TaskDef.Item"}
	}
	items := make([]SubmitItem, len(ps))
	for i, p := range ps {
		items[i] = d.Item(p, opts)
	}
	return c.SubmitMany(ctx, items)
}

// submitManyThrough runs the client's hooks around each item of a batch
// and writes, with insert, the items whose chains reached their end.
func (c *Client) submitManyThrough(ctx context.Context, items []SubmitItem, inTx bool, insert func(ctx context.Context, subs []*Submission) ([]*Task, error)) ([]*Task, error) {
	if len(items) > MaxSubmitMany {
		return nil, &ArgumentError{Op: "submit many", Arg: "batch",
			Reason: fmt.Sprintf("has %d tasks, the limit is %d; split it into several calls", len(items), MaxSubmitMany)}
	}
	subs := make([]*Submission, len(items))
	for i, it := range items {
		subs[i] = &Submission{Name: it.Name, Payload: it.Payload, Options: it.Options, InTx: inTx}
	}
	if len(c.hooks) == 0 || len(subs) == 0 {
		return insert(ctx, subs)
	}
	return (&hookedBatch{c: c, subs: subs}).run(ctx, insert)
}

// hookedBatch runs a batch's hook chains: each on a goroutine of its own,
// started one after another, and each parked in its innermost next until
// the batch is written, so that hooks see one write per item while the
// batch makes one.
type hookedBatch struct {
	c      *Client
	subs   []*Submission
	chains []*hookedChain
	// over is closed when run returns: a next called after that (by a
	// hook that left it running on a goroutine of its own) returns
	// errNextAfterBatch rather than waiting for a write that is done.
	over chan struct{}
}

// errNextAfterBatch is what a next called after its batch ended returns.
var errNextAfterBatch = errors.New("cairnq: a SubmitHook called next after its item's SubmitMany returned; nothing was written for it")

// hookedChain is one item's chain.
type hookedChain struct {
	called  atomic.Bool
	arrived chan struct{} // closed by next: the item waits for the write
	release chan chainEnd // the write's outcome, for next to return
	done    chan chainEnd // what the chain returned (or its panic)
	task    *Task         // the chain's result
	err     error
}

type chainEnd struct {
	task     *Task
	err      error
	panicked bool
	panicVal any
}

// start runs sub's chain on a goroutine and returns once its next was
// called or the chain returned without calling it. It returns ctx's error
// (and the chain still running) when ctx ends first: a hook waiting for
// what an earlier item's hook holds across its next (a mutex, a
// semaphore smaller than the batch) would otherwise wait forever.
func (b *hookedBatch) start(ctx context.Context, sub *Submission) (h *hookedChain, reached bool, err error) {
	h = &hookedChain{arrived: make(chan struct{}), release: make(chan chainEnd, 1), done: make(chan chainEnd, 1)}
	next := func(ctx context.Context) (*Task, error) {
		if !h.called.CompareAndSwap(false, true) {
			return nil, errors.New("cairnq: a SubmitHook called next twice for one item of a batch")
		}
		close(h.arrived)
		select {
		case r := <-h.release:
			return r.task, r.err
		case <-b.over:
			return nil, errNextAfterBatch
		}
	}
	go func() { // owned by run, which waits for done
		end := chainEnd{panicked: true}
		defer func() {
			if end.panicked {
				end.panicVal = recover()
			}
			h.done <- end
		}()
		end.task, end.err = b.c.submitThrough(ctx, sub, func(ctx context.Context, _ *Submission) (*Task, error) { return next(ctx) })
		end.panicked = false
	}()
	select {
	case <-h.arrived:
		return h, true, nil
	case end := <-h.done:
		h.done <- end // for finish
		return h, false, nil
	case <-ctx.Done():
		return h, false, ctx.Err()
	}
}

// finish releases h's next with r and waits for its chain to return.
func (h *hookedChain) finish(r chainEnd, reached bool) chainEnd {
	if reached {
		h.release <- r
	}
	end := <-h.done
	h.task, h.err = end.task, end.err
	return end
}

func (b *hookedBatch) run(ctx context.Context, insert func(ctx context.Context, subs []*Submission) ([]*Task, error)) ([]*Task, error) {
	b.over = make(chan struct{})
	endBatch := sync.OnceFunc(func() { close(b.over) })
	defer endBatch()
	var at []int // the indexes of the items to write
	reached := make([]bool, len(b.subs))
	for i, sub := range b.subs {
		h, ok, err := b.start(ctx, sub)
		b.chains = append(b.chains, h)
		reached[i] = ok
		if err != nil {
			// The parked chains return with ctx's error, releasing
			// what they held; then this one can end too: its next, if
			// it calls it, returns at once.
			ierr := &SubmitItemError{Index: i, Err: err}
			b.finishAll(at, reached, nil, ierr)
			endBatch()
			if last := <-h.done; last.panicked {
				panic(last.panicVal)
			}
			return nil, ierr
		}
		if ok {
			at = append(at, i)
			continue
		}
		end := h.finish(chainEnd{}, false)
		if end.panicked || end.err != nil {
			err := &SubmitItemError{Index: i, Err: end.err}
			b.finishAll(at, reached, nil, err)
			if end.panicked {
				panic(end.panicVal)
			}
			return nil, err
		}
	}
	subs := make([]*Submission, len(at))
	for j, i := range at {
		subs[j] = b.subs[i]
	}
	tasks, err := insert(ctx, subs)
	var item *SubmitItemError
	if errors.As(err, &item) && item.Index >= 0 && item.Index < len(at) {
		err = &SubmitItemError{Index: at[item.Index], Err: item.Err}
	}
	if perr := b.finishAll(at, reached, tasks, err); err == nil && perr != nil {
		return b.results(), perr
	}
	if err != nil {
		return nil, err
	}
	return b.results(), nil
}

// finishAll releases the parked chains at (in order) with the write's
// outcome, tasks in at's order or err, and waits for each to return. It
// re-panics a chain's panic once all have returned, and returns the first
// error a chain returned after its task was written.
func (b *hookedBatch) finishAll(at []int, reached []bool, tasks []*Task, err error) error {
	var first error
	var panicked *chainEnd
	for j, i := range at {
		r := chainEnd{err: err}
		if err == nil {
			r.task = tasks[j]
		}
		end := b.chains[i].finish(r, reached[i])
		if end.panicked && panicked == nil {
			panicked = &end
		}
		if end.err != nil && first == nil && err == nil {
			first = &SubmitItemError{Index: i, Err: end.err}
		}
	}
	if panicked != nil {
		panic(panicked.panicVal)
	}
	return first
}

// results are the chains' results in the batch's order.
func (b *hookedBatch) results() []*Task {
	out := make([]*Task, len(b.chains))
	for i, h := range b.chains {
		out[i] = h.task
	}
	return out
}
