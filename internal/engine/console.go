package engine

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/protocol"
)

type ConsoleQuery struct {
	Status        string
	Queue         string
	Name          string
	Key           string // the task the key points at now
	CorrelationID string
	RootID        string
	// ParentID matches tasks naming it as parent. The protocol has no index
	// on parent_id, so this filter alone walks the id index.
	ParentID string
	IDPrefix string // ids starting with it, e.g. "task_01J8"
	// Search matches tasks whose payload or error, as JSON text, holds
	// it, ASCII letters in either case. No index serves it: a page
	// looks among ScanLimit tasks, as for a common filter value.
	Search string
	// SearchErrorOnly keeps Search to the error: a console hiding
	// payloads must not answer questions about them.
	SearchErrorOnly bool
	// Before returns the page after a cursor (tasks with smaller ids);
	// After the page before it (larger ids). Both are task ids; at most one
	// may be set.
	Before, After string
	// Limit caps the page; default 50, at most ConsoleMaxLimit.
	Limit int
}

// ConsoleMaxLimit is the most tasks ConsoleTasks returns at once: a page
// of the console's largest (1000) and the one row more that tells whether
// another page follows.
const ConsoleMaxLimit = 1001

// ConsoleWorker is one worker holding leases now.
type ConsoleWorker struct {
	ID      string `json:"id"`
	Running int    `json:"running"`
	// LeaseUntil is the soonest expiry among its leases.
	LeaseUntil time.Time `json:"lease_until"`
}

// ConsoleMinute is how many tasks settled in one minute.
type ConsoleMinute struct {
	Minute    time.Time `json:"minute"`
	Succeeded int       `json:"succeeded"`
	Failed    int       `json:"failed"`
}

// This file is the read-only API of the web console (package console): the
// queries a dashboard needs that the protocol's statements do not cover.
// They are methods of the engine's Store, which the console imports;
// package store's API leaves them out. They read, never write, run on the read side of the backend (SQLite's reader
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
//
// No protocol v1 index orders a status, queue, name, parent, root or
// correlation filter by id, so a page filtered by one reads at most about
// scan rows (scan <= 0: no bound, every match is sorted). When the
// filter's own index holds fewer than scan entries for its value, the page
// is read through that index and sorted: exact. Otherwise the value is
// common, and the page is looked for among the scan tasks next to the
// cursor in id order (the newest, without one). When those hold too few
// matches, scannedTo is the last task id examined: the page is complete up
// to it, and a page continuing from it (Before or After it, in the same
// direction) goes on where this one stopped. scannedTo is "" when the page
// is exact.
func (s *Store) ConsoleTasks(ctx context.Context, q ConsoleQuery, scan int) (tasks []*cairnqtype.Task, scannedTo string, err error) {
	const op = "console tasks"
	if q.Before != "" && q.After != "" {
		return nil, "", argError(op, "cursor", "before and after are exclusive")
	}
	if q.Status != "" && !cairnqtype.Status(q.Status).Valid() {
		return nil, "", argError(op, "status", "unknown status %q", q.Status)
	}
	limit := q.Limit
	switch {
	case limit <= 0:
		limit = 50
	case limit > ConsoleMaxLimit:
		limit = ConsoleMaxLimit
	}
	// span: the conditions on the id (key, prefix, then the cursor), which
	// the primary key serves.
	span, filters, a := s.consoleMatch(q)
	a["limit"] = int64(limit)
	order := "DESC"
	switch {
	case q.Before != "":
		span = append(span, "id < :cursor")
		a["cursor"] = q.Before
	case q.After != "":
		span = append(span, "id > :cursor")
		a["cursor"] = q.After
		order = "ASC"
	}
	defer func() {
		if order == "ASC" { // the page before the cursor, shown newest first
			slices.Reverse(tasks)
		}
	}()
	where := consoleWhere
	exact := func(from string) ([]*cairnqtype.Task, string, error) {
		src := "SELECT " + consoleColumns + " FROM " + from + where(span, filters) + " ORDER BY id " + order + " LIMIT :limit"
		tasks, err := s.consoleTasks(ctx, "console_tasks", src, a)
		return tasks, "", err
	}
	if len(filters) == 0 || q.Key != "" || scan <= 0 {
		return exact("cairnq_tasks")
	}

	best, bestN, err := s.rarestProbe(ctx, q, a, scan)
	if err != nil {
		return nil, "", err
	}
	if best != nil && bestN < int64(scan) {
		if s.dialect == protocol.SQLite {
			// Without statistics SQLite may walk the id order and filter
			// instead: name the index the probe found selective.
			return exact("cairnq_tasks INDEXED BY " + best.index)
		}
		// Postgres plans the filters alone, in a fence: its sort then
		// reads fewer than scan rows.
		tasks, err := s.consoleTasks(ctx, "console_tasks_indexed",
			"WITH m AS MATERIALIZED (SELECT "+consoleColumns+" FROM cairnq_tasks"+where(span, filters)+
				") SELECT * FROM m ORDER BY id "+order+" LIMIT :limit", a)
		return tasks, "", err
	}

	// A common value: look among the scan tasks next to the cursor.
	a["scan"] = int64(scan)
	cols := consoleColumns
	if q.Search != "" {
		cols += ", payload" // for the search's filter only: the page's rows carry none
	}
	window := "SELECT " + cols + " FROM cairnq_tasks" + where(span) + " ORDER BY id " + order + " LIMIT :scan"
	tasks, err = s.consoleTasks(ctx, "console_tasks_window",
		"SELECT "+consoleColumns+" FROM ("+window+") AS w"+where(filters)+" ORDER BY id "+order+" LIMIT :limit", a)
	if err != nil || len(tasks) >= limit {
		return tasks, "", err
	}
	// The window's last task, and whether any lies beyond it.
	a["last"] = int64(scan - 1)
	rows, err := s.consoleQuery(ctx, "console_tasks_window_end",
		"SELECT id FROM cairnq_tasks"+where(span)+" ORDER BY id "+order+" LIMIT 2 OFFSET :last", a)
	if err != nil || len(rows) < 2 { // the window held every task left: the page is exact
		return tasks, "", err
	}
	scannedTo, _, err = asString("id", rows[0]["id"])
	return tasks, scannedTo, err
}

// consoleMatch is what a task of the list matching q's filters satisfies,
// its cursor aside: span, the conditions on the id (key, prefix) the
// primary key serves, and filters, the other columns', with their
// parameters.
func (s *Store) consoleMatch(q ConsoleQuery) (span, filters []string, a protocol.Args) {
	a = protocol.Args{}
	eq := func(col, param, v string) {
		if v != "" {
			filters = append(filters, col+" = :"+param)
			a[param] = v
		}
	}
	eq("status", "status", string(q.Status))
	eq("queue", "queue", q.Queue)
	eq("name", "name", q.Name)
	eq("correlation_id", "correlation_id", q.CorrelationID)
	eq("root_id", "root_id", q.RootID)
	eq("parent_id", "parent_id", q.ParentID)
	if q.Search != "" {
		filters = append(filters, s.searchCond(q.Search, q.SearchErrorOnly, a))
	}
	if q.Key != "" {
		// At most one task: the key's primary key finds it.
		span = append(span, "id = (SELECT task_id FROM cairnq_task_keys WHERE key = :key)")
		a["key"] = q.Key
	}
	if q.IDPrefix != "" {
		if s.dialect == protocol.SQLite {
			// A range on the primary key; SQLite compares text bytewise.
			span = append(span, "id >= :id_lo AND id < :id_hi")
			a["id_lo"] = q.IDPrefix
			a["id_hi"] = q.IDPrefix + "\U0010FFFF"
		} else {
			// starts_with, not a range: the column's collation need not
			// be bytewise.
			span = append(span, "starts_with(id, :id_prefix)")
			a["id_prefix"] = q.IDPrefix
		}
	}
	return span, filters, a
}

// searchCond is the condition of a search for text in the payload (unless
// errorOnly) or the error, as JSON text, its parameters put in a. ASCII
// letters match in either case: SQLite's LIKE folds them, and Postgres
// takes ILIKE (which folds the others too under a collation that knows
// them); the text itself always matches. SQLite keeps a payload as the
// text the SDK wrote, which escapes &, < and > as \u0026, \u003c and
// \u003e: the search looks for that form too.
func (s *Store) searchCond(text string, errorOnly bool, a protocol.Args) string {
	like := "LIKE"
	if s.dialect == protocol.Postgres {
		like = "ILIKE"
	}
	pats := []string{text}
	if esc := jsonHTMLEscaper.Replace(text); esc != text {
		pats = append(pats, esc)
	}
	cols := []string{"payload", "error"}
	if errorOnly {
		cols = cols[1:]
	}
	var ors []string
	for i, p := range pats {
		param := "search" + strconv.Itoa(i)
		a[param] = "%" + likeEscaper.Replace(p) + "%"
		for _, col := range cols {
			ors = append(ors, "CAST("+col+" AS TEXT) "+like+" :"+param+" ESCAPE '!'")
		}
	}
	return "(" + strings.Join(ors, " OR ") + ")"
}

// jsonHTMLEscaper writes &, < and > as encoding/json does by default.
var jsonHTMLEscaper = strings.NewReplacer("&", `\u0026`, "<", `\u003c`, ">", `\u003e`)

// likeEscaper escapes LIKE's wildcards with '!', the search's ESCAPE.
var likeEscaper = strings.NewReplacer("!", "!!", "%", "!%", "_", "!_")

// consoleWhere is a WHERE clause of every condition of conds, or "".
func consoleWhere(conds ...[]string) string {
	all := slices.Concat(conds...)
	if len(all) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(all, " AND ")
}

// ConsoleChildren returns up to limit tasks naming t as their parent within
// t's chain (the root index: children a handler submits through
// TaskContext join their parent's chain), newest first. A child
// submitted with a ParentID but no RootID starts a chain of its own and is
// not found here; ConsoleTasks with ParentID finds every child, without an
// index.
func (s *Store) ConsoleChildren(ctx context.Context, t *cairnqtype.Task, limit int) ([]*cairnqtype.Task, error) {
	root := t.RootID
	if root == "" {
		root = t.ID
	}
	return s.consoleNewest(ctx, "console_children", "root_id = :root_id AND parent_id = :parent_id",
		protocol.Args{"root_id": root, "parent_id": t.ID, "limit": int64(max(limit, 1))})
}

// ConsoleCorrelated returns up to limit tasks sharing correlationID, newest
// first, through the correlation index.
func (s *Store) ConsoleCorrelated(ctx context.Context, correlationID string, limit int) ([]*cairnqtype.Task, error) {
	return s.consoleNewest(ctx, "console_correlated", "correlation_id = :correlation_id",
		protocol.Args{"correlation_id": correlationID, "limit": int64(max(limit, 1))})
}

// consoleNewestScan bounds what consoleNewest reads on Postgres.
const consoleNewestScan = 5000

// consoleNewest reads the newest limit tasks matching cond, whose index
// (root, correlation) finds them in no id order. SQLite's index entries
// end in the rowid, the order rows were inserted in, so the index hands
// over the last inserted ones without reading a whole group: those are
// the newest but for tasks submitted in the same instant by different
// processes, and they are shown by id. Postgres's entries are in no such
// order: a group of fewer than consoleNewestScan tasks is read through
// the index and sorted; a larger one is looked for among the newest
// consoleNewestScan tasks (the list, filtered, pages through all of it).
func (s *Store) consoleNewest(ctx context.Context, name, cond string, a protocol.Args) ([]*cairnqtype.Task, error) {
	var src string
	if s.dialect == protocol.SQLite {
		src = "SELECT " + consoleColumns + " FROM cairnq_tasks WHERE " + cond + " ORDER BY rowid DESC LIMIT :limit"
	} else {
		a["scan"] = int64(consoleNewestScan)
		n, err := s.consoleCount(ctx, name+"_probe",
			"SELECT count(*) AS n FROM (SELECT 1 FROM cairnq_tasks WHERE "+cond+" LIMIT :scan) AS probe", a)
		if err != nil {
			return nil, err
		}
		if n < consoleNewestScan {
			src = "WITH m AS MATERIALIZED (SELECT " + consoleColumns + " FROM cairnq_tasks WHERE " + cond +
				") SELECT * FROM m ORDER BY id DESC LIMIT :limit"
		} else {
			src = "SELECT * FROM (SELECT " + consoleColumns + " FROM cairnq_tasks ORDER BY id DESC LIMIT :scan) AS w WHERE " +
				cond + " ORDER BY id DESC LIMIT :limit"
		}
	}
	tasks, err := s.consoleTasks(ctx, name, src, a)
	slices.SortFunc(tasks, func(x, y *cairnqtype.Task) int { return strings.Compare(y.ID, x.ID) })
	return tasks, err
}

// ConsoleTaskKey returns the key that points at task id now, or "" if
// none does. The key table has no index on task_id, so this reads the key
// table. With scan > 0 it first counts the keys up to scan and, when there
// are that many, reads nothing and returns looked false.
func (s *Store) ConsoleTaskKey(ctx context.Context, id string, scan int) (key string, looked bool, err error) {
	if scan > 0 {
		n, err := s.consoleCount(ctx, "console_key_probe",
			"SELECT count(*) AS n FROM (SELECT 1 FROM cairnq_task_keys LIMIT :scan) AS probe", protocol.Args{"scan": int64(scan)})
		if err != nil || n >= int64(scan) {
			return "", false, err
		}
	}
	rows, err := s.consoleQuery(ctx, "console_task_key",
		"SELECT key FROM cairnq_task_keys WHERE task_id = :id LIMIT 1", protocol.Args{"id": id})
	if err != nil || len(rows) == 0 {
		return "", err == nil, err
	}
	k, _, err := asString("key", rows[0]["key"])
	return k, err == nil, err
}

// ConsoleRunning returns up to limit running tasks, the soonest lease
// expiry first, through the partial lease index.
func (s *Store) ConsoleRunning(ctx context.Context, limit int) ([]*cairnqtype.Task, error) {
	return s.consoleTasks(ctx, "console_running",
		"SELECT "+consoleColumns+" FROM cairnq_tasks WHERE status = 'running' AND lease_until_ms IS NOT NULL ORDER BY lease_until_ms ASC, id ASC LIMIT :limit",
		protocol.Args{"limit": int64(max(limit, 1))})
}

// ConsoleWorkers returns the workers holding leases now and how many tasks
// each runs, through the partial lease index, most tasks first.
func (s *Store) ConsoleWorkers(ctx context.Context) ([]ConsoleWorker, error) {
	rows, err := s.consoleQuery(ctx, "console_workers",
		`SELECT worker_id, count(*) AS running, min(lease_until_ms) AS lease_until_ms
		FROM cairnq_tasks WHERE status = 'running' AND lease_until_ms IS NOT NULL
		GROUP BY worker_id ORDER BY running DESC, worker_id ASC`, protocol.Args{})
	if err != nil {
		return nil, err
	}
	out := make([]ConsoleWorker, 0, len(rows))
	for _, r := range rows {
		var w ConsoleWorker
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
func (s *Store) ConsoleNow(ctx context.Context) (time.Time, error) {
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
func (s *Store) ConsoleSettled(ctx context.Context, since, now time.Time) ([]ConsoleMinute, error) {
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
	out := make([]ConsoleMinute, last-first+1)
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
		if cairnqtype.Status(st) == cairnqtype.StatusSucceeded {
			out[m-first].Succeeded += int(n)
		} else {
			out[m-first].Failed += int(n)
		}
	}
	return out, nil
}

func (s *Store) consoleTasks(ctx context.Context, name, src string, a protocol.Args) ([]*cairnqtype.Task, error) {
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
