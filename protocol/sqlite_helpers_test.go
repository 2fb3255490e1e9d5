package protocol

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncruces/go-sqlite3"
)

// row is one result row keyed by column name.
type row map[string]any

// openDB opens (creating) a database file and closes it with the test.
func openDB(t testing.TB, path string) *sqlite3.Conn {
	t.Helper()
	conn, err := sqlite3.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// migratedDB is a fresh database file with every SQLite migration applied.
func migratedDB(t testing.TB) *sqlite3.Conn {
	t.Helper()
	conn := openDB(t, filepath.Join(t.TempDir(), "tasks.db"))
	for _, m := range Migrations(SQLite) {
		if err := conn.Exec(m.SQL); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
	}
	exec(t, conn, "PRAGMA foreign_keys = ON")
	return conn
}

// exec runs literal SQL (possibly several statements).
func exec(t testing.TB, conn *sqlite3.Conn, sql string) {
	t.Helper()
	if err := conn.Exec(sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// query runs one statement with positional arguments and returns its rows.
func query(t testing.TB, conn *sqlite3.Conn, sql string, args ...any) []row {
	t.Helper()
	rows, err := tryQuery(conn, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return rows
}

func tryQuery(conn *sqlite3.Conn, sql string, args ...any) ([]row, error) {
	stmt, tail, err := conn.Prepare(sql)
	if err != nil {
		return nil, err
	}
	defer stmt.Close()
	if strings.TrimSpace(tail) != "" {
		return nil, fmt.Errorf("unexpected tail %q", tail)
	}
	if stmt.BindCount() != len(args) {
		return nil, fmt.Errorf("statement has %d parameters, got %d arguments", stmt.BindCount(), len(args))
	}
	for i, a := range args {
		n := i + 1
		switch v := a.(type) {
		case nil:
			err = stmt.BindNull(n)
		case string:
			err = stmt.BindText(n, v)
		case int:
			err = stmt.BindInt64(n, int64(v))
		case int64:
			err = stmt.BindInt64(n, v)
		case float64:
			err = stmt.BindFloat(n, v)
		default:
			return nil, fmt.Errorf("cannot bind %T", a)
		}
		if err != nil {
			return nil, err
		}
	}
	var out []row
	for stmt.Step() {
		r := row{}
		for c := range stmt.ColumnCount() {
			var v any
			switch stmt.ColumnType(c) {
			case sqlite3.INTEGER:
				v = stmt.ColumnInt64(c)
			case sqlite3.FLOAT:
				v = stmt.ColumnFloat(c)
			case sqlite3.TEXT:
				v = stmt.ColumnText(c)
			case sqlite3.BLOB:
				v = stmt.ColumnBlob(c, nil)
			}
			r[stmt.ColumnName(c)] = v
		}
		out = append(out, r)
	}
	return out, stmt.Err()
}

// run binds args to the named SQLite statement (specialized for args) and
// runs it.
func run(t testing.TB, conn *sqlite3.Conn, name string, args Args) []row {
	t.Helper()
	st := Statements(SQLite).Get(name).Specialize(args)
	pos, err := st.Bind(args)
	if err != nil {
		t.Fatal(err)
	}
	return query(t, conn, st.SQL, pos...)
}

// columns returns the result column names of a prepared statement.
func columns(t testing.TB, conn *sqlite3.Conn, sql string) []string {
	t.Helper()
	stmt, _, err := conn.Prepare(sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer stmt.Close()
	var out []string
	for c := range stmt.ColumnCount() {
		out = append(out, stmt.ColumnName(c))
	}
	return out
}

// plan is the EXPLAIN QUERY PLAN detail lines of sql.
func plan(t testing.TB, conn *sqlite3.Conn, sql string, args ...any) []string {
	t.Helper()
	var out []string
	for _, r := range query(t, conn, "EXPLAIN QUERY PLAN "+sql, args...) {
		out = append(out, r["detail"].(string))
	}
	return out
}

// seedRows inserts 600 tasks over five queues, three names and every status,
// terminal ones completed at spread-out times, so the planner has a real
// distribution to work with.
func seedRows(t testing.TB, conn *sqlite3.Conn) {
	t.Helper()
	statuses := []string{"queued", "running", "succeeded", "failed", "canceled", "succeeded"}
	exec(t, conn, "BEGIN")
	for i := range 600 {
		status := statuses[i%len(statuses)]
		var completed, lease, worker any
		switch status {
		case "succeeded", "failed", "canceled":
			completed = int64(1000 + i)
			worker = "w"
		case "running":
			lease = int64(100000 + i)
			worker = "w"
		}
		query(t, conn, `INSERT INTO cairnq_tasks (id, name, queue, status, payload, run_at_ms,
			root_id, correlation_id, worker_id, lease_until_ms, created_at_ms, updated_at_ms, completed_at_ms)
			VALUES (?1, ?2, ?3, ?4, '{}', ?5, ?6, ?7, ?8, ?9, ?5, ?5, ?10)`,
			fmt.Sprintf("task_%04d", i), fmt.Sprintf("n%d", i%3), fmt.Sprintf("q%d", i%5), status,
			int64(1000+i), fmt.Sprintf("task_%04d", i-i%10), fmt.Sprintf("corr-%d", i%50), worker, lease, completed)
	}
	exec(t, conn, "COMMIT")
}
