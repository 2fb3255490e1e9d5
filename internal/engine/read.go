package engine

import (
	"context"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/group"
	"github.com/cairnq/cairnq-go/protocol"
)

// Get returns the task with id, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (*cairnqtype.Task, error) {
	if err := checkID("get", id); err != nil {
		return nil, err
	}
	rows, err := s.readOne(ctx, stmtGet, protocol.Args{"id": id})
	return found(rows, err)
}

// GetByKey returns the task key points at, or ErrNotFound.
func (s *Store) GetByKey(ctx context.Context, key string) (*cairnqtype.Task, error) {
	if err := checkKey("get", key); err != nil {
		return nil, err
	}
	rows, err := s.readOne(ctx, stmtGetByKey, protocol.Args{"key": key})
	return found(rows, err)
}

func found(rows []executor.Row, err error) (*cairnqtype.Task, error) {
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, cairnqtype.ErrNotFound
	}
	return rowToTask(rows[0])
}

// GetStatus returns the id and status of the task, or ErrNotFound. It
// reads neither payload nor result, which is why waiting loops poll it.
// A call with no other in flight reads at once; calls arriving while one
// runs share one read (statusReads).
func (s *Store) GetStatus(ctx context.Context, id string) (cairnqtype.TaskRef, error) {
	if err := checkID("get status", id); err != nil {
		return cairnqtype.TaskRef{}, err
	}
	if s.statusReading.CompareAndSwap(false, true) {
		defer s.statusReading.Store(false)
		rows, err := s.readOne(ctx, stmtGetStatus, protocol.Args{"id": id})
		return foundRef(rows, err)
	}
	res, err := grouped(ctx, s.statusReads, id)
	if err != nil {
		return cairnqtype.TaskRef{}, err
	}
	if res.Value.rows == nil {
		return cairnqtype.TaskRef{}, cairnqtype.ErrNotFound
	}
	return refAt(res.Value.rows, res.Value.i)
}

// newStatusReader starts the grouper of s's GetStatus calls. Its
// goroutine is s's, stopped by Close.
func newStatusReader(s *Store) *group.Grouper[string, rowAt] {
	return newGrouper(func(ctx context.Context, ids []string) []groupResult {
		var rows rowSet
		err := s.be.read(ctx, func(q querier) (err error) {
			rows, err = s.execRows(ctx, q, stmtGetStatusMany, protocol.Args{"ids": s.list(ids)})
			return err
		})
		return byID(ids, rows, err)
	}, nil)
}

// GetStatusByKey is GetStatus following a key, resolved on every call.
func (s *Store) GetStatusByKey(ctx context.Context, key string) (cairnqtype.TaskRef, error) {
	if err := checkKey("get status", key); err != nil {
		return cairnqtype.TaskRef{}, err
	}
	rows, err := s.readOne(ctx, stmtGetStatusByKey, protocol.Args{"key": key})
	return foundRef(rows, err)
}

func foundRef(rows []executor.Row, err error) (cairnqtype.TaskRef, error) {
	if err != nil {
		return cairnqtype.TaskRef{}, err
	}
	if len(rows) == 0 {
		return cairnqtype.TaskRef{}, cairnqtype.ErrNotFound
	}
	return rowToRef(rows[0])
}

// List returns tasks matching every given filter, newest first.
func (s *Store) List(ctx context.Context, p cairnqtype.ListOptions) ([]*cairnqtype.Task, error) {
	if p.Status != "" && !p.Status.Valid() {
		return nil, argError("list", "status", "unknown status %q", p.Status)
	}
	if p.Limit < 0 {
		return nil, argError("list", "limit", "must be >= 0, got %d", p.Limit)
	}
	if p.Offset < 0 {
		return nil, argError("list", "offset", "must be >= 0, got %d", p.Offset)
	}
	for _, f := range [...]struct{ arg, v string }{
		{"queue", p.Queue}, {"name", p.Name}, {"root id", p.RootID}, {"correlation id", p.CorrelationID},
	} {
		if err := checkOptionalName("list", f.arg, f.v); err != nil {
			return nil, err
		}
	}
	limit := p.Limit
	if limit == 0 {
		limit = 100
	}
	if p.Search != "" {
		return s.search(ctx, p, limit)
	}
	rows, err := s.readOne(ctx, stmtList, protocol.Args{
		"status":         nullable(string(p.Status)),
		"queue":          nullable(p.Queue),
		"name":           nullable(p.Name),
		"root_id":        nullable(p.RootID),
		"correlation_id": nullable(p.CorrelationID),
		"limit":          int64(limit),
		"offset":         int64(p.Offset),
	})
	if err != nil {
		return nil, err
	}
	return rowsToTasks(rows)
}

// Stats counts tasks per queue and status, zero-filled. A queue without rows
// is absent, except the queue asked for, which is always present. An empty
// queue counts every queue.
func (s *Store) Stats(ctx context.Context, queue string) (map[string]cairnqtype.StatusCounts, error) {
	if err := checkOptionalName("stats", "queue", queue); err != nil {
		return nil, err
	}
	rows, err := s.readOne(ctx, stmtStats, protocol.Args{"queue": nullable(queue)})
	if err != nil {
		return nil, err
	}
	out := map[string]cairnqtype.StatusCounts{}
	if queue != "" {
		out[queue] = cairnqtype.StatusCounts{}
	}
	for _, r := range rows {
		q, _, err := asString("queue", r["queue"])
		if err != nil {
			return nil, err
		}
		st, _, err := asString("status", r["status"])
		if err != nil {
			return nil, err
		}
		n, _, err := asInt64("count", r["count"])
		if err != nil {
			return nil, err
		}
		c := out[q]
		addCount(&c, cairnqtype.Status(st), int(n))
		out[q] = c
	}
	return out, nil
}

// QueueHeadroom returns how many more tasks fit on queue before it holds
// maxDepth queued tasks (delayed ones included); 0 once it is full. It reads
// at most maxDepth index entries.
func (s *Store) QueueHeadroom(ctx context.Context, queue string, maxDepth int) (int, error) {
	if err := ValidateName("queue_depth", "queue", queue); err != nil {
		return 0, err
	}
	if maxDepth < 0 {
		return 0, argError("queue_depth", "max depth", "must be >= 0, got %d", maxDepth)
	}
	rows, err := s.readOne(ctx, stmtQueueDepth, protocol.Args{"queue": queue, "max_depth": int64(maxDepth)})
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	n, _, err := asInt64("headroom", rows[0]["headroom"])
	return max(int(n), 0), err
}

// ---------------------------------------------------------------- client writes

// MaxSearchBytes bounds ListOptions.Search.
const MaxSearchBytes = 1000

// CheckSearch checks a search's text for op: valid UTF-8, no NUL, at
// most MaxSearchBytes.
func CheckSearch(op, search string) error {
	return checkText(op, "search", search, MaxSearchBytes)
}

// search is List with a Search: list.sql's filters and order, and the
// console's search filter (consoleMatch), on the read side.
func (s *Store) search(ctx context.Context, p cairnqtype.ListOptions, limit int) ([]*cairnqtype.Task, error) {
	if err := CheckSearch("list", p.Search); err != nil {
		return nil, err
	}
	span, filters, a := s.consoleMatch(ConsoleQuery{Status: string(p.Status), Queue: p.Queue, Name: p.Name,
		RootID: p.RootID, CorrelationID: p.CorrelationID, Search: p.Search})
	a["limit"], a["offset"] = int64(limit), int64(p.Offset)
	return s.consoleTasks(ctx, "list_search", "SELECT * FROM cairnq_tasks"+consoleWhere(span, filters)+
		" ORDER BY created_at_ms DESC, id DESC LIMIT :limit OFFSET :offset", a)
}
