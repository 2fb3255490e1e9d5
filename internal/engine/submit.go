package engine

import (
	"context"
	"errors"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/protocol"
)

// DefaultMaxAttempts is how many attempts a task gets unless told otherwise.
const DefaultMaxAttempts = 3

// SubmitParams is one task to submit. Zero values mean the defaults.
type SubmitParams struct {
	Name    string // required
	Payload any    // any JSON-encodable value; nil is JSON {}
	cairnqtype.SubmitOptions
	// Admit, when set, is called with the task's queue once p has been
	// validated and before anything is written; its error ends the submit
	// (a Client's queue-depth gate waits here).
	Admit func(ctx context.Context, queue string) error
}

// ValidateSubmit checks p exactly as Submit does, without writing, for
// callers that must reject bad input before waiting on anything.
func ValidateSubmit(p SubmitParams) error {
	_, err := submitArgs(p)
	return err
}

// submitArgs validates p and builds the new task's row but for the id
// and the default root id, which stampID adds at the write. Everything
// that can fail on bad input fails here, before any write, and nothing
// here mints an id, so validating alone (ValidateSubmit) leaves the ids'
// order alone.
func submitArgs(p SubmitParams) (*insertRow, error) {
	const op = "submit"
	if err := ValidateName(op, "name", p.Name); err != nil {
		return nil, err
	}
	if err := checkOptionalName(op, "queue", p.Queue); err != nil {
		return nil, err
	}
	if err := checkText(op, "key", p.Key, cairnqtype.MaxKeyBytes); err != nil {
		return nil, err
	}
	for _, f := range [...]struct{ arg, v string }{
		{"parent id", p.ParentID}, {"root id", p.RootID}, {"correlation id", p.CorrelationID},
	} {
		if err := checkOptionalName(op, f.arg, f.v); err != nil {
			return nil, err
		}
	}
	if p.Conflict != "" && !p.Conflict.Valid() {
		return nil, argError(op, "conflict", "unknown strategy %q (want reuse, reuse-succeeded, reject or replace)", p.Conflict)
	}
	if p.MaxAttempts < 0 || p.MaxAttempts > cairnqtype.MaxAttemptsLimit {
		return nil, argError(op, "max attempts", "must be between 1 and %d, got %d", cairnqtype.MaxAttemptsLimit, p.MaxAttempts)
	}
	if p.Priority < cairnqtype.MinPriority || p.Priority > cairnqtype.MaxPriority {
		return nil, argError(op, "priority", "must be between %d and %d, got %d", cairnqtype.MinPriority, cairnqtype.MaxPriority, p.Priority)
	}
	if p.Delay < 0 {
		return nil, argError(op, "delay", "must be >= 0, got %v", p.Delay)
	}
	payload, err := encodeJSON("payload", p.Payload, "{}")
	if err != nil {
		return nil, err
	}
	metadata, err := encodeJSON("metadata", p.Metadata, "{}")
	if err != nil {
		return nil, err
	}
	if metadata == "" || metadata[0] != '{' {
		return nil, argError(op, "metadata", "must encode as a JSON object, got %.40s", metadata)
	}
	queue := p.Queue
	if queue == "" {
		queue = cairnqtype.DefaultQueue
	}
	maxAttempts := p.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = DefaultMaxAttempts
	}
	return &insertRow{
		name:          p.Name,
		queue:         queue,
		payload:       payload,
		metadata:      metadata,
		maxAttempts:   int64(maxAttempts),
		priority:      int64(p.Priority),
		delayMS:       ms(p.Delay),
		parentID:      p.ParentID,
		rootID:        p.RootID, // stampID sets the default
		correlationID: p.CorrelationID,
	}, nil
}

// stampID gives ins, built by submitArgs for p, the new task's id (and
// root id, unless p names one), minted at now.
func stampID(ins *insertRow, p SubmitParams, now time.Time) {
	ins.id = newTaskID(now)
	if p.RootID == "" {
		ins.rootID = ins.id
	}
}

// insertArgs validates p and builds the new task's row for a write at
// now.
func insertArgs(p SubmitParams, now time.Time) (*insertRow, error) {
	ins, err := submitArgs(p)
	if err != nil {
		return nil, err
	}
	stampID(ins, p, now)
	return ins, nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Submit stores a new task, or, for a keyed submit, applies the conflict
// strategy under the key's lock. It returns the task the caller should
// follow: the new one, or the existing one a reuse strategy accepted.
func (s *Store) Submit(ctx context.Context, p SubmitParams) (*cairnqtype.Task, error) {
	ins, err := submitArgs(p)
	if err != nil {
		return nil, err
	}
	if p.Admit != nil {
		if err := p.Admit(ctx, ins.queue); err != nil {
			return nil, err
		}
	}
	stampID(ins, p, s.now()) // after the wait: the id carries the write's time
	var t *cairnqtype.Task
	if be, ok := s.be.(*pgBackend); ok && p.Key == "" {
		t, err = be.insertGrouped(ctx, ins)
	} else {
		write := s.be.write
		if p.Key == "" {
			write = s.be.writeSingle // one insert
		}
		err = write(ctx, func(q querier) error {
			t, err = s.submitIn(ctx, q, p.Key, p.Conflict, ins)
			return err
		})
	}
	if err != nil {
		return nil, err
	}
	if t.Status == cairnqtype.StatusQueued {
		s.hub.Queued(t.Queue)
	}
	return t, nil
}

// submitIn is the body of Submit, run inside the transaction q belongs to.
func (s *Store) submitIn(ctx context.Context, q querier, key string, conflict cairnqtype.Conflict, ins *insertRow) (*cairnqtype.Task, error) {
	if key == "" {
		return s.insertTask(ctx, q, ins)
	}
	if _, err := s.exec(ctx, q, stmtLockKey, protocol.Args{"key": key}); err != nil {
		return nil, err
	}
	return s.submitKeyedIn(ctx, q, key, conflict, ins)
}

// submitKeyedIn is a keyed submitIn once the key's lock is held, or a lock
// that covers it (a workflow's, for its steps' keys).
func (s *Store) submitKeyedIn(ctx context.Context, q querier, key string, conflict cairnqtype.Conflict, ins *insertRow) (*cairnqtype.Task, error) {
	keyArgs := protocol.Args{"key": key}
	rows, err := s.exec(ctx, q, stmtGetKey, keyArgs)
	if err != nil {
		return nil, err
	}
	if len(rows) > 0 {
		current, _, err := asString("task_id", rows[0]["task_id"])
		if err != nil {
			return nil, err
		}
		// Read the task itself: a purge (which takes no key lock) may have
		// removed it, and then the key is free whatever the strategy.
		rows, err = s.exec(ctx, q, stmtGet, protocol.Args{"id": current})
		if err != nil {
			return nil, err
		}
		if len(rows) > 0 {
			existing, err := rowToTask(rows[0])
			if err != nil {
				return nil, err
			}
			reused, cancel, err := keyConflict(key, conflict, existing)
			if err != nil || reused != nil {
				return reused, err
			}
			if cancel {
				if _, err := s.exec(ctx, q, stmtCancel, protocol.Args{"id": existing.ID}); err != nil {
					return nil, err
				}
			}
		}
	}
	t, err := s.insertTask(ctx, q, ins)
	if err != nil {
		return nil, err
	}
	if _, err := s.exec(ctx, q, stmtUpsertKey, protocol.Args{"key": key, "task_id": t.ID}); err != nil {
		return nil, err
	}
	return t, nil
}

// keyConflict decides a keyed submit that finds existing holding its
// key, under conflict ("" is ConflictReuse): existing itself to return
// (reused), an *AlreadyExistsError, or a new task to write, superseding
// existing, which is canceled first when it is live (cancel). A finished
// task has nothing to stop, and canceling it again would rewrite a
// settled row. Submit and SubmitMany both decide here.
func keyConflict(key string, conflict cairnqtype.Conflict, existing *cairnqtype.Task) (reused *cairnqtype.Task, cancel bool, err error) {
	if conflict == "" {
		conflict = cairnqtype.ConflictReuse
	}
	if conflict == cairnqtype.ConflictReject {
		return nil, false, &cairnqtype.AlreadyExistsError{Key: key, TaskID: existing.ID}
	}
	if conflict.Accepts(existing.Status) {
		return existing, false, nil
	}
	return nil, !existing.IsTerminal(), nil
}

// insertTask runs insert_task, reading its row by position where q
// allows it (it runs once per task).
func (s *Store) insertTask(ctx context.Context, q querier, ins *insertRow) (*cairnqtype.Task, error) {
	rows, err := s.execRows(ctx, q, stmtInsertTask, ins.args())
	if err != nil {
		return nil, err
	}
	if rows.len() == 0 {
		return nil, errors.New("cairnq: insert returned no row")
	}
	return taskAt(rows, 0)
}

// ---------------------------------------------------------------- reads
