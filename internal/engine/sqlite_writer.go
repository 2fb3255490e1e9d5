package engine

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/group"
)

// write runs fn inside the writer's transaction: alone, or sharing one
// commit with every other write that was waiting.
func (b *sqliteBackend) write(ctx context.Context, fn func(q querier) error) error {
	return b.submit(ctx, fn, false)
}

// writeSingle is write for a fn that runs exactly one statement.
func (b *sqliteBackend) writeSingle(ctx context.Context, fn func(q querier) error) error {
	return b.submit(ctx, fn, true)
}

// complete settles one finished attempt through the writer. The writer
// runs the completions that share a transaction as one statement; a lone
// one is complete.sql, as fn runs it.
func (b *sqliteBackend) complete(ctx context.Context, c *Completion, fn func(q querier) error) error {
	return b.enqueue(ctx, &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1), single: true, completion: c})
}

func (b *sqliteBackend) submit(ctx context.Context, fn func(q querier) error, single bool) error {
	return b.enqueue(ctx, &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1), single: single})
}

func (b *sqliteBackend) enqueue(ctx context.Context, req *writeReq) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if err := b.guard.checkSoon(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case b.reqs <- req:
	case <-b.quit:
		return cairnqtype.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.done:
		return err
	case <-b.done:
		// The writer stopped; it may have answered this request on its way out.
		select {
		case err := <-req.done:
			return err
		default:
			return cairnqtype.ErrClosed
		}
	case <-ctx.Done():
		if req.state.Abandon() {
			return ctx.Err() // the writer will skip it: nothing was written
		}
		// The writer already started it: its outcome is the truth, and it
		// is short (bounded by the busy timeout).
		return <-req.done
	}
}

// writer is the goroutine that owns the write connection. It stops when
// quit closes, after finishing the batch in hand and failing what is left.
func (b *sqliteBackend) writer() {
	defer close(b.done)
	ticker := time.NewTicker(statsRefreshInterval)
	defer ticker.Stop()
	batch := make([]*writeReq, 0, b.maxBatch)
	var lastEnd time.Time
	lastSize := 0
	for {
		select {
		case <-b.quit:
			b.drainClosed()
			return
		case <-ticker.C:
			if b.existing {
				continue // the database's owner maintains its statistics
			}
			if err := b.refreshStatistics(); err != nil {
				b.log.Warn("cairnq: refreshing SQLite planner statistics", "err", err)
			}
			continue
		case req := <-b.reqs:
			batch = append(batch[:0], req)
		}
		// A request arriving within busyWindow of a commit shared by
		// several callers is part of a stream of concurrent writes, whose
		// next arrival is worth waiting burstGap for. One after a pause,
		// or after a commit of one request (a caller writing sequentially
		// waits for each of its writes), goes at once.
		busy := lastSize > 1 && time.Since(lastEnd) < busyWindow
		batch = gatherBurst(b.reqs, batch, b.maxBatch, busy)
		b.runBatch(batch)
		lastEnd, lastSize = time.Now(), len(batch)
		clear(batch)
	}
}

// gatherBurst adds to batch what is waiting on ch and, when requests
// are arriving together, what arrives while they keep coming: the
// completions of one claim's calls arrive a few microseconds apart, and
// sharing one commit costs each of them a fraction of one (a commit
// writes every page it dirtied, ~30 of them here, whether one task or a
// hundred changed). A request that finds nothing else waiting, unless
// busy, goes at once, as the writer always did: a caller writing
// sequentially never waits here. Otherwise the batch grows until
// burstGap passes without an arrival, burstMax after it began, or max
// requests.
func gatherBurst[T any](ch chan T, batch []T, max int, busy bool) []T {
	n := len(batch)
	if batch = group.Gather(ch, batch, max, nil, 0); !busy && len(batch) == n {
		return batch
	}
	start := time.Now()
	last := start
	for len(batch) < max {
		runtime.Gosched()
		n := len(batch)
		batch = group.Gather(ch, batch, max, nil, 0)
		now := time.Now()
		if len(batch) > n {
			last = now
		} else if now.Sub(last) >= burstGap {
			break
		}
		if now.Sub(start) >= burstMax {
			break
		}
	}
	return batch
}

// The bounds of a burst gatherBurst waits out. A goroutine's settlement
// takes a few microseconds of Go code to reach the writer, and two
// arrivals of one burst come well inside burstGap of each other.
const (
	burstGap   = 20 * time.Microsecond
	burstMax   = 500 * time.Microsecond
	busyWindow = time.Millisecond
)

func (b *sqliteBackend) drainClosed() {
	for {
		select {
		case req := <-b.reqs:
			req.done <- cairnqtype.ErrClosed
		default:
			return
		}
	}
}

// runBatch runs every request of batch in one transaction.
func (b *sqliteBackend) runBatch(batch []*writeReq) {
	live := batch[:0:0]
	for _, r := range batch {
		if !r.state.Start() {
			continue // its caller gave up and returned
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	if b.w == nil { // a reset could not reopen the connection: try again
		w, err := b.openWriter()
		if err != nil {
			for _, r := range live {
				r.done <- err
			}
			return
		}
		b.w = w
	}
	c := b.w
	if err := c.exec("BEGIN IMMEDIATE"); err != nil {
		err = b.writeError(err)
		for _, r := range live {
			r.done <- err
		}
		return
	}
	q := sqliteQuerier{c}
	results := make([]error, len(live))
	if len(live) == 1 {
		var panicked bool
		results[0], panicked = runReq(live[0], q)
		if panicked {
			b.resetWriter(live, results[0])
			return
		}
		if results[0] != nil {
			c.exec("ROLLBACK")
			live[0].done <- b.writeError(results[0])
			return
		}
	} else if !b.runShared(c, live, results) {
		return // the batch was failed as a whole
	}
	if err := b.commitGuarded(c); err != nil {
		if !c.c.GetAutocommit() {
			c.exec("ROLLBACK")
		}
		err = b.writeError(err)
		for _, r := range live {
			r.done <- err
		}
		return
	}
	b.commits.Add(1)
	// Only after COMMIT: a caller must never hold a write that a rollback
	// could still take back.
	for i, r := range live {
		r.done <- b.writeError(results[i])
	}
}

// runShared runs the requests of a batch of several in the writer's
// transaction on c, each in a savepoint of its own unless it is one
// statement, setting each one's result. It reports false when it failed
// the batch as a whole (every caller answered).
func (b *sqliteBackend) runShared(c *sqliteConn, live []*writeReq, results []error) bool {
	q := sqliteQuerier{c}
	grouped := false
	if b.settler != nil && countCompletions(live) > 1 {
		if !b.runCompletions(c, live, results) {
			return false // the batch was failed as a whole
		}
		grouped = true
	}
	for i, r := range live {
		if grouped && r.completion != nil {
			continue
		}
		savepoint := !r.single
		if savepoint {
			if err := c.exec("SAVEPOINT cairnq_req"); err != nil {
				results[i] = b.writeError(err)
				continue
			}
		}
		var panicked bool
		results[i], panicked = runReq(r, q)
		if panicked {
			b.resetWriter(live, results[i])
			return false
		}
		if c.c.GetAutocommit() {
			b.abortBatch(live, results[i])
			return false
		}
		if savepoint {
			if results[i] != nil {
				c.exec("ROLLBACK TO cairnq_req")
			}
			c.exec("RELEASE cairnq_req")
		}
	}
	return true
}

func countCompletions(live []*writeReq) int {
	n := 0
	for _, r := range live {
		if r.completion != nil {
			n++
		}
	}
	return n
}

// runCompletions runs the completions of live, the writer's open batch,
// as few statements as it can (sqliteSettler.completeMany), and puts each
// one's outcome in results. A group holds distinct ids (a repeated one
// starts the next group, so it runs after the first as it would alone)
// and at most maxCompletionBytes of results. When a group's statement
// fails as a whole, SQLite has undone it, and each of its completions then
// runs alone, so a row SQLite refuses fails only its own caller. It
// returns false when it failed the whole batch instead: the transaction
// was torn down, or the connection panicked.
func (b *sqliteBackend) runCompletions(c *sqliteConn, live []*writeReq, results []error) bool {
	q := sqliteQuerier{c}
	var set []*Completion
	var at []int
	ids := map[string]bool{}
	size := 0
	flush := func() bool {
		if len(set) == 0 {
			return true
		}
		defer func() {
			set, at, size = set[:0], at[:0], 0
			clear(ids)
		}()
		err, panicked := runGuarded(func() error { return b.settler.completeMany(q, set) })
		if panicked {
			b.resetWriter(live, err)
			return false
		}
		if c.c.GetAutocommit() {
			b.abortBatch(live, err)
			return false
		}
		if err == nil {
			for k, i := range at {
				results[i] = set[k].Err
			}
			return true
		}
		for _, i := range at {
			results[i], panicked = runReq(live[i], q)
			if panicked {
				b.resetWriter(live, results[i])
				return false
			}
			if c.c.GetAutocommit() {
				b.abortBatch(live, results[i])
				return false
			}
		}
		return true
	}
	for i, r := range live {
		cp := r.completion
		if cp == nil {
			continue
		}
		n := 0
		if text, ok := cp.Result.(string); ok {
			n = len(text)
		}
		if ids[cp.ID] || (len(set) > 0 && size+n > maxCompletionBytes) {
			if !flush() {
				return false
			}
		}
		set, at = append(set, cp), append(at, i)
		ids[cp.ID] = true
		size += n
	}
	return flush()
}

// maxCompletionBytes bounds the results one complete_many statement
// carries: its argument is built whole, and SQLite holds it in memory.
const maxCompletionBytes = 8 << 20

// abortBatch fails every request of a batch whose transaction SQLite tore
// down (an I/O error, a full disk): nothing of it survived.
func (b *sqliteBackend) abortBatch(live []*writeReq, cause error) {
	if cause == nil {
		cause = errors.New("cairnq: the shared transaction was rolled back")
	}
	err := b.writeError(cause)
	for _, r := range live {
		r.done <- err
	}
}

// runReq runs one request's function, turning a panic into an error so one
// caller's bug cannot take the writer (and every other caller) down.
func runReq(r *writeReq, q querier) (err error, panicked bool) {
	return runGuarded(func() error { return r.fn(q) })
}

// runGuarded runs fn, turning a panic into an error.
func runGuarded(fn func() error) (err error, panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			err, panicked = panicError("write", p), true
		}
	}()
	return fn(), false
}

// resetWriter fails every request of a batch during which the write
// connection panicked, and replaces the connection. The driver panics when
// SQLite runs out of memory mid-statement, and the connection is then in
// no state to trust: kept, it failed every later write with "API misuse"
// and panicked on Close. Closing it rolls back whatever the batch had
// written, so nothing of it was committed; a fresh connection serves the
// next batch (or, if it cannot be opened now, the next batch opens one).
func (b *sqliteBackend) resetWriter(live []*writeReq, cause error) {
	b.w.closeAfterPanic()
	b.w = nil
	if w, err := b.openWriter(); err == nil {
		b.w = w
	} else {
		b.log.Warn("cairnq: reopening the SQLite write connection after a fault", "err", err)
	}
	for _, r := range live {
		r.done <- cause
	}
}
