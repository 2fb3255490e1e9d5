// Package sqlrows runs statements on database/sql for every executor over
// it (executor/sqlexec and the gorm and bun adapters): one way to read a
// result's rows as the driver produced them, one way to send a script,
// each caller labeling the errors as its own, and [Serial] for a session
// whose statements must take turns.
package sqlrows

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/outage"
	"github.com/cairnq/cairnq-go/internal/pgroute"
)

// Runner is what *sql.DB, *sql.Tx, *sql.Conn and gorm's ConnPool have in
// common: all this package needs.
type Runner interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Label wraps the error of a failed statement with %w for the caller that
// ran it, keeping the driver's error reachable: op is "query" or "exec".
// What it returns is then marked when it is the database out of reach
// (outage.Mark), so that every executor over database/sql reports an
// outage alike.
type Label func(op string, err error) error

// Query runs query on r and reads its rows with Collect; an error is
// returned through label.
func Query(ctx context.Context, r Runner, query string, args []any, label Label) ([]executor.Row, error) {
	return run(ctx, r, query, args, label, Collect)
}

// QueryPositional is Query with the rows by position
// ([executor.PositionalQuerier]), read with CollectPositional.
func QueryPositional(ctx context.Context, r Runner, query string, args []any, label Label) (*executor.Rows, error) {
	return run(ctx, r, query, args, label, CollectPositional)
}

func run[T any](ctx context.Context, r Runner, query string, args []any, label Label, collect func(*sql.Rows) (T, error)) (T, error) {
	var zero T
	rows, err := r.QueryContext(ctx, query, args...)
	if err != nil {
		return zero, outage.Mark(ctx, label("query", err))
	}
	out, err := collect(rows)
	if err != nil {
		return zero, outage.Mark(ctx, label("query", err))
	}
	return out, nil
}

// Exec runs a parameterless script on r; an error is returned through
// label. Passing no arguments is what keeps database/sql from preparing
// it, so a driver sends it over the simple query protocol, which accepts
// several statements in one text.
func Exec(ctx context.Context, r Runner, script string, label Label) error {
	if _, err := r.ExecContext(ctx, script); err != nil {
		return outage.Mark(ctx, label("exec", err))
	}
	return nil
}

// Serial runs statements on one Runner one at a time: the statements of a
// session that goroutines may share, over a connection that runs one at a
// time (an ORM's transaction). Wire, where set, gives each statement the
// executor's query mode on pgx's stdlib ([pgroute.Stdlib.Args]); Label
// labels the errors. A Serial must not be copied once used.
type Serial struct {
	Run   Runner
	Wire  *pgroute.Stdlib
	Label Label

	mu sync.Mutex
}

// Query is [Query] on s.Run, after the statements before it.
func (s *Serial) Query(ctx context.Context, query string, args []any) ([]executor.Row, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Query(ctx, s.Run, query, s.Wire.Args(ctx, args), s.Label)
}

// QueryPositional is [QueryPositional] on s.Run, after the statements
// before it.
func (s *Serial) QueryPositional(ctx context.Context, query string, args []any) (*executor.Rows, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return QueryPositional(ctx, s.Run, query, s.Wire.Args(ctx, args), s.Label)
}

// Exec is [Exec] on s.Run, after the statements before it.
func (s *Serial) Exec(ctx context.Context, script string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Exec(ctx, s.Run, script, s.Label)
}

// Collect reads every row of rows into executor.Rows, each value as the
// driver produced it (database/sql already copies []byte for an any), and
// closes rows; of two columns with one name, the later wins.
func Collect(rows *sql.Rows) ([]executor.Row, error) {
	out := []executor.Row{}
	_, err := eachRow(rows, func(cols []string, vals []any) {
		row := make(executor.Row, len(cols))
		for i, c := range cols {
			row[c] = vals[i]
		}
		out = append(out, row)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CollectPositional is Collect with the rows by position.
func CollectPositional(rows *sql.Rows) (*executor.Rows, error) {
	out := &executor.Rows{}
	cols, err := eachRow(rows, func(_ []string, vals []any) {
		out.Values = append(out.Values, slices.Clone(vals))
	})
	if err != nil {
		return nil, err
	}
	out.Columns = cols
	return out, nil
}

// eachRow scans every row of rows and hands its values, in column order,
// to row, in a slice row must not keep; it closes rows and returns the
// columns' names.
func eachRow(rows *sql.Rows, row func(cols []string, vals []any)) ([]string, error) {
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return nil, fmt.Errorf("columns: %w", err)
	}
	// A driver may hand out names that alias a buffer it reuses once rows
	// close (bun's pgdriver does), and the rows' keys outlive that.
	cols := make([]string, len(names))
	for i, n := range names {
		cols[i] = strings.Clone(n)
	}
	vals := make([]any, len(cols))
	dest := make([]any, len(cols))
	for i := range vals {
		dest[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		row(cols, vals)
	}
	return cols, rows.Err()
}
