package main

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cairnq/cairnq-go/executor"
)

// callCounts counts the calls crossing the executor seam (--count-calls).
// Each Query or Exec is one statement round trip; each Tx adds two more
// (BEGIN and COMMIT) around the statements run on its session.
type callCounts struct {
	queries, txs, txQueries atomic.Int64
	// claims and settles count the claim and complete_many statements,
	// claimRows and settleRows the rows they returned: the groups' widths.
	claims, claimRows, settles, settleRows atomic.Int64
	// queryNs and txNs add up the wall time of the calls.
	queryNs, txNs atomic.Int64
}

func (c *callCounts) snapshot() callDelta {
	return callDelta{queries: c.queries.Load(), txs: c.txs.Load(), txQueries: c.txQueries.Load(),
		claims: c.claims.Load(), claimRows: c.claimRows.Load(), settles: c.settles.Load(), settleRows: c.settleRows.Load(),
		queryTime: time.Duration(c.queryNs.Load()), txTime: time.Duration(c.txNs.Load())}
}

// countingExec wraps an executor to count its calls, keeping its Listener.
type countingExec struct {
	executor.Executor
	c *callCounts
}

// countingListenExec is countingExec for an executor that can LISTEN.
type countingListenExec struct {
	countingExec
	l executor.Listener
}

func (e countingListenExec) Listen(ctx context.Context, channels []string, onNotify func(channel, payload string)) (func(), error) {
	return e.l.Listen(ctx, channels, onNotify)
}

func withCounting(ex executor.Executor, c *callCounts) executor.Executor {
	ce := countingExec{Executor: ex, c: c}
	if l, ok := ex.(executor.Listener); ok {
		return countingListenExec{countingExec: ce, l: l}
	}
	return ce
}

func (e countingExec) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	e.c.queries.Add(1)
	defer e.c.timeQuery(time.Now())
	rows, err := e.Executor.Query(ctx, sql, args...)
	e.c.kind(sql, len(rows))
	return rows, err
}

// kind counts a claim or complete_many statement and the rows it returned.
func (c *callCounts) kind(sql string, rows int) {
	switch {
	case strings.Contains(sql, "attempt + 1") && strings.Contains(sql, "SKIP LOCKED"):
		c.claims.Add(1)
		c.claimRows.Add(int64(rows))
	case strings.Contains(sql, "unnest(") && strings.Contains(sql, "'succeeded'"):
		c.settles.Add(1)
		c.settleRows.Add(int64(rows))
	}
}

func (e countingExec) Exec(ctx context.Context, script string) error {
	e.c.queries.Add(1)
	return e.Executor.Exec(ctx, script)
}

func (e countingExec) Tx(ctx context.Context, fn func(ctx context.Context, s executor.Session) error) error {
	e.c.txs.Add(1)
	defer e.c.timeTx(time.Now())
	return e.Executor.Tx(ctx, func(ctx context.Context, s executor.Session) error {
		return fn(ctx, countingSession{s, e.c})
	})
}

type countingSession struct {
	executor.Session
	c *callCounts
}

func (s countingSession) Query(ctx context.Context, sql string, args ...any) ([]executor.Row, error) {
	s.c.txQueries.Add(1)
	rows, err := s.Session.Query(ctx, sql, args...)
	s.c.kind(sql, len(rows))
	return rows, err
}

func (s countingSession) Exec(ctx context.Context, script string) error {
	s.c.txQueries.Add(1)
	return s.Session.Exec(ctx, script)
}

func (c *callCounts) timeQuery(start time.Time) { c.queryNs.Add(int64(time.Since(start))) }
func (c *callCounts) timeTx(start time.Time)    { c.txNs.Add(int64(time.Since(start))) }
