package engine

import (
	"context"
	"strconv"
	"unicode/utf8"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/protocol"
)

// SQLite settles the completions that share one group commit with one
// complete_many statement (sqliteBackend.runCompletions decides which):
// a statement each was the writer's largest cost (docs/benchmarks.md).

// completeSQLite settles one finished attempt through the SQLite writer.
func (s *Store) completeSQLite(ctx context.Context, be *sqliteBackend, id, workerID string, res any) (cairnqtype.TaskRef, error) {
	c := &Completion{ID: id, WorkerID: workerID, Result: res}
	err := be.complete(ctx, c, func(q querier) error {
		if err := s.completeOne(q, c); err != nil {
			return err
		}
		return c.Err
	})
	if err != nil {
		return cairnqtype.TaskRef{}, err
	}
	return cairnqtype.TaskRef{ID: id, Status: c.Status}, nil
}

// completeOne settles c with complete.sql, the protocol's statement. An
// error is the statement's own; a lost lease is c.Err.
func (s *Store) completeOne(q querier, c *Completion) error {
	rows, err := s.exec(context.Background(), q, stmtComplete,
		protocol.Args{"id": c.ID, "worker_id": c.WorkerID, "result": c.Result})
	if err != nil {
		return err
	}
	return takeOutcome(c, rows)
}

// completeMany is sqliteSettler's: cs in one statement, complete.sql for
// one alone. A text that JSON cannot carry byte for byte (invalid UTF-8)
// fails the group before it runs, so each of its completions runs alone.
func (s *Store) completeMany(q querier, cs []*Completion) error {
	if len(cs) == 1 {
		return s.completeOne(q, cs[0])
	}
	done, ok := completionsJSON(cs)
	if !ok {
		return errNotJSONText
	}
	rows, err := s.execRows(context.Background(), q, stmtCompleteMany, protocol.Args{"done": done})
	if err != nil {
		return err
	}
	status := make(map[string]cairnqtype.Status, rows.len())
	for i := range rows.len() {
		ref, err := refAt(rows, i)
		if err != nil {
			return err
		}
		status[ref.ID] = ref.Status
	}
	for _, c := range cs {
		if st, ok := status[c.ID]; ok {
			c.Status, c.Err = st, nil
		} else {
			c.Status, c.Err = "", &cairnqtype.LostLeaseError{ID: c.ID}
		}
	}
	return nil
}

// take reads complete.sql's rows into c.
func takeOutcome(c *Completion, rows []executor.Row) error {
	if len(rows) == 0 {
		c.Status, c.Err = "", &cairnqtype.LostLeaseError{ID: c.ID}
		return nil
	}
	ref, err := rowToRef(rows[0])
	if err != nil {
		return err
	}
	c.Status, c.Err = ref.Status, nil
	return nil
}

type errString string

func (e errString) Error() string { return string(e) }

const errNotJSONText = errString("cairnq: a completion holds text JSON cannot carry")

// completionsJSON is complete_many's :done argument: a JSON array of
// [id, worker_id, result] triples, result as a JSON string holding the
// result's text, or null. ok is false when a text is not valid UTF-8,
// which a JSON string cannot carry unchanged.
func completionsJSON(cs []*Completion) (string, bool) {
	n := 2
	for _, c := range cs {
		n += len(c.ID) + len(c.WorkerID) + 16
		if t, ok := c.Result.(string); ok {
			n += len(t) + len(t)/8
		}
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, c := range cs {
		if !utf8.ValidString(c.ID) || !utf8.ValidString(c.WorkerID) {
			return "", false
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = appendJSONString(b, c.ID)
		b = append(b, ',')
		b = appendJSONString(b, c.WorkerID)
		b = append(b, ',')
		switch t := c.Result.(type) {
		case nil:
			b = append(b, "null"...)
		case string:
			if !utf8.ValidString(t) {
				return "", false
			}
			b = appendJSONString(b, t)
		default:
			return "", false
		}
		b = append(b, ']')
	}
	b = append(b, ']')
	return string(b), true
}

// appendJSONString appends s, valid UTF-8, as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch >= 0x20 && ch != '"' && ch != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch ch {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0')
			b = strconv.AppendUint(b, uint64(ch)>>4, 16)
			b = strconv.AppendUint(b, uint64(ch)&0xf, 16)
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
