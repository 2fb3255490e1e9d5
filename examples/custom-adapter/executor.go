package main

// This file is the whole adapter: what an adapter author writes to run
// cairnq on a driver of their choice, here database/sql over pgx's stdlib.
// It implements executor.Session and executor.Executor and nothing else:
// without the optional executor.Listener, cairnq polls instead of waiting
// for notifications. main_test.go certifies it with
// conformance.CertifyExecutor.

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/cairnq/cairnq-go/executor"
)

// Executor runs cairnq's statements on an application's *sql.DB.
type Executor struct{ db *sql.DB }

var (
	_ executor.Executor = (*Executor)(nil)
	_ executor.Session  = txSession{}
)

// New wraps the application's pool. Close leaves it open.
func New(db *sql.DB) *Executor { return &Executor{db: db} }

// DB returns the application's pool.
func (e *Executor) DB() *sql.DB { return e.db }

// Query runs one statement with $1..$n arguments and returns every row.
func (e *Executor) Query(ctx context.Context, query string, args ...any) ([]executor.Row, error) {
	return runQuery(ctx, e.db, query, args)
}

// Exec runs a parameterless script, possibly several statements: with no
// arguments pgx's stdlib sends it unprepared, over the simple protocol.
func (e *Executor) Exec(ctx context.Context, script string) error {
	return runExec(ctx, e.db, script)
}

// Tx runs fn in one transaction: every statement fn makes goes through the
// *sql.Tx, hence one connection. It commits when fn returns nil and rolls
// back when fn fails or panics (the deferred rollback runs, then the panic
// goes on).
func (e *Executor) Tx(ctx context.Context, fn func(ctx context.Context, s executor.Session) error) error {
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("custom-adapter: begin: %w", err)
	}
	done := false
	defer func() {
		if !done {
			_ = tx.Rollback()
		}
	}()
	if err := fn(ctx, txSession{tx}); err != nil {
		return err // fn's own error, unchanged
	}
	done = true
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("custom-adapter: commit: %w", err)
	}
	return nil
}

// Close releases what the executor opened: nothing. The pool is the
// application's.
func (e *Executor) Close() error { return nil }

// txSession is the session Tx hands fn.
type txSession struct{ tx *sql.Tx }

func (s txSession) Query(ctx context.Context, query string, args ...any) ([]executor.Row, error) {
	return runQuery(ctx, s.tx, query, args)
}

func (s txSession) Exec(ctx context.Context, script string) error { return runExec(ctx, s.tx, script) }

// runner is what *sql.DB and *sql.Tx have in common.
type runner interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// runQuery scans every column into an any, so values stay as the driver
// produced them (int64, string, []byte for jsonb, time.Time, nil for NULL);
// the store normalizes them. database/sql copies a []byte scanned into an
// any, so each row owns its bytes. Errors are wrapped with %w, which keeps
// the *pgconn.PgError, and with it the SQLSTATE, reachable.
func runQuery(ctx context.Context, r runner, query string, args []any) ([]executor.Row, error) {
	rows, err := r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("custom-adapter: query: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, fmt.Errorf("custom-adapter: columns: %w", err)
	}
	out := []executor.Row{} // no rows is an empty slice, not nil
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("custom-adapter: scan: %w", err)
		}
		row := make(executor.Row, len(cols))
		for i, c := range cols {
			row[c] = vals[i]
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("custom-adapter: query: %w", err)
	}
	return out, nil
}

func runExec(ctx context.Context, r runner, script string) error {
	if _, err := r.ExecContext(ctx, script); err != nil {
		return fmt.Errorf("custom-adapter: exec: %w", err)
	}
	return nil
}
