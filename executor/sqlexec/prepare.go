package sqlexec

import (
	"context"
	"database/sql"
	"errors"
	"sync"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/outage"
	"github.com/cairnq/cairnq-go/internal/sqlrows"
)

// preparer is what Options.Prepare needs of a pool beyond DB.
type preparer interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// maxPrepared bounds the statements one executor keeps prepared. cairnq
// runs a few dozen distinct texts; past the bound (an application running
// statements of its own through the executor, say) the rest run
// unprepared rather than grow the cache, and every connection's share of
// the server's memory, without end.
const maxPrepared = 256

// stmtCache holds an executor's prepared statements by text.
type stmtCache struct {
	db preparer

	mu     sync.Mutex
	stmts  map[string]*cachedStmt
	closed bool
}

// cachedStmt is one text's statement. The caller that adds it prepares
// it; the others wait for ready. users counts the callers holding it (the
// one preparing included), so that a statement dropped from the cache,
// or the cache closed, closes it only once the last of them is done
// with it.
type cachedStmt struct {
	ready chan struct{} // closed once prepared, stmt set or left nil
	stmt  *sql.Stmt     // nil when preparing failed; read after ready

	// Guarded by the cache's mu.
	users   int
	dropped bool // out of the cache: the last user closes stmt
}

func newStmtCache(db preparer) *stmtCache {
	return &stmtCache{db: db, stmts: map[string]*cachedStmt{}}
}

// acquire returns query's entry, prepared, for the caller to run and then
// release; nil means run query unprepared: the cache is full or closed,
// preparing failed, or ctx ended while another caller prepared it. A
// failure is not kept: the unprepared run reports what is wrong with the
// statement, and the next caller prepares again (the failure may have
// been the connection's, or the context's).
func (c *stmtCache) acquire(ctx context.Context, query string) *cachedStmt {
	c.mu.Lock()
	cs, ok := c.stmts[query]
	switch {
	case ok:
		cs.users++
		c.mu.Unlock()
		select {
		case <-cs.ready:
		case <-ctx.Done():
			c.release(cs)
			return nil
		}
	case c.closed || len(c.stmts) >= maxPrepared:
		c.mu.Unlock()
		return nil
	default:
		cs = &cachedStmt{ready: make(chan struct{}), users: 1}
		c.stmts[query] = cs
		c.mu.Unlock()
		cs.stmt, _ = c.db.PrepareContext(ctx, query)
		close(cs.ready)
	}
	if cs.stmt == nil {
		c.drop(query, cs)
		c.release(cs)
		return nil
	}
	return cs
}

// release ends one caller's hold on cs, closing its statement when cs was
// dropped and no one else holds it.
func (c *stmtCache) release(cs *cachedStmt) {
	c.mu.Lock()
	cs.users--
	last := cs.dropped && cs.users == 0
	c.mu.Unlock()
	if last && cs.stmt != nil {
		_ = cs.stmt.Close()
	}
}

// drop takes cs, query's entry, out of the cache if it is still there;
// its statement closes when its last user releases it.
func (c *stmtCache) drop(query string, cs *cachedStmt) {
	c.mu.Lock()
	if c.stmts[query] == cs {
		delete(c.stmts, query)
	}
	cs.dropped = true
	c.mu.Unlock()
}

// run runs query through its prepared statement with collect, or
// unprepared on db when it has none. A prepared statement that the
// server refuses to bind, its result columns changed since it was
// prepared (SQLSTATE 0A000: a column added to a table it reads with *,
// by another process's migration) or gone from the connection (26000:
// a pooler handed over another server connection), is dropped to be
// prepared afresh; refused at QueryContext, before it ran, the query
// runs unprepared this once. Any other error is the query's: rerunning a
// statement that may have run could apply a write twice.
func run[T any](ctx context.Context, c *stmtCache, db sqlrows.Runner, query string, args []any, collect func(*sql.Rows) (T, error), unprepared func(context.Context, sqlrows.Runner, string, []any, sqlrows.Label) (T, error)) (T, error) {
	var zero T
	cs := c.acquire(ctx, query)
	if cs == nil {
		return unprepared(ctx, db, query, args, label)
	}
	// Dropped before released, so that the last user closes it.
	rows, err := cs.stmt.QueryContext(ctx, args...)
	if err != nil {
		isStale := stale(err)
		if isStale {
			c.drop(query, cs)
		}
		c.release(cs)
		if isStale {
			return unprepared(ctx, db, query, args, label)
		}
		return zero, outage.Mark(ctx, label("query", err))
	}
	out, err := collect(rows)
	if err != nil && stale(err) { // a driver that reports the refusal with the rows
		c.drop(query, cs)
	}
	c.release(cs)
	if err != nil {
		return zero, outage.Mark(ctx, label("query", err))
	}
	return out, nil
}

func (c *stmtCache) query(ctx context.Context, db sqlrows.Runner, query string, args []any) ([]executor.Row, error) {
	return run(ctx, c, db, query, args, sqlrows.Collect, sqlrows.Query)
}

func (c *stmtCache) queryPositional(ctx context.Context, db sqlrows.Runner, query string, args []any) (*executor.Rows, error) {
	return run(ctx, c, db, query, args, sqlrows.CollectPositional, sqlrows.QueryPositional)
}

// close empties the cache and keeps further statements from being
// prepared. A statement no one holds closes now; one in use, or still
// being prepared, when its last user releases it.
func (c *stmtCache) close() {
	c.mu.Lock()
	c.closed = true
	var idle []*sql.Stmt
	for query, cs := range c.stmts {
		delete(c.stmts, query)
		cs.dropped = true
		if cs.users == 0 && cs.stmt != nil {
			idle = append(idle, cs.stmt)
		}
	}
	c.mu.Unlock()
	for _, st := range idle {
		_ = st.Close()
	}
}

// stale reports whether err is the server refusing to bind a prepared
// statement, through whichever driver's error type (lib/pq's *pq.Error
// and pgx's *pgconn.PgError both have SQLState): its result type changed
// (0A000, "cached plan must not change result type") or it is not on the
// connection (26000).
func stale(err error) bool {
	var s interface{ SQLState() string }
	if !errors.As(err, &s) {
		return false
	}
	code := s.SQLState()
	return code == "0A000" || code == "26000"
}
