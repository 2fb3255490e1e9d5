package engine

import (
	"context"
	"strings"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/protocol"
)

// ConsoleCount counts the tasks matching q's filters, its cursor and limit
// aside, reading about scan rows at most (scan <= 0: no bound, an exact
// count however many rows that reads). exact reports whether n is every
// match; otherwise n is a lower bound: the matches among the scan rows
// read.
//
// Where an index finds one of the filters' values fewer than scan times
// (the probe ConsoleTasks makes), the count reads those entries: exact. A
// key finds one task at most: exact. Otherwise the count reads scan rows
// of the rarest value's index, or the newest scan tasks (of the id prefix,
// when one is given) where no index serves the filters, and counts the
// matches there: exact when that was every row there is. With an id
// prefix and a common value, the window is the prefix's newest scan
// tasks, whatever index would find the value.
func (s *Store) ConsoleCount(ctx context.Context, q ConsoleQuery, scan int) (n int64, exact bool, err error) {
	const op = "console count"
	if q.Status != "" && !cairnqtype.Status(q.Status).Valid() {
		return 0, false, argError(op, "status", "unknown status %q", q.Status)
	}
	span, filters, a := s.consoleMatch(q)
	all := consoleWhere(span, filters)
	if q.Key != "" || scan <= 0 {
		n, err := s.consoleCount(ctx, "console_count", "SELECT count(*) AS n FROM cairnq_tasks"+all, a)
		return n, err == nil, err
	}

	best, bestN, err := s.rarestProbe(ctx, q, a, scan)
	if err != nil {
		return 0, false, err
	}
	from := "cairnq_tasks"
	if best != nil && s.dialect == protocol.SQLite {
		// Without statistics SQLite may walk the id order and filter
		// instead: name the index the probe counted.
		from += " INDEXED BY " + best.index
	}
	if best != nil && bestN < int64(scan) {
		// Fewer than scan entries of that value: read them all.
		n, err := s.consoleCount(ctx, "console_count_indexed", "SELECT count(*) AS n FROM "+from+all, a)
		return n, err == nil, err
	}

	// Common values, or none an index finds: count the matches among scan
	// rows, of the rarest value's index or else the newest in id order.
	var window []string
	order := " ORDER BY id DESC"
	if best != nil && len(span) == 0 {
		window, order = best.conds, ""
	} else {
		// With an id prefix the value's index would be read past scan
		// entries, most outside the prefix: read the prefix's newest
		// tasks, in id order, as ConsoleTasks does.
		from = "cairnq_tasks"
	}
	a["scan"] = int64(scan)
	// The window reads the id and the columns the filters test: on the
	// id order alone, the primary key's index holds all it needs.
	cols := []string{"id"}
	for _, f := range []struct{ col, v string }{{"status", q.Status}, {"queue", q.Queue}, {"name", q.Name},
		{"correlation_id", q.CorrelationID}, {"root_id", q.RootID}, {"parent_id", q.ParentID}} {
		if f.v != "" {
			cols = append(cols, f.col)
		}
	}
	if q.Search != "" {
		cols = append(cols, "payload", "error")
	}
	src := "SELECT count(*) AS n, count(CASE WHEN " + condsOrTrue(filters) + " THEN 1 END) AS m FROM (SELECT " + strings.Join(cols, ", ") +
		" FROM " + from + consoleWhere(span, window) + order + " LIMIT :scan) AS w"
	rows, err := s.consoleQuery(ctx, "console_count_window", src, a)
	if err != nil || len(rows) == 0 {
		return 0, false, err
	}
	read, _, err := asInt64("n", rows[0]["n"])
	if err != nil {
		return 0, false, err
	}
	m, _, err := asInt64("m", rows[0]["m"])
	if err != nil {
		return 0, false, err
	}
	return m, read < int64(scan), nil
}

// condsOrTrue is conds joined by AND, or a condition always true.
func condsOrTrue(conds []string) string {
	if len(conds) == 0 {
		return "1 = 1"
	}
	return strings.Join(conds, " AND ")
}
