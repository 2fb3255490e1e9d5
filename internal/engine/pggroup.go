package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/protocol"
)

// grouper runs the requests arriving together as one group: one
// statement, so one round trip (and for a write one commit) for all of
// them. On Postgres a write each would pay both per request and, since
// every commit that notifies holds Postgres's notify lock through its WAL
// flush, take turns committing; status reads group on both backends. A
// lone request is flushed at once, so grouping never adds latency to it;
// requests arriving while a flush is in flight go into the next one. Its
// goroutine is owned by whoever made it (the backend, or the Store for
// status reads) and stopped by close.
type grouper[In any] struct {
	reqs      chan *groupReq[In]
	quit      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	ctx       context.Context
	cancel    context.CancelFunc
	// flush runs one group and returns one result per input, in order.
	flush func(ctx context.Context, ins []In) []groupResult
	// weigh, when set, is an input's size in bytes of statement
	// arguments; a group stops growing at maxGroupBytes.
	weigh func(In) int
}

type groupReq[In any] struct {
	ctx   context.Context // the caller's
	in    In
	reply chan groupResult
	state atomic.Int32 // reqQueued, reqStarted or reqAbandoned, as for SQLite writes
}

// groupResult is one request's share of a flush: its row, row i of rows
// (rows nil when the statement left it out), or the error that stopped
// it. The rows of a flush are shared by its requests, read by position
// where the executor allows it, so a group of settlements builds no map
// per row.
type groupResult struct {
	rows rowSet
	i    int
	err  error
}

// Bounds of one group: requests, and bytes of arguments when the grouper
// weighs its inputs (a text[] literal is built whole on the client and
// Postgres refuses a value past 1GB).
const (
	maxGroup      = 512
	maxGroupBytes = 8 << 20
)

func newGrouper[In any](flush func(ctx context.Context, ins []In) []groupResult, weigh func(In) int) *grouper[In] {
	g := &grouper[In]{
		reqs: make(chan *groupReq[In], maxGroup), quit: make(chan struct{}), done: make(chan struct{}),
		flush: flush, weigh: weigh,
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	go g.run()
	return g
}

// do runs in through the next group. A caller that gives up before its
// group starts is left out of it, so its write never lands. Once started,
// the group's outcome is its outcome, and the caller waits for it; the
// group's statement is canceled when every caller in it has given up, so
// a lone request ends with its caller's context as a statement of its own
// would.
func (g *grouper[In]) do(ctx context.Context, in In) (groupResult, error) {
	if err := checkCtx(ctx); err != nil {
		return groupResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return groupResult{}, err
	}
	req := &groupReq[In]{ctx: ctx, in: in, reply: make(chan groupResult, 1)}
	select {
	case g.reqs <- req:
	case <-g.quit:
		return groupResult{}, ErrClosed
	case <-ctx.Done():
		return groupResult{}, ctx.Err()
	}
	var res groupResult
	select {
	case res = <-req.reply:
	case <-g.done:
		select {
		case res = <-req.reply:
		default:
			return groupResult{}, ErrClosed
		}
	case <-ctx.Done():
		if req.state.CompareAndSwap(reqQueued, reqAbandoned) {
			return groupResult{}, ctx.Err()
		}
		res = <-req.reply // already sent to the database: its outcome is the truth
	}
	return res, res.err
}

func (g *grouper[In]) run() {
	defer close(g.done)
	batch := make([]*groupReq[In], 0, maxGroup)
	var weigh func(*groupReq[In]) int
	if g.weigh != nil {
		weigh = func(r *groupReq[In]) int { return g.weigh(r.in) }
	}
	for {
		select {
		case <-g.quit:
			for {
				select {
				case r := <-g.reqs:
					r.reply <- groupResult{err: ErrClosed}
				default:
					return
				}
			}
		case r := <-g.reqs:
			batch = append(batch[:0], r)
		}
		settleArrivals(g.reqs)
		batch = gather(g.reqs, batch, maxGroup, weigh, maxGroupBytes)
		g.flushLive(batch)
		clear(batch)
	}
}

// settleArrivals yields the processor while requests keep arriving on ch,
// a few times at most, before a group is gathered. The calls of one claim
// tend to finish together, and their settlements, already runnable, then
// join this group instead of waiting for the next one. With nothing else
// runnable a yield returns at once, so a lone request loses nothing.
func settleArrivals[T any](ch chan T) {
	for range 4 {
		n := len(ch)
		runtime.Gosched()
		if len(ch) == n {
			return
		}
	}
}

// flushLive flushes the requests of batch whose callers still wait, under
// a context that ends when all of them have given up.
func (g *grouper[In]) flushLive(batch []*groupReq[In]) {
	live := batch[:0:0]
	ins := make([]In, 0, len(batch))
	for _, r := range batch {
		if r.state.CompareAndSwap(reqQueued, reqStarted) {
			live = append(live, r)
			ins = append(ins, r.in)
		}
	}
	if len(live) == 0 {
		return
	}
	select {
	case <-g.quit: // closing: quit and this batch were both ready
		for _, r := range live {
			r.reply <- groupResult{err: ErrClosed}
		}
		return
	default:
	}
	ctx, cancel := context.WithCancel(g.ctx)
	defer cancel()
	// One watch per distinct caller context, weighted by its callers: a
	// worker settles every call under the same context, and a watch each
	// would register and unregister hundreds of callbacks per group.
	waiting := atomic.Int32{}
	waiting.Store(int32(len(live)))
	type watch struct {
		ctx      context.Context
		n        int32
		distinct bool // a context type == cannot compare: never shared
	}
	var watches []watch
next:
	for _, r := range live {
		for i := range watches {
			if !watches[i].distinct && watches[i].ctx == r.ctx {
				watches[i].n++
				continue next
			}
		}
		watches = append(watches, watch{r.ctx, 1, !reflect.TypeOf(r.ctx).Comparable()})
	}
	for _, w := range watches {
		stop := context.AfterFunc(w.ctx, func() {
			if waiting.Add(-w.n) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	results := g.flush(ctx, ins)
	closing := g.ctx.Err() != nil
	for i, r := range live {
		if closing && results[i].err != nil {
			results[i].err = fmt.Errorf("%w (%v)", ErrClosed, results[i].err)
		}
		r.reply <- results[i]
	}
}

// close stops the grouper. A group already sent to the database gets
// groupCloseGrace to finish: canceling it at once would fail callers whose
// own contexts are live for a statement that would have committed. One
// still running then (a server that stopped answering) is canceled, and
// its callers get ErrClosed.
func (g *grouper[In]) close() {
	g.closeOnce.Do(func() {
		close(g.quit)
		t := time.NewTimer(groupCloseGrace)
		defer t.Stop()
		select {
		case <-g.done:
		case <-t.C:
		}
		g.cancel()
		<-g.done
	})
}

// groupCloseGrace is how long close waits for a group in flight.
const groupCloseGrace = 5 * time.Second

// byID pairs each id with its row among rows (matched on the "id"
// column); an id with no row gets none. When err is set, every id gets
// it and no row.
func byID(ids []string, rows rowSet, err error) []groupResult {
	out := make([]groupResult, len(ids))
	if err != nil {
		for i := range out {
			out[i].err = err
		}
		return out
	}
	at := make(map[string]int, rows.len())
	for i := range rows.len() {
		if id, ok, _ := asString("id", rows.value(i, "id")); ok {
			at[id] = i
		}
	}
	for i, id := range ids {
		if r, ok := at[id]; ok {
			out[i].rows, out[i].i = rows, r
		}
	}
	return out
}

// ---------------------------------------------------------------- completions

func newCompleter(s *Store, ex executor.Executor) *grouper[*Completion] {
	return newGrouper(func(ctx context.Context, cs []*Completion) []groupResult {
		return s.completeManyPG(ctx, pgQuerier{ex}, cs)
	}, nil)
}

// completeManyPG settles cs with one complete_many on q and returns one
// result per completion, in order: its row (id, status), nil when its
// lease was gone, or the statement's error.
func (s *Store) completeManyPG(ctx context.Context, q querier, cs []*Completion) []groupResult {
	ids := make([]string, len(cs))
	workers := make([]string, len(cs))
	results := make([]any, len(cs))
	for i, c := range cs {
		ids[i], workers[i], results[i] = c.ID, c.WorkerID, c.Result
	}
	rows, err := s.execRows(ctx, q, stmtCompleteMany,
		protocol.Args{"ids": pgArray(ids), "worker_ids": pgArray(workers), "results": pgArrayNullable(results)})
	return byID(ids, rows, err)
}

// completeGrouped settles one task through the backend's completion
// groups. A row the statement did not return is a lease that was gone.
func (b *pgBackend) completeGrouped(ctx context.Context, id, workerID string, result any) (TaskRef, error) {
	res, err := b.completer.do(ctx, &Completion{ID: id, WorkerID: workerID, Result: result})
	if err != nil {
		return TaskRef{}, err
	}
	if res.rows == nil {
		return TaskRef{}, &LostLeaseError{ID: id}
	}
	return refAt(res.rows, res.i)
}

// ---------------------------------------------------------------- submits

// insertGrouped stores one unkeyed submit (insertArgs) through the
// backend's insert groups.
func (b *pgBackend) insertGrouped(ctx context.Context, ins protocol.Args) (*Task, error) {
	res, err := b.inserter.do(ctx, ins)
	if err != nil {
		return nil, err
	}
	return taskAt(res.rows, res.i)
}

// newInserter groups unkeyed submits (insertArgs) into insert_many. A lone
// submit runs insert_task, exactly as before grouping existed. When the
// server refuses the group's statement for its data (rowsRefused: nothing
// of it was committed), each submit runs alone, so a row the server
// refuses fails only its own caller. Any other error goes to every caller,
// whose outcome is then as uncertain as a lone statement's would be.
func newInserter(s *Store, ex executor.Executor, log *slog.Logger) *grouper[protocol.Args] {
	one := func(ctx context.Context, ins protocol.Args) groupResult {
		rows, err := s.execRows(ctx, pgQuerier{ex}, stmtInsertTask, ins)
		if err == nil && rows.len() == 0 {
			err = errors.New("cairnq: insert returned no row")
		}
		if err != nil {
			return groupResult{err: err}
		}
		return groupResult{rows: rows}
	}
	flush := func(ctx context.Context, all []protocol.Args) []groupResult {
		if len(all) == 1 {
			return []groupResult{one(ctx, all[0])}
		}
		// insert_many takes each of insert_task's parameters X as each_X,
		// the text[] of its values across the group.
		args := protocol.Args{}
		for _, name := range insertParams {
			col := make([]any, len(all))
			for i, ins := range all {
				col[i] = textOf(ins[name])
			}
			args["each_"+name] = pgArrayNullable(col)
		}
		ids := make([]string, len(all))
		for i, ins := range all {
			ids[i], _ = ins["id"].(string)
		}
		rows, err := s.execRows(ctx, pgQuerier{ex}, stmtInsertMany, args)
		if rowsRefused(err) {
			out := make([]groupResult, len(all))
			refused := 0
			for i, ins := range all {
				if out[i] = one(ctx, ins); out[i].err != nil {
					refused++
				}
			}
			if refused == 0 {
				// No row is at fault: insert_many itself does not work
				// here (an executor mangling text[] arguments, say), and
				// every group now costs a statement per submit.
				log.WarnContext(ctx, "cairnq: grouped submits were refused, then each inserted alone; insert_many does not work through this executor",
					"submits", len(all), "err", err)
			}
			return out
		}
		out := byID(ids, rows, err)
		for i := range out {
			if out[i].rows == nil && out[i].err == nil {
				out[i].err = errors.New("cairnq: insert_many returned no row for " + ids[i])
			}
		}
		return out
	}
	weigh := func(ins protocol.Args) int {
		payload, _ := ins["payload"].(string)
		metadata, _ := ins["metadata"].(string)
		return len(payload) + len(metadata)
	}
	return newGrouper(flush, weigh)
}

// rowsRefused reports whether err is the server refusing a statement for
// the data it carried (SQLSTATE classes 22 data exception, 23 integrity
// constraint violation, 54 program limit exceeded). The statement then
// failed as a whole and took no effect.
func rowsRefused(err error) bool {
	var se interface{ SQLState() string }
	if !errors.As(err, &se) {
		return false
	}
	class := se.SQLState()[:min(2, len(se.SQLState()))]
	return class == "22" || class == "23" || class == "54"
}

// insertParams are the parameters insertArgs gives insert_task; every
// value is a string, an int64 or nil (TestInsertParamsCoverInsertArgs).
var insertParams = []string{"id", "name", "queue", "payload", "metadata", "max_attempts", "priority", "delay_ms", "parent_id", "root_id", "correlation_id"}

// textOf is v, one of insertArgs' values, as an element of a text[]
// literal: strings as they are, int64 in decimal, nil as NULL.
func textOf(v any) any {
	if n, ok := v.(int64); ok {
		return strconv.FormatInt(n, 10)
	}
	return v
}
