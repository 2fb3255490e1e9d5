package store

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/protocol"
)

// grouper runs the requests arriving together on Postgres as one group:
// one statement, so one round trip and one commit for all of them, where a
// statement each would pay both per request and, since every commit that
// notifies holds Postgres's notify lock through its WAL flush, take turns
// committing. A lone request is flushed at once, so grouping never adds
// latency to it; requests arriving while a flush is in flight go into the
// next one. Its goroutine is owned by the backend and stopped by close.
type grouper[In any] struct {
	reqs   chan *groupReq[In]
	quit   chan struct{}
	done   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	// flush runs one group and returns one result per input, in order.
	flush func(ctx context.Context, ins []In) []groupResult
}

type groupReq[In any] struct {
	in    In
	reply chan groupResult
	state atomic.Int32 // reqQueued, reqStarted or reqAbandoned, as for SQLite writes
}

// groupResult is one request's share of a flush: its row (nil when the
// statement left it out) or the error that stopped it.
type groupResult struct {
	row executor.Row
	err error
}

const maxGroup = 512

func newGrouper[In any](flush func(ctx context.Context, ins []In) []groupResult) *grouper[In] {
	g := &grouper[In]{reqs: make(chan *groupReq[In], maxGroup), quit: make(chan struct{}), done: make(chan struct{}), flush: flush}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	go g.run()
	return g
}

// do runs in through the next group. A caller that gives up before its
// group starts is left out of it, so its write never lands; once started,
// the group's outcome is its outcome.
func (g *grouper[In]) do(ctx context.Context, in In) (executor.Row, error) {
	req := &groupReq[In]{in: in, reply: make(chan groupResult, 1)}
	select {
	case g.reqs <- req:
	case <-g.quit:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var res groupResult
	select {
	case res = <-req.reply:
	case <-g.done:
		select {
		case res = <-req.reply:
		default:
			return nil, ErrClosed
		}
	case <-ctx.Done():
		if req.state.CompareAndSwap(reqQueued, reqAbandoned) {
			return nil, ctx.Err()
		}
		res = <-req.reply // already sent to the database: its outcome is the truth
	}
	return res.row, res.err
}

func (g *grouper[In]) run() {
	defer close(g.done)
	batch := make([]*groupReq[In], 0, maxGroup)
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
		batch = gather(g.reqs, batch, maxGroup)
		g.flushLive(batch)
		clear(batch)
	}
}

// flushLive flushes the requests of batch whose callers still wait.
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
	results := g.flush(g.ctx, ins)
	for i, r := range live {
		r.reply <- results[i]
	}
}

func (g *grouper[In]) close() {
	close(g.quit)
	g.cancel()
	<-g.done
}

// sameResult gives every one of n requests row-less err.
func sameResult(n int, err error) []groupResult {
	out := make([]groupResult, n)
	for i := range out {
		out[i].err = err
	}
	return out
}

// byID pairs each id with its row among rows (matched on the "id"
// column); an id with no row gets none, and every id gets err.
func byID(ids []string, rows []executor.Row, err error) []groupResult {
	found := make(map[string]executor.Row, len(rows))
	for _, row := range rows {
		if id, ok, _ := asString("id", row["id"]); ok {
			found[id] = row
		}
	}
	out := make([]groupResult, len(ids))
	for i, id := range ids {
		out[i] = groupResult{row: found[id], err: err}
	}
	return out
}

// ---------------------------------------------------------------- completions

// completion is one finished attempt to settle.
type completion struct {
	id, workerID string
	result       any // JSON text, or nil for no result
}

func newCompleter(s *Store, ex executor.Executor) *grouper[completion] {
	return newGrouper(func(ctx context.Context, cs []completion) []groupResult {
		ids := make([]string, len(cs))
		workers := make([]string, len(cs))
		results := make([]any, len(cs))
		for i, c := range cs {
			ids[i], workers[i], results[i] = c.id, c.workerID, c.result
		}
		st := s.stmts.Get(protocol.StmtCompleteMany)
		args, err := st.Bind(protocol.Args{"ids": pgArray(ids), "worker_ids": pgArray(workers), "results": pgArrayNullable(results)})
		var rows []executor.Row
		if err == nil {
			rows, err = ex.Query(ctx, st.SQL, args...)
		}
		return byID(ids, rows, err)
	})
}

// completeGrouped settles one task through the backend's completion
// groups. A row the statement did not return is a lease that was gone.
func (b *pgBackend) completeGrouped(ctx context.Context, id, workerID string, result any) (TaskRef, error) {
	row, err := b.completer.do(ctx, completion{id: id, workerID: workerID, result: result})
	if err != nil {
		return TaskRef{}, err
	}
	if row == nil {
		return TaskRef{}, &LostLeaseError{ID: id}
	}
	st, _, err := asString("status", row["status"])
	if err != nil {
		return TaskRef{}, err
	}
	return TaskRef{ID: id, Status: Status(st)}, nil
}

// ---------------------------------------------------------------- submits

// newInserter groups unkeyed submits (insertArgs) into insert_many. A lone
// submit runs insert_task, exactly as before grouping existed. When the
// server rejects the group's statement (an error with a SQLSTATE: nothing
// of it was committed), each submit runs alone, so a row the server
// refuses fails only its own caller; an error without one (the connection,
// the store closing) goes to every caller, whose outcome is then as
// uncertain as a lone statement's would be.
func newInserter(s *Store, ex executor.Executor) *grouper[protocol.Args] {
	one := func(ctx context.Context, ins protocol.Args) groupResult {
		rows, err := s.exec(ctx, pgQuerier{ex}, protocol.StmtInsertTask, ins)
		if err == nil && len(rows) == 0 {
			err = errors.New("cairnq: insert returned no row")
		}
		if err != nil {
			return groupResult{err: err}
		}
		return groupResult{row: rows[0]}
	}
	return newGrouper(func(ctx context.Context, all []protocol.Args) []groupResult {
		if len(all) == 1 {
			return []groupResult{one(ctx, all[0])}
		}
		// insert_many takes each of insert_task's parameters X as each_X,
		// the text[] of its values across the group.
		ids := make([]string, len(all))
		args := protocol.Args{}
		for _, name := range insertParams {
			col := make([]any, len(all))
			for i, ins := range all {
				col[i] = textOf(ins[name])
			}
			args["each_"+name] = pgArrayNullable(col)
		}
		for i, ins := range all {
			ids[i], _ = ins["id"].(string)
		}
		rows, err := s.exec(ctx, pgQuerier{ex}, protocol.StmtInsertMany, args)
		if hasSQLState(err) {
			out := make([]groupResult, len(all))
			for i, ins := range all {
				out[i] = one(ctx, ins)
			}
			return out
		}
		out := byID(ids, rows, err)
		for i := range out {
			if out[i].row == nil && out[i].err == nil {
				out[i].err = errors.New("cairnq: insert_many returned no row for " + ids[i])
			}
		}
		return out
	})
}

// insertParams are the parameters insertArgs gives insert_task.
var insertParams = []string{"id", "name", "queue", "payload", "metadata", "max_attempts", "priority", "delay_ms", "parent_id", "root_id", "correlation_id"}

// textOf is v as an element of a text[] literal: strings as they are,
// integers in decimal, nil as NULL.
func textOf(v any) any {
	if n, ok := v.(int64); ok {
		return strconv.FormatInt(n, 10)
	}
	return v
}
