package engine

import (
	"context"

	"github.com/cairnq/cairnq-go/protocol"
)

// consoleProbe is one filter of a console list that a protocol v1 index
// finds by equality (in no useful order): its index, its conditions and
// their parameters.
type consoleProbe struct {
	index  string
	conds  []string
	params []string
}

// consoleProbes returns the filters of q an index finds. Each is counted up
// to the scan bound before a page is read, so that a rare value is read
// through its index and a common one in id order.
func (s *Store) consoleProbes(q ConsoleQuery) []consoleProbe {
	var out []consoleProbe
	add := func(index string, cols ...string) {
		p := consoleProbe{index: index}
		for _, c := range cols {
			p.conds = append(p.conds, c+" = :"+c)
			p.params = append(p.params, c)
		}
		out = append(out, p)
	}
	switch {
	case q.Queue != "" && q.Status != "":
		add("cairnq_tasks_claim_idx", "queue", "status") // (queue, status, priority, run_at_ms, id)
	case q.Queue != "":
		add("cairnq_tasks_claim_idx", "queue")
	case q.Status != "":
		add("cairnq_tasks_status_completed_idx", "status") // (status, completed_at_ms)
	}
	if q.Name != "" {
		add("cairnq_tasks_name_idx", "name")
	}
	if q.CorrelationID != "" {
		add("cairnq_tasks_correlation_idx", "correlation_id")
	}
	if q.RootID != "" {
		add("cairnq_tasks_root_idx", "root_id")
	}
	// parent_id has no index: a parent filter alone is always scanned.
	return out
}

// rarestProbe counts, up to scan, the entries each index that serves q's
// filters holds for its value (a holds the values), and returns the probe
// with the fewest, nil when no index serves them.
func (s *Store) rarestProbe(ctx context.Context, q ConsoleQuery, a protocol.Args, scan int) (best *consoleProbe, bestN int64, err error) {
	probes := s.consoleProbes(q)
	for i, c := range probes {
		pa := protocol.Args{"scan": int64(scan)}
		for _, p := range c.params {
			pa[p] = a[p]
		}
		n, err := s.consoleCount(ctx, "console_probe",
			"SELECT count(*) AS n FROM (SELECT 1 FROM cairnq_tasks"+consoleWhere(c.conds)+" LIMIT :scan) AS probe", pa)
		if err != nil {
			return nil, 0, err
		}
		if best == nil || n < bestN {
			best, bestN = &probes[i], n
		}
	}
	return best, bestN, nil
}

// consoleCount runs src, a query of one row with a count n.
func (s *Store) consoleCount(ctx context.Context, name, src string, a protocol.Args) (int64, error) {
	rows, err := s.consoleQuery(ctx, name, src, a)
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	n, _, err := asInt64("n", rows[0]["n"])
	return n, err
}
