package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/cairnq/cairnq-go/bench/internal/pgadmin"
	"github.com/jackc/pgx/v5"
)

// stmtStat is one pg_stat_statements entry of a measured window.
type stmtStat struct {
	calls   int64
	totalMs float64
	rows    int64
	query   string
}

// enableStatements installs pg_stat_statements in the database and
// resets its counters (cluster-wide). It needs the server started with
// shared_preload_libraries = 'pg_stat_statements' (BENCH_PG_STATEMENTS=1
// bench/pg.sh).
func enableStatements(ctx context.Context, d *pgadmin.Database) error {
	conn, err := pgx.Connect(ctx, d.DSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "SELECT pg_stat_statements_reset()")
	return err
}

// topStatements returns the database's statements by total execution time.
func topStatements(ctx context.Context, d *pgadmin.Database, n int) ([]stmtStat, error) {
	// The view lives where the extension was created: in this database.
	conn, err := pgx.Connect(ctx, d.DSN)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT calls, total_exec_time, rows, query FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)
		ORDER BY total_exec_time DESC LIMIT $2`, d.Name, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []stmtStat
	for rows.Next() {
		var s stmtStat
		if err := rows.Scan(&s.calls, &s.totalMs, &s.rows, &s.query); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func printStatements(w io.Writer, stats []stmtStat, tasks int) {
	fmt.Fprintf(w, "      %10s %10s %10s %10s  %s\n", "calls/1k", "total ms", "mean ms", "rows/call", "statement")
	for _, s := range stats {
		q := strings.Join(strings.Fields(s.query), " ")
		if len(q) > 90 {
			q = q[:90] + "..."
		}
		mean, rpc := 0.0, 0.0
		if s.calls > 0 {
			mean = s.totalMs / float64(s.calls)
			rpc = float64(s.rows) / float64(s.calls)
		}
		fmt.Fprintf(w, "      %10.1f %10.0f %10.3f %10.1f  %s\n", float64(s.calls)*1000/float64(tasks), s.totalMs, mean, rpc, q)
	}
}
