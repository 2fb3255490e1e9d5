package store

import (
	"context"
	"sync/atomic"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/protocol"
)

// completer groups the completions arriving together on Postgres into one
// complete_many statement: one round trip and one commit for all of them,
// where a statement each would pay both per task (and queue for pool
// connections behind each other). A lone completion is flushed at once,
// so grouping never adds latency to it; completions arriving while a flush
// is in flight go into the next one. Its goroutine is owned by the
// backend and stopped by close.
type completer struct {
	s      *Store
	ex     executor.Executor
	reqs   chan *completion
	quit   chan struct{}
	done   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
}

type completion struct {
	id, workerID string
	result       any // JSON text, or nil for no result
	reply        chan completionResult
	state        atomic.Int32 // reqQueued, reqStarted or reqAbandoned, as for SQLite writes
}

type completionResult struct {
	row executor.Row
	err error
}

const maxCompleteBatch = 512

func newCompleter(s *Store, ex executor.Executor) *completer {
	c := &completer{s: s, ex: ex, reqs: make(chan *completion, maxCompleteBatch), quit: make(chan struct{}), done: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.run()
	return c
}

// complete settles one task through the next group.
func (c *completer) complete(ctx context.Context, id, workerID string, result any) (TaskRef, error) {
	req := &completion{id: id, workerID: workerID, result: result, reply: make(chan completionResult, 1)}
	select {
	case c.reqs <- req:
	case <-c.quit:
		return TaskRef{}, ErrClosed
	case <-ctx.Done():
		return TaskRef{}, ctx.Err()
	}
	var res completionResult
	select {
	case res = <-req.reply:
	case <-c.done:
		select {
		case res = <-req.reply:
		default:
			return TaskRef{}, ErrClosed
		}
	case <-ctx.Done():
		if req.state.CompareAndSwap(reqQueued, reqAbandoned) {
			return TaskRef{}, ctx.Err()
		}
		res = <-req.reply // already sent to the database: its outcome is the truth
	}
	if res.err != nil {
		return TaskRef{}, res.err
	}
	if res.row == nil {
		return TaskRef{}, &LostLeaseError{ID: id}
	}
	st, _, err := asString("status", res.row["status"])
	if err != nil {
		return TaskRef{}, err
	}
	return TaskRef{ID: id, Status: Status(st)}, nil
}

func (c *completer) run() {
	defer close(c.done)
	batch := make([]*completion, 0, maxCompleteBatch)
	for {
		select {
		case <-c.quit:
			for {
				select {
				case r := <-c.reqs:
					r.reply <- completionResult{err: ErrClosed}
				default:
					return
				}
			}
		case r := <-c.reqs:
			batch = append(batch[:0], r)
		}
		batch = gather(c.reqs, batch, maxCompleteBatch)
		c.flush(batch)
		clear(batch)
	}
}

func (c *completer) flush(batch []*completion) {
	live := batch[:0:0]
	for _, r := range batch {
		if r.state.CompareAndSwap(reqQueued, reqStarted) {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	ids := make([]string, len(live))
	workers := make([]string, len(live))
	results := make([]any, len(live))
	for i, r := range live {
		ids[i], workers[i], results[i] = r.id, r.workerID, r.result
	}
	st := c.s.stmts.Get(protocol.StmtCompleteMany)
	args, err := st.Bind(protocol.Args{"ids": pgArray(ids), "worker_ids": pgArray(workers), "results": pgArrayNullable(results)})
	var rows []executor.Row
	if err == nil {
		rows, err = c.ex.Query(c.ctx, st.SQL, args...)
	}
	byID := make(map[string]executor.Row, len(rows))
	for _, row := range rows {
		if id, ok, _ := asString("id", row["id"]); ok {
			byID[id] = row
		}
	}
	for _, r := range live {
		r.reply <- completionResult{row: byID[r.id], err: err}
	}
}

func (c *completer) close() {
	close(c.quit)
	c.cancel()
	<-c.done
}
