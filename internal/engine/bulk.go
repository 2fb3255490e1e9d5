package engine

import (
	"context"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/protocol"
)

// DeleteTask deletes a task no worker holds (queued or finished) with its
// keys, unless a workflow that has not ended holds it (its record, or one
// of its steps), and returns the task as it was. status, when set, is the
// status it must still have (a bulk delete's filter). It returns nil, nil
// when no such task has that id.
func (s *Store) DeleteTask(ctx context.Context, id string, status cairnqtype.Status) (*cairnqtype.Task, error) {
	if err := checkID("delete", id); err != nil {
		return nil, err
	}
	rows, err := s.writeOne(ctx, stmtDeleteTask, protocol.Args{"id": id, "status": nullable(string(status))})
	if err != nil {
		return nil, err
	}
	t, err := oneTask(rows)
	if t != nil {
		s.hub.Done(t.ID) // its waiters read it gone
	}
	return t, err
}

// CancelMatching is Cancel for a bulk cancel: the task is canceled only
// while it still has status ("": queued or running), and a running task
// already asked to stop is not asked again. It returns nil, nil when the
// task no longer matches.
func (s *Store) CancelMatching(ctx context.Context, id string, status cairnqtype.Status) (*cairnqtype.Task, error) {
	return s.cancel(ctx, stmtCancelMatching, id, protocol.Args{"id": id, "status": nullable(string(status))})
}

// Matching is a task a bulk action's filter matched: its id and name.
type Matching struct{ ID, Name string }

// ValidateFilter checks f for op: at least one field set, each valid.
func ValidateFilter(op string, f cairnqtype.TaskFilter) error {
	if f == (cairnqtype.TaskFilter{}) {
		return argError(op, "filter", "must name a status, a queue or a name")
	}
	if f.Status != "" && !f.Status.Valid() {
		return argError(op, "status", "must be queued, running, succeeded, failed or canceled, got %q", f.Status)
	}
	if err := checkOptionalName(op, "queue", f.Queue); err != nil {
		return err
	}
	return checkOptionalName(op, "name", f.Name)
}

// MatchingIDs returns up to limit tasks matching f, in id order, after
// the id after ("" for the first): a bulk action's next page. It reads
// through the primary key, each page one short read, so a bulk action
// holds no lock between its tasks.
func (s *Store) MatchingIDs(ctx context.Context, f cairnqtype.TaskFilter, after string, limit int) ([]Matching, error) {
	// The console list's filters, the page's span after the cursor.
	_, filters, a := s.consoleMatch(ConsoleQuery{Status: string(f.Status), Queue: f.Queue, Name: f.Name})
	a["after"], a["limit"] = after, int64(max(limit, 1))
	rows, err := s.consoleQuery(ctx, "matching_ids",
		"SELECT id, name FROM cairnq_tasks"+consoleWhere([]string{"id > :after"}, filters)+" ORDER BY id LIMIT :limit", a)
	if err != nil {
		return nil, err
	}
	out := make([]Matching, 0, len(rows))
	for _, r := range rows {
		id, _, err := asString("id", r["id"])
		if err != nil {
			return nil, err
		}
		name, _, err := asString("name", r["name"])
		if err != nil {
			return nil, err
		}
		out = append(out, Matching{id, name})
	}
	return out, nil
}
