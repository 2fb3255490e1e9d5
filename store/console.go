package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/storeaccess"
	"github.com/cairnq/cairnq-go/protocol"
)

// This file is the read-only API of the web console (package console): the
// queries a dashboard needs that the protocol's statements do not cover.
// They are methods of ops, so they reach the console through
// internal/storeaccess and stay out of a Store's documented surface. They
// read, never write, run on the read side of the backend (SQLite's reader
// pool), and each is shaped to use an index protocol v1 already has; where
// none fits, the method says so.

// consoleColumns is every column of cairnq_tasks but payload, result and
// metadata: what a list row shows, without reading the values a page of
// tasks does not display.
const consoleColumns = `id, name, queue, status, error, progress, message, attempt, max_attempts,
	priority, worker_id, lease_until_ms, run_at_ms, cancel_requested_at_ms, parent_id, root_id,
	correlation_id, created_at_ms, updated_at_ms, completed_at_ms`

// ConsoleTasks returns one page of tasks matching q, newest first, by
// keyset on the id: ids are ULIDs, so id order is creation order at
// millisecond resolution, and the primary key index serves both the order
// and the cursor, with no OFFSET. Tasks arriving between two pages never
// shift a page: they sort before the first one. The tasks carry neither
// payload, result nor metadata (Get reads them).
func (o ops) ConsoleTasks(ctx context.Context, q storeaccess.ConsoleQuery) ([]*Task, error) {
	s := o.s
	const op = "console tasks"
	if q.Before != "" && q.After != "" {
		return nil, argError(op, "cursor", "before and after are exclusive")
	}
	if q.Status != "" && !Status(q.Status).Valid() {
		return nil, argError(op, "status", "unknown status %q", q.Status)
	}
	limit := q.Limit
	switch {
	case limit <= 0:
		limit = 50
	case limit > 1000:
		limit = 1000
	}
	var where []string
	a := protocol.Args{"limit": int64(limit)}
	eq := func(col, param, v string) {
		if v != "" {
			where = append(where, col+" = :"+param)
			a[param] = v
		}
	}
	eq("status", "status", string(q.Status))
	eq("queue", "queue", q.Queue)
	eq("name", "name", q.Name)
	eq("correlation_id", "correlation_id", q.CorrelationID)
	eq("root_id", "root_id", q.RootID)
	eq("parent_id", "parent_id", q.ParentID)
	if q.Key != "" {
		where = append(where, "id = (SELECT task_id FROM cairnq_task_keys WHERE key = :key)")
		a["key"] = q.Key
	}
	if q.IDPrefix != "" {
		if s.dialect == protocol.SQLite {
			// A range on the primary key; SQLite compares text bytewise.
			where = append(where, "id >= :id_lo AND id < :id_hi")
			a["id_lo"] = q.IDPrefix
			a["id_hi"] = q.IDPrefix + "\U0010FFFF"
		} else {
			// starts_with, not a range: the column's collation need not
			// be bytewise.
			where = append(where, "starts_with(id, :id_prefix)")
			a["id_prefix"] = q.IDPrefix
		}
	}
	order := "DESC"
	switch {
	case q.Before != "":
		where = append(where, "id < :cursor")
		a["cursor"] = q.Before
	case q.After != "":
		where = append(where, "id > :cursor")
		a["cursor"] = q.After
		order = "ASC"
	}
	src := "SELECT " + consoleColumns + " FROM cairnq_tasks"
	if len(where) > 0 {
		src += " WHERE " + strings.Join(where, " AND ")
	}
	src += " ORDER BY id " + order + " LIMIT :limit"
	tasks, err := s.consoleTasks(ctx, "console_tasks", src, a)
	if err != nil {
		return nil, err
	}
	if order == "ASC" { // the page before the cursor, shown newest first
		for i, j := 0, len(tasks)-1; i < j; i, j = i+1, j-1 {
			tasks[i], tasks[j] = tasks[j], tasks[i]
		}
	}
	return tasks, nil
}

// ConsoleChildren returns up to limit tasks naming t as their parent within
// t's chain (the root index: children a handler submits through
// TaskContext join their parent's chain), newest first. A child
// submitted with a ParentID but no RootID starts a chain of its own and is
// not found here; ConsoleTasks with ParentID finds every child, without an
// index.
func (o ops) ConsoleChildren(ctx context.Context, t *Task, limit int) ([]*Task, error) {
	s := o.s
	root := t.RootID
	if root == "" {
		root = t.ID
	}
	return s.consoleTasks(ctx, "console_children",
		"SELECT "+consoleColumns+" FROM cairnq_tasks WHERE root_id = :root_id AND parent_id = :parent_id ORDER BY id DESC LIMIT :limit",
		protocol.Args{"root_id": root, "parent_id": t.ID, "limit": int64(max(limit, 1))})
}

// ConsoleCorrelated returns up to limit tasks sharing correlationID, newest
// first, through the correlation index.
func (o ops) ConsoleCorrelated(ctx context.Context, correlationID string, limit int) ([]*Task, error) {
	s := o.s
	return s.consoleTasks(ctx, "console_correlated",
		"SELECT "+consoleColumns+" FROM cairnq_tasks WHERE correlation_id = :correlation_id ORDER BY id DESC LIMIT :limit",
		protocol.Args{"correlation_id": correlationID, "limit": int64(max(limit, 1))})
}

// ConsoleTaskKey returns the key that points at task id now, or "" if
// none does. The key table has no index on task_id, so this reads the key
// table: one scan per call, meant for a single task's page.
func (o ops) ConsoleTaskKey(ctx context.Context, id string) (string, error) {
	s := o.s
	rows, err := s.consoleQuery(ctx, "console_task_key",
		"SELECT key FROM cairnq_task_keys WHERE task_id = :id LIMIT 1", protocol.Args{"id": id})
	if err != nil || len(rows) == 0 {
		return "", err
	}
	k, _, err := asString("key", rows[0]["key"])
	return k, err
}

// ConsoleRunning returns up to limit running tasks, the soonest lease
// expiry first, through the partial lease index.
func (o ops) ConsoleRunning(ctx context.Context, limit int) ([]*Task, error) {
	s := o.s
	return s.consoleTasks(ctx, "console_running",
		"SELECT "+consoleColumns+" FROM cairnq_tasks WHERE status = 'running' AND lease_until_ms IS NOT NULL ORDER BY lease_until_ms ASC, id ASC LIMIT :limit",
		protocol.Args{"limit": int64(max(limit, 1))})
}

// ConsoleWorkers returns the workers holding leases now and how many tasks
// each runs, through the partial lease index, most tasks first.
func (o ops) ConsoleWorkers(ctx context.Context) ([]storeaccess.ConsoleWorker, error) {
	s := o.s
	rows, err := s.consoleQuery(ctx, "console_workers",
		`SELECT worker_id, count(*) AS running, min(lease_until_ms) AS lease_until_ms
		FROM cairnq_tasks WHERE status = 'running' AND lease_until_ms IS NOT NULL
		GROUP BY worker_id ORDER BY running DESC, worker_id ASC`, protocol.Args{})
	if err != nil {
		return nil, err
	}
	out := make([]storeaccess.ConsoleWorker, 0, len(rows))
	for _, r := range rows {
		var w storeaccess.ConsoleWorker
		var n, until int64
		var ok bool
		if w.ID, _, err = asString("worker_id", r["worker_id"]); err != nil {
			return nil, err
		}
		if n, _, err = asInt64("running", r["running"]); err != nil {
			return nil, err
		}
		if until, ok, err = asInt64("lease_until_ms", r["lease_until_ms"]); err != nil {
			return nil, err
		}
		w.Running, w.LeaseUntil = int(n), msTime(until, ok)
		out = append(out, w)
	}
	return out, nil
}

// ConsoleNow returns the clock the store's statements use: the database
// clock on Postgres, this process's on SQLite. Ages and lease time left are
// measured against it.
func (o ops) ConsoleNow(ctx context.Context) (time.Time, error) {
	s := o.s
	if s.dialect == protocol.SQLite {
		return s.now(), nil
	}
	rows, err := s.consoleQuery(ctx, "console_now",
		"SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint) AS now_ms", protocol.Args{})
	if err != nil {
		return time.Time{}, err
	}
	if len(rows) == 0 {
		return time.Time{}, fmt.Errorf("cairnq: reading the database clock: no row")
	}
	n, _, err := asInt64("now_ms", rows[0]["now_ms"])
	return time.UnixMilli(n), err
}

// ConsoleSettled returns the tasks that succeeded and failed for good per
// minute since since, oldest minute first, every minute up to now present
// (zero-filled). It reads only the (status, completed_at_ms) index.
func (o ops) ConsoleSettled(ctx context.Context, since, now time.Time) ([]storeaccess.ConsoleMinute, error) {
	s := o.s
	rows, err := s.consoleQuery(ctx, "console_settled",
		`SELECT status, completed_at_ms / 60000 AS minute, count(*) AS n FROM cairnq_tasks
		WHERE status IN ('succeeded', 'failed') AND completed_at_ms >= :since_ms
		GROUP BY status, completed_at_ms / 60000`,
		protocol.Args{"since_ms": since.UnixMilli()})
	if err != nil {
		return nil, err
	}
	first, last := since.UnixMilli()/60000, now.UnixMilli()/60000
	if last < first {
		last = first
	}
	out := make([]storeaccess.ConsoleMinute, last-first+1)
	for i := range out {
		out[i].Minute = time.UnixMilli((first + int64(i)) * 60000)
	}
	for _, r := range rows {
		st, _, err := asString("status", r["status"])
		if err != nil {
			return nil, err
		}
		m, _, err := asInt64("minute", r["minute"])
		if err != nil {
			return nil, err
		}
		n, _, err := asInt64("n", r["n"])
		if err != nil {
			return nil, err
		}
		if m < first || m > last {
			continue
		}
		if Status(st) == StatusSucceeded {
			out[m-first].Succeeded += int(n)
		} else {
			out[m-first].Failed += int(n)
		}
	}
	return out, nil
}

func (s *Store) consoleTasks(ctx context.Context, name, src string, a protocol.Args) ([]*Task, error) {
	rows, err := s.consoleQuery(ctx, name, src, a)
	if err != nil {
		return nil, err
	}
	return rowsToTasks(rows)
}

// consoleQuery compiles src (":name" parameters) for the store's dialect
// and runs it on the read side.
func (s *Store) consoleQuery(ctx context.Context, name, src string, a protocol.Args) (rows []executor.Row, err error) {
	st, err := protocol.Compile(name, src, s.dialect)
	if err != nil {
		return nil, fmt.Errorf("cairnq: %s: %w", name, err)
	}
	args, err := st.Bind(a)
	if err != nil {
		return nil, err
	}
	err = s.be.read(ctx, func(q querier) error {
		rows, err = q.query(ctx, st.SQL, args)
		return err
	})
	return rows, err
}
