package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/group"
	"github.com/cairnq/cairnq-go/internal/workflowspec"
	"github.com/cairnq/cairnq-go/protocol"
)

// rowAt is one request's row in a group's result: row i of rows, or none
// (rows nil) when the statement left it out. The rows of a flush are
// shared by its requests, read by position where the executor allows it,
// so a group of settlements builds no map per row.
type rowAt struct {
	rows rowSet
	i    int
}

// groupResult is one request's share of a group's flush.
type groupResult = group.Result[rowAt]

// newGrouper starts a Grouper whose requests each get a row; Close on
// the store's backend (or the store, for status reads) stops it.
func newGrouper[In any](flush func(ctx context.Context, ins []In) []groupResult, weigh func(In) int) *group.Grouper[In, rowAt] {
	return group.New(flush, weigh, cairnqtype.ErrClosed)
}

// grouped runs in through g after the nil-context check every store call
// makes.
func grouped[In any](ctx context.Context, g *group.Grouper[In, rowAt], in In) (groupResult, error) {
	if err := checkCtx(ctx); err != nil {
		return groupResult{}, err
	}
	return g.Do(ctx, in)
}

// byID pairs each id with its row among rows (matched on the "id"
// column); an id with no row gets none. When err is set, every id gets
// it and no row.
func byID(ids []string, rows rowSet, err error) []groupResult {
	out := make([]groupResult, len(ids))
	if err != nil {
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	at := make(map[string]int, rows.len())
	for i := range rows.len() {
		if id, ok, _ := asString("id", rows.value(i, "id")); ok {
			at[id] = i
		}
	}
	for i, id := range ids {
		if r, ok := at[id]; ok {
			out[i].Value = rowAt{rows, r}
		}
	}
	return out
}

// ---------------------------------------------------------------- completions

func newCompleter(s *Store, ex executor.Executor) *group.Grouper[*Completion, rowAt] {
	return newGrouper(func(ctx context.Context, cs []*Completion) []groupResult {
		return s.completeManyPG(ctx, pgQuerier{ex}, cs, false)
	}, nil)
}

// completeManyPG settles cs with one complete_many on q and returns one
// result per completion, in order: its row (id, status), nil when its
// lease was gone, or the statement's error. With marked it runs
// complete_steps instead, which also writes the succeeded key of each
// step among cs that the statement left succeeded.
func (s *Store) completeManyPG(ctx context.Context, q querier, cs []*Completion, marked bool) []groupResult {
	ids := make([]string, len(cs))
	workers := make([]string, len(cs))
	results := make([]any, len(cs))
	for i, c := range cs {
		ids[i], workers[i], results[i] = c.ID, c.WorkerID, c.Result
	}
	stmt, args := stmtCompleteMany, protocol.Args{"ids": pgArray(ids), "worker_ids": pgArray(workers), "results": pgArrayNullable(results)}
	if marked {
		var stepIDs, keys, records []string
		for _, c := range cs {
			if c.Step != nil {
				stepIDs = append(stepIDs, c.ID)
				keys = append(keys, workflowspec.SucceededKey(c.Step.Record, c.Step.Step))
				records = append(records, c.Step.Record)
			}
		}
		stmt = stmtCompleteSteps
		args["marked_ids"], args["marked_keys"], args["marked_records"] = pgArray(stepIDs), pgArray(keys), pgArray(records)
	}
	rows, err := s.execRows(ctx, q, stmt, args)
	return byID(ids, rows, err)
}

// completeGrouped settles one task through the backend's completion
// groups. A row the statement did not return is a lease that was gone.
func (b *pgBackend) completeGrouped(ctx context.Context, id, workerID string, result any) (cairnqtype.TaskRef, error) {
	res, err := grouped(ctx, b.completer, &Completion{ID: id, WorkerID: workerID, Result: result})
	if err != nil {
		return cairnqtype.TaskRef{}, err
	}
	if res.Value.rows == nil {
		return cairnqtype.TaskRef{}, &cairnqtype.LostLeaseError{ID: id}
	}
	return refAt(res.Value.rows, res.Value.i)
}

// ---------------------------------------------------------------- workers' row locks

// lockingRows is held while a group takes its workers' row locks, so
// that two groups (of durable steps, of step successes) never each hold
// one the other waits for. A group holding its locks waits for no other,
// and nothing else holds more than one, so no wait goes round.
var lockingRows sync.Mutex

// lockRows takes each distinct non-nil lock of rows and returns what
// releases them.
func lockRows(rows []sync.Locker) (unlock func()) {
	held := make([]sync.Locker, 0, len(rows))
	lockingRows.Lock()
	for _, l := range rows {
		if l != nil && !slices.Contains(held, l) {
			l.Lock()
			held = append(held, l)
		}
	}
	lockingRows.Unlock()
	return func() {
		for _, l := range held {
			l.Unlock()
		}
	}
}

// ---------------------------------------------------------------- durable steps

// stepWrite is one durable step's record on its way to durable_step_many.
type stepWrite struct {
	id, workerID      string
	attempt, position int
	entry             string
	rows              sync.Locker // the worker's lock on its multi-row writes, or nil
}

// newStepper groups the durable steps of many handlers into one
// durable_step_many: a step's record costs a share of one commit, not a
// commit of its own (docs/plans/durable-execution.md measures the two).
func newStepper(s *Store, ex executor.Executor) *group.Grouper[*stepWrite, rowAt] {
	return newGrouper(func(ctx context.Context, ws []*stepWrite) []groupResult {
		// The group updates many workers' rows in one statement, as each
		// worker's heartbeat does its own: held apart by each worker's
		// lock, or the two lock rows in different orders and deadlock.
		locks := make([]sync.Locker, len(ws))
		for i, w := range ws {
			locks[i] = w.rows
		}
		defer lockRows(locks)()
		ids := make([]string, len(ws))
		workers := make([]string, len(ws))
		attempts := make([]string, len(ws))
		positions := make([]string, len(ws))
		entries := make([]string, len(ws))
		for i, w := range ws {
			ids[i], workers[i], entries[i] = w.id, w.workerID, w.entry
			attempts[i], positions[i] = strconv.Itoa(w.attempt), strconv.Itoa(w.position)
		}
		rows, err := s.execRows(ctx, pgQuerier{ex}, stmtDurableStepMany, protocol.Args{
			"ids": pgArray(ids), "worker_ids": pgArray(workers), "attempts": pgArray(attempts),
			"positions": pgArray(positions), "entries": pgArray(entries),
		})
		return byID(ids, rows, err)
	}, nil)
}

// stepGrouped writes one step through the backend's step groups and
// reports whether its row was appended to.
func (b *pgBackend) stepGrouped(ctx context.Context, w *stepWrite) (bool, error) {
	res, err := grouped(ctx, b.stepper, w)
	if err != nil {
		return false, err
	}
	return res.Value.rows != nil, res.Err
}

// ---------------------------------------------------------------- submits

// insertGrouped stores one unkeyed submit (its row, ins) through the
// backend's insert groups.
func (b *pgBackend) insertGrouped(ctx context.Context, ins *insertRow) (*cairnqtype.Task, error) {
	res, err := grouped(ctx, b.inserter, ins)
	if err != nil {
		return nil, err
	}
	return insertedTask(res.Value.rows, res.Value.i, ins)
}

// insertedTask is the task that row i of rs, a row insert_task or
// insert_many returned for ins, says was stored. insert_task returns the
// whole row, read as every task row is; insert_many returns only what the
// server decided (the creation time, which is also the update time, and
// the due time delayMS after it) or rewrote (the JSON, as jsonb prints
// it), and every other column is what ins sent or the column's default
// (attempt 0, the rest NULL), as the whole row would read.
func insertedTask(rs rowSet, i int, ins *insertRow) (*cairnqtype.Task, error) {
	if rs.value(i, "name") != nil { // NOT NULL: the whole row
		return taskAt(rs, i)
	}
	created, ok, err := asInt64("created_at_ms", rs.value(i, "created_at_ms"))
	if err == nil && !ok {
		err = errors.New("created_at_ms is NULL")
	}
	payload, e1 := asJSON("payload", rs.value(i, "payload"))
	metadata, e2 := asJSON("metadata", rs.value(i, "metadata"))
	if err = errors.Join(err, e1, e2); err != nil {
		return nil, fmt.Errorf("cairnq: reading inserted task row %q: %w", ins.id, err)
	}
	return ins.task(created, payload, metadata), nil
}

// newInserter groups unkeyed submits (their rows) into insert_many. A lone
// submit runs insert_task, exactly as before grouping existed. When the
// server refuses the group's statement for its data (rowsRefused: nothing
// of it was committed), each submit runs alone, so a row the server
// refuses fails only its own caller. Any other error goes to every caller,
// whose outcome is then as uncertain as a lone statement's would be.
func newInserter(s *Store, ex executor.Executor, log *slog.Logger) *group.Grouper[*insertRow, rowAt] {
	one := func(ctx context.Context, ins *insertRow) groupResult {
		rows, err := s.execRows(ctx, pgQuerier{ex}, stmtInsertTask, ins.args())
		if err == nil && rows.len() == 0 {
			err = errors.New("cairnq: insert returned no row")
		}
		if err != nil {
			return groupResult{Err: err}
		}
		return groupResult{Value: rowAt{rows: rows}}
	}
	flush := func(ctx context.Context, all []*insertRow) []groupResult {
		if len(all) == 1 {
			return []groupResult{one(ctx, all[0])}
		}
		args, ids := insertManyArgs(all)
		rows, err := s.execRows(ctx, pgQuerier{ex}, stmtInsertMany, args)
		if rowsRefused(err) {
			out := make([]groupResult, len(all))
			refused := 0
			for i, ins := range all {
				if out[i] = one(ctx, ins); out[i].Err != nil {
					refused++
				}
			}
			if refused == 0 {
				// No row is at fault: insert_many itself does not work
				// here (an executor mangling text[] arguments, say), and
				// every group now costs a statement per submit.
				log.WarnContext(ctx, "cairnq: grouped submits were refused, then each inserted alone; insert_many does not work through this executor",
					"submits", len(all), "err", err)
			}
			return out
		}
		out := byID(ids, rows, err)
		for i := range out {
			if out[i].Value.rows == nil && out[i].Err == nil {
				out[i].Err = errors.New("cairnq: insert_many returned no row for " + ids[i])
			}
		}
		return out
	}
	return newGrouper(flush, (*insertRow).weight)
}

// rowsRefused reports whether err is the server refusing a statement for
// the data it carried (SQLSTATE classes 22 data exception, 23 integrity
// constraint violation, 54 program limit exceeded). The statement then
// failed as a whole and took no effect.
func rowsRefused(err error) bool {
	var se interface{ SQLState() string }
	if !errors.As(err, &se) {
		return false
	}
	class := se.SQLState()[:min(2, len(se.SQLState()))]
	return class == "22" || class == "23" || class == "54"
}
