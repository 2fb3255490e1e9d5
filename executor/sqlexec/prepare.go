package sqlexec

import (
	"context"
	"database/sql"
	"errors"
	"sync"

	"github.com/cairnq/cairnq-go/executor"
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

// cachedStmt is one text's statement, prepared once by whichever caller
// gets to it first while the others wait for it.
type cachedStmt struct {
	once sync.Once
	stmt *sql.Stmt // nil when preparing failed
}

func newStmtCache(db preparer) *stmtCache {
	return &stmtCache{db: db, stmts: map[string]*cachedStmt{}}
}

// stmt returns the statement prepared for query, preparing it if needed,
// or nil when query is to run unprepared: the cache is full or closed, or
// preparing failed. A failure is not kept: the unprepared run reports
// what is wrong with the statement, and the next call prepares again
// (the failure may have been the connection's).
func (c *stmtCache) stmt(ctx context.Context, query string) *sql.Stmt {
	c.mu.Lock()
	cs, ok := c.stmts[query]
	if !ok {
		if c.closed || len(c.stmts) >= maxPrepared {
			c.mu.Unlock()
			return nil
		}
		cs = &cachedStmt{}
		c.stmts[query] = cs
	}
	c.mu.Unlock()
	cs.once.Do(func() {
		// Not the caller's cancellation: the statement outlives this call.
		st, err := c.db.PrepareContext(context.WithoutCancel(ctx), query)
		if err == nil {
			cs.stmt = st
		}
	})
	if cs.stmt == nil {
		c.drop(query, cs)
	}
	return cs.stmt
}

// drop removes cs, query's entry, if it is still there, and closes its
// statement.
func (c *stmtCache) drop(query string, cs *cachedStmt) {
	c.mu.Lock()
	if c.stmts[query] == cs {
		delete(c.stmts, query)
	}
	c.mu.Unlock()
	if cs.stmt != nil {
		_ = cs.stmt.Close()
	}
}

// run runs query through its prepared statement with collect, or
// unprepared on db when it has none. A prepared statement whose result
// columns changed under it since it was prepared (a column added to a
// table its statement reads with *, by a newer migration from another
// process) fails before running, with SQLSTATE 0A000: it is dropped, to
// be prepared afresh, and the query runs unprepared this once.
func run[T any](ctx context.Context, c *stmtCache, db Runner, query string, args []any, collect func(*sql.Rows) (T, error), unprepared func(context.Context, Runner, string, []any) (T, error)) (T, error) {
	st := c.stmt(ctx, query)
	if st == nil {
		return unprepared(ctx, db, query, args)
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil && planChanged(err) {
		c.mu.Lock()
		cs := c.stmts[query]
		c.mu.Unlock()
		if cs != nil && cs.stmt == st {
			c.drop(query, cs)
		}
		return unprepared(ctx, db, query, args)
	}
	if err != nil {
		var zero T
		return zero, wrapQuery(err)
	}
	out, err := collect(rows)
	if err != nil {
		var zero T
		return zero, wrapQuery(err)
	}
	return out, nil
}

func (c *stmtCache) query(ctx context.Context, db Runner, query string, args []any) ([]executor.Row, error) {
	return run(ctx, c, db, query, args, CollectRows, runQuery)
}

func (c *stmtCache) queryPositional(ctx context.Context, db Runner, query string, args []any) (*executor.Rows, error) {
	return run(ctx, c, db, query, args, CollectPositional, runQueryPositional)
}

// close closes every statement and keeps further ones from being
// prepared.
func (c *stmtCache) close() {
	c.mu.Lock()
	c.closed = true
	stmts := c.stmts
	c.stmts = map[string]*cachedStmt{}
	c.mu.Unlock()
	for _, cs := range stmts {
		cs.once.Do(func() {}) // wait out a prepare in flight
		if cs.stmt != nil {
			_ = cs.stmt.Close()
		}
	}
}

// planChanged reports whether err is Postgres's "cached plan must not
// change result type" (SQLSTATE 0A000), through whichever driver's error
// type: lib/pq's *pq.Error and pgx's *pgconn.PgError both have SQLState.
func planChanged(err error) bool {
	var s interface{ SQLState() string }
	return errors.As(err, &s) && s.SQLState() == "0A000"
}
