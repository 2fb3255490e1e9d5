package engine

import (
	"context"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/protocol"
)

// ConsoleNameCount is how many tasks of one queue and name a count found
// in each status.
type ConsoleNameCount struct {
	Queue, Name string
	cairnqtype.StatusCounts
}

// ConsoleNameCounts counts every task by queue, name and status, ordered
// by queue and name: the stats statement's count, by name as well. The
// (queue, status, name) prefix of the claim_name index holds all three,
// so Postgres may count from the index alone, as it may for stats.
func (s *Store) ConsoleNameCounts(ctx context.Context) ([]ConsoleNameCount, error) {
	rows, err := s.consoleQuery(ctx, "console_name_counts",
		`SELECT queue, name, status, count(*) AS n FROM cairnq_tasks
		GROUP BY queue, name, status ORDER BY queue, name`, protocol.Args{})
	if err != nil {
		return nil, err
	}
	return nameCounts(rows)
}

// ConsoleSettledSince counts the tasks that succeeded or failed for good
// since since, by queue and name (Succeeded and Failed set), ordered by
// queue and name. It reads the (status, completed_at_ms) index's range
// and each row it finds there.
func (s *Store) ConsoleSettledSince(ctx context.Context, since time.Time) ([]ConsoleNameCount, error) {
	rows, err := s.consoleQuery(ctx, "console_settled_since",
		`SELECT queue, name, status, count(*) AS n FROM cairnq_tasks
		WHERE status IN ('succeeded', 'failed') AND completed_at_ms >= :since_ms
		GROUP BY queue, name, status ORDER BY queue, name`,
		protocol.Args{"since_ms": since.UnixMilli()})
	if err != nil {
		return nil, err
	}
	return nameCounts(rows)
}

// nameCounts folds rows of queue, name, status and n, ordered by queue
// and name, into one count per queue and name.
func nameCounts(rows []executor.Row) ([]ConsoleNameCount, error) {
	var out []ConsoleNameCount
	for _, r := range rows {
		q, _, err := asString("queue", r["queue"])
		if err != nil {
			return nil, err
		}
		name, _, err := asString("name", r["name"])
		if err != nil {
			return nil, err
		}
		st, _, err := asString("status", r["status"])
		if err != nil {
			return nil, err
		}
		n, _, err := asInt64("n", r["n"])
		if err != nil {
			return nil, err
		}
		if len(out) == 0 || out[len(out)-1].Queue != q || out[len(out)-1].Name != name {
			out = append(out, ConsoleNameCount{Queue: q, Name: name})
		}
		addCount(&out[len(out)-1].StatusCounts, cairnqtype.Status(st), int(n))
	}
	return out, nil
}
