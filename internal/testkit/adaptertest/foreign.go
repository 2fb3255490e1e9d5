package adaptertest

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/cairnq/cairnq-go/executor"
)

// Foreign returns an executor over db as a stranger would write one
// against the seam, outside this repository: database/sql, the driver's
// errors wrapped with %w and nothing else, no outage marked. What cairnq
// reports over it is the store's own doing.
func Foreign(db *sql.DB) executor.Executor { return foreign{db} }

type foreign struct{ db *sql.DB }

// foreignRunner is what *sql.DB and *sql.Tx have in common.
type foreignRunner interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func (f foreign) Query(ctx context.Context, query string, args ...any) ([]executor.Row, error) {
	return foreignQuery(ctx, f.db, query, args)
}

func (f foreign) Exec(ctx context.Context, script string) error {
	return foreignExec(ctx, f.db, script)
}

func (f foreign) Tx(ctx context.Context, fn func(ctx context.Context, s executor.Session) error) error {
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("foreign: begin: %w", err)
	}
	done := false
	defer func() {
		if !done {
			_ = tx.Rollback()
		}
	}()
	if err := fn(ctx, foreignTx{tx}); err != nil {
		return err
	}
	done = true
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("foreign: commit: %w", err)
	}
	return nil
}

func (f foreign) Close() error { return nil }

type foreignTx struct{ tx *sql.Tx }

func (s foreignTx) Query(ctx context.Context, query string, args ...any) ([]executor.Row, error) {
	return foreignQuery(ctx, s.tx, query, args)
}

func (s foreignTx) Exec(ctx context.Context, script string) error {
	return foreignExec(ctx, s.tx, script)
}

func foreignQuery(ctx context.Context, r foreignRunner, query string, args []any) ([]executor.Row, error) {
	rows, err := r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("foreign: query: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, fmt.Errorf("foreign: columns: %w", err)
	}
	out := []executor.Row{}
	for rows.Next() {
		vals := make([]any, len(cols))
		dest := make([]any, len(cols))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("foreign: scan: %w", err)
		}
		row := make(executor.Row, len(cols))
		for i, c := range cols {
			row[c] = vals[i]
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("foreign: query: %w", err)
	}
	return out, nil
}

func foreignExec(ctx context.Context, r foreignRunner, script string) error {
	if _, err := r.ExecContext(ctx, script); err != nil {
		return fmt.Errorf("foreign: exec: %w", err)
	}
	return nil
}
