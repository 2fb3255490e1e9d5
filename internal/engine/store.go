package engine

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/group"
	"github.com/cairnq/cairnq-go/internal/wake"
	"github.com/cairnq/cairnq-go/protocol"
)

// backend is what a dialect supplies: where reads run, where writes run
// (each write is one transaction, or one savepoint of a shared one), and
// how to release it all.
type backend interface {
	read(ctx context.Context, fn func(q querier) error) error
	write(ctx context.Context, fn func(q querier) error) error
	// writeSingle is write for a fn that runs exactly one statement, which
	// a backend may run without a savepoint of its own.
	writeSingle(ctx context.Context, fn func(q querier) error) error
	close() error
}

// Store runs the protocol's operations. They are written once, here, over
// the statements of protocol/ and a dialect backend; what differs between
// SQLite and Postgres is the SQL text and how values bind, never the logic.
// A Store is safe for concurrent use.
type Store struct {
	dialect protocol.Dialect
	stmts   *protocol.Set
	be      backend
	hub     *wake.Hub
	now     func() time.Time
	// On Postgres with a Listener: LISTEN per channel while this process
	// has subscribers for it. On a SQLite file: both are the one watch of
	// its WAL (sqlite_notify.go). nil otherwise (in-process wakeups only).
	queuedListen, doneListen *wake.Demand
	// statusReads groups the GetStatus calls that arrive while another
	// runs into one get_status_many: a thousand waits polling the same
	// client read their statuses in a handful of statements instead of
	// one each. statusReading is set while a lone read runs in its
	// caller's goroutine, which spares it the grouper's two hand-offs.
	statusReads   *group.Grouper[string, rowAt]
	statusReading atomic.Bool
	// How a worker runs on this store, fixed where it is opened; the
	// root asks these rather than the dialect.
	settleOnClaim bool // SQLite: completions ride on the next claim
	processClock  bool // SQLite: statements read this process's clock
	// fronts is where each draw shape last found its queue's front
	// (Postgres; claim_front.go).
	fronts claimFronts
	// leaseReads paces the reads for an expired lease of its workers:
	// busy ones' recoveries, idle ones' probes (Postgres; claim_front.go).
	leaseReads readPace
	// endedFull paces its workers' full looks over the ended workflows,
	// one for all of them (workflow_ended_look.go).
	endedFull endedFull
	// guard notices the SQLite file deleted or replaced under the store
	// (sqlite_identity.go); nil on Postgres and in memory.
	guard *fileGuard
}

// OpenSQLite opens (creating it and its parent directories if needed) the
// SQLite database at path, applies the protocol's migrations and checks its
// protocol version. path may be ":memory:" for a private in-memory database.
func OpenSQLite(ctx context.Context, path string, o SQLiteOptions) (*Store, error) {
	be, err := openSQLiteBackend(ctx, path, o)
	if err != nil {
		return nil, err
	}
	s := &Store{
		dialect: protocol.SQLite,
		// One writer commits everything: a worker's completions share its
		// claim's commit rather than queue beside it.
		settleOnClaim: true,
		processClock:  true,
		stmts:         protocol.Statements(protocol.SQLite),
		be:            be,
		hub:           wake.NewHub(),
		now:           time.Now,
	}
	be.settler = s
	s.guard = be.guard
	// One watch of the file for both: a commit elsewhere may mean either.
	s.queuedListen = be.startSQLiteNotify(s.hub)
	s.doneListen = s.queuedListen
	s.statusReads = newStatusReader(s)
	return s, nil
}

// Door is the first argument of package store's New and Store.Engine,
// which refuse a zero one. Only OpenDoor makes another, and only this
// module's packages can call it, so the engine, which makes no
// compatibility promise, stays out of reach of programs outside the
// module even through the public store package. (A zero Door can be had
// without naming the type, as a generic function's zero value, hence a
// key rather than the type alone.)
type Door struct{ key *doorKey }

type doorKey struct{}

var theDoor = Door{key: &doorKey{}}

// OpenDoor returns the Door package store asks for.
func OpenDoor() Door { return theDoor }

// Opened reports whether d came from OpenDoor.
func (d Door) Opened() bool { return d.key != nil && d == theDoor }

// SettleOnClaim reports whether a busy worker's completions ride on its
// next claim (ClaimHints.Settle), as on SQLite, where one writer commits
// everything. Otherwise (Postgres) a worker hands them to a settler that
// writes them beside its claims, on a connection of their own.
func (s *Store) SettleOnClaim() bool { return s.settleOnClaim }

// DatabaseClock returns s itself when statements read the database's
// clock (Postgres), so that a scheduler can measure its offset, and nil
// when they read this process's clock (SQLite: every process on the host
// the file lives on shares it).
func (s *Store) DatabaseClock() interface {
	ConsoleNow(ctx context.Context) (time.Time, error)
} {
	if s.processClock {
		return nil
	}
	return s
}

// Dialect reports which SQL dialect the store speaks.
func (s *Store) Dialect() protocol.Dialect { return s.dialect }

// Close releases the store's connections. Operations after Close fail with
// ErrClosed.
func (s *Store) Close() error {
	s.statusReads.Close() // first, so that a read in flight finishes on open connections
	return s.be.close()
}

// exec runs one named protocol statement through q.
func (s *Store) exec(ctx context.Context, q querier, name string, a protocol.Args) ([]executor.Row, error) {
	sql, args, err := s.compile(name, a)
	if err != nil {
		return nil, err
	}
	return q.query(ctx, sql, args)
}

// execRows is exec for the statements that run once per task (querier.scan).
func (s *Store) execRows(ctx context.Context, q querier, name string, a protocol.Args) (rowSet, error) {
	sql, args, err := s.compile(name, a)
	if err != nil {
		return nil, err
	}
	return q.scan(ctx, sql, args)
}

// compile gives the named statement's text for a and its arguments.
func (s *Store) compile(name string, a protocol.Args) (string, []any, error) {
	st := s.stmts.Get(name).Specialize(a)
	s.bindClock(a)
	args, err := st.Bind(a)
	return st.SQL, args, err
}

// readOne runs one read statement.
func (s *Store) readOne(ctx context.Context, name string, a protocol.Args) (rows []executor.Row, err error) {
	err = s.be.read(ctx, func(q querier) error {
		rows, err = s.exec(ctx, q, name, a)
		return err
	})
	return rows, err
}

// writeOne runs one write statement as its own transaction (or its own
// savepoint of a group commit).
func (s *Store) writeOne(ctx context.Context, name string, a protocol.Args) (rows []executor.Row, err error) {
	err = s.be.writeSingle(ctx, func(q querier) error {
		rows, err = s.exec(ctx, q, name, a)
		return err
	})
	return rows, err
}

// bindClock turns the relative times callers pass (lease_ms, delay_ms,
// older_than_ms) into the absolute ones SQLite statements take. SQLite has
// no clock every process agrees on except the host's, so the SDK supplies
// it; Postgres statements read the database clock and bind the relative
// values as they are.
func (s *Store) bindClock(a protocol.Args) {
	if s.dialect != protocol.SQLite {
		return
	}
	now := s.now().UnixMilli()
	a["now_ms"] = now
	if v, ok := a["lease_ms"].(int64); ok {
		a["lease_until_ms"] = now + v
	}
	if v, ok := a["delay_ms"].(int64); ok {
		a["run_at_ms"] = now + v
	}
	if v, ok := a["older_than_ms"].(int64); ok {
		a["before_ms"] = now - v
	}
}

// list binds a list-valued parameter: JSON array text for SQLite's
// json_each, a text[] literal for Postgres. nil stays NULL.
func (s *Store) list(v []string) any {
	if v == nil {
		return nil
	}
	if s.dialect != protocol.SQLite {
		return pgArray(v)
	}
	b, _ := json.Marshal(v) // []string always encodes
	return string(b)
}

func oneTask(rows []executor.Row) (*Task, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	return rowToTask(rows[0])
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// ---------------------------------------------------------------- submit

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
	if err := checkText(op, "key", p.Key, MaxKeyBytes); err != nil {
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
	if p.MaxAttempts < 0 || p.MaxAttempts > MaxAttemptsLimit {
		return nil, argError(op, "max attempts", "must be between 1 and %d, got %d", MaxAttemptsLimit, p.MaxAttempts)
	}
	if p.Priority < MinPriority || p.Priority > MaxPriority {
		return nil, argError(op, "priority", "must be between %d and %d, got %d", MinPriority, MaxPriority, p.Priority)
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
		queue = DefaultQueue
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
func (s *Store) Submit(ctx context.Context, p SubmitParams) (*Task, error) {
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
	var t *Task
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
	if t.Status == StatusQueued {
		s.hub.Queued(t.Queue)
	}
	return t, nil
}

// submitIn is the body of Submit, run inside the transaction q belongs to.
func (s *Store) submitIn(ctx context.Context, q querier, key string, conflict Conflict, ins *insertRow) (*Task, error) {
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
func (s *Store) submitKeyedIn(ctx context.Context, q querier, key string, conflict Conflict, ins *insertRow) (*Task, error) {
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
func keyConflict(key string, conflict Conflict, existing *Task) (reused *Task, cancel bool, err error) {
	if conflict == "" {
		conflict = ConflictReuse
	}
	if conflict == ConflictReject {
		return nil, false, &AlreadyExistsError{Key: key, TaskID: existing.ID}
	}
	if conflict.Accepts(existing.Status) {
		return existing, false, nil
	}
	return nil, !existing.IsTerminal(), nil
}

// insertTask runs insert_task, reading its row by position where q
// allows it (it runs once per task).
func (s *Store) insertTask(ctx context.Context, q querier, ins *insertRow) (*Task, error) {
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

// Get returns the task with id, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (*Task, error) {
	if err := checkID("get", id); err != nil {
		return nil, err
	}
	rows, err := s.readOne(ctx, stmtGet, protocol.Args{"id": id})
	return found(rows, err)
}

// GetByKey returns the task key points at, or ErrNotFound.
func (s *Store) GetByKey(ctx context.Context, key string) (*Task, error) {
	if err := checkKey("get", key); err != nil {
		return nil, err
	}
	rows, err := s.readOne(ctx, stmtGetByKey, protocol.Args{"key": key})
	return found(rows, err)
}

func found(rows []executor.Row, err error) (*Task, error) {
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, ErrNotFound
	}
	return rowToTask(rows[0])
}

// GetStatus returns the id and status of the task, or ErrNotFound. It
// reads neither payload nor result, which is why waiting loops poll it.
// A call with no other in flight reads at once; calls arriving while one
// runs share one read (statusReads).
func (s *Store) GetStatus(ctx context.Context, id string) (TaskRef, error) {
	if err := checkID("get status", id); err != nil {
		return TaskRef{}, err
	}
	if s.statusReading.CompareAndSwap(false, true) {
		defer s.statusReading.Store(false)
		rows, err := s.readOne(ctx, stmtGetStatus, protocol.Args{"id": id})
		return foundRef(rows, err)
	}
	res, err := grouped(ctx, s.statusReads, id)
	if err != nil {
		return TaskRef{}, err
	}
	if res.Value.rows == nil {
		return TaskRef{}, ErrNotFound
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
func (s *Store) GetStatusByKey(ctx context.Context, key string) (TaskRef, error) {
	if err := checkKey("get status", key); err != nil {
		return TaskRef{}, err
	}
	rows, err := s.readOne(ctx, stmtGetStatusByKey, protocol.Args{"key": key})
	return foundRef(rows, err)
}

func foundRef(rows []executor.Row, err error) (TaskRef, error) {
	if err != nil {
		return TaskRef{}, err
	}
	if len(rows) == 0 {
		return TaskRef{}, ErrNotFound
	}
	return rowToRef(rows[0])
}

// ListParams filters List. Empty fields do not filter.
type ListParams = cairnqtype.ListOptions

// List returns tasks matching every given filter, newest first.
func (s *Store) List(ctx context.Context, p ListParams) ([]*Task, error) {
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
func (s *Store) Stats(ctx context.Context, queue string) (map[string]StatusCounts, error) {
	if err := checkOptionalName("stats", "queue", queue); err != nil {
		return nil, err
	}
	rows, err := s.readOne(ctx, stmtStats, protocol.Args{"queue": nullable(queue)})
	if err != nil {
		return nil, err
	}
	out := map[string]StatusCounts{}
	if queue != "" {
		out[queue] = StatusCounts{}
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
		addCount(&c, Status(st), int(n))
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

// Cancel cancels a queued task at once and asks a running one to stop (the
// worker settles it canceled). It returns nil, nil when no queued or running
// task has that id.
func (s *Store) Cancel(ctx context.Context, id string) (*Task, error) {
	if err := checkID("cancel", id); err != nil {
		return nil, err
	}
	rows, err := s.writeOne(ctx, stmtCancel, protocol.Args{"id": id})
	if err != nil {
		return nil, err
	}
	t, err := oneTask(rows)
	s.settled(t)
	return t, err
}

// CancelByKey is Cancel for the task key points at, under the key's lock.
func (s *Store) CancelByKey(ctx context.Context, key string) (*Task, error) {
	t, err := s.byKey(ctx, key, stmtCancel, protocol.Args{})
	s.settled(t)
	return t, err
}

// Retry puts a failed or canceled task back in the queue, clearing its
// error, progress and lease; resetAttempt also restarts its attempt count.
// It returns nil, nil when no failed or canceled task has that id.
func (s *Store) Retry(ctx context.Context, id string, resetAttempt bool) (*Task, error) {
	if err := checkID("retry", id); err != nil {
		return nil, err
	}
	rows, err := s.writeOne(ctx, stmtRetry, protocol.Args{"id": id, "reset_attempt": resetAttempt})
	if err != nil {
		return nil, err
	}
	t, err := oneTask(rows)
	s.requeued(t)
	return t, err
}

// RetryByKey is Retry for the task key points at, under the key's lock.
func (s *Store) RetryByKey(ctx context.Context, key string, resetAttempt bool) (*Task, error) {
	t, err := s.byKey(ctx, key, stmtRetry, protocol.Args{"reset_attempt": resetAttempt})
	s.requeued(t)
	return t, err
}

// byKey resolves key and runs statement on its task, under the key's lock
// so a concurrent replace cannot repoint the key in between.
func (s *Store) byKey(ctx context.Context, key, statement string, a protocol.Args) (t *Task, err error) {
	if err := checkKey(statement, key); err != nil {
		return nil, err
	}
	err = s.be.write(ctx, func(q querier) error {
		t = nil
		keyArgs := protocol.Args{"key": key}
		if _, err := s.exec(ctx, q, stmtLockKey, keyArgs); err != nil {
			return err
		}
		rows, err := s.exec(ctx, q, stmtGetKey, keyArgs)
		if err != nil || len(rows) == 0 {
			return err
		}
		a["id"] = rows[0]["task_id"]
		rows, err = s.exec(ctx, q, statement, a)
		if err != nil {
			return err
		}
		t, err = oneTask(rows)
		return err
	})
	return t, err
}

// PurgeParams bounds one purge. Empty filters do not filter.
type PurgeParams = cairnqtype.PurgeOptions

// DefaultPurgeLimit is how many rows one Purge deletes at most by default.
const DefaultPurgeLimit = 1000

// ValidatePurge checks p the way Purge does, for callers that want to fail
// at configuration time.
func ValidatePurge(p PurgeParams) error {
	if p.OlderThan < 0 {
		return argError("purge", "older than", "must be >= 0, got %v", p.OlderThan)
	}
	if p.Limit < 0 {
		return argError("purge", "limit", "must be >= 1, got %d", p.Limit)
	}
	if p.Status != "" && !p.Status.IsTerminal() {
		return argError("purge", "status", "must be succeeded, failed or canceled, got %q", p.Status)
	}
	if err := checkOptionalName("purge", "queue", p.Queue); err != nil {
		return err
	}
	return checkOptionalName("purge", "name", p.Name)
}

// Purge deletes up to Limit terminal tasks that finished more than
// OlderThan ago and returns their ids; their keys go with them. Call it
// again until it returns fewer than Limit to drain a backlog in short
// writes.
func (s *Store) Purge(ctx context.Context, p PurgeParams) ([]string, error) {
	ids, _, err := s.purge(ctx, stmtPurge, p, NoPurgeFloor)
	return ids, err
}

// NoPurgeFloor is PurgeFrom's fromMS for a purge from the oldest. (Not
// math.MinInt64, which a driver inlining arguments, bun's pgdriver, would
// write as a cast Postgres refuses.)
const NoPurgeFloor = math.MinInt64 + 1

// PurgeFrom is the SDK's own purge (retention, Client.Purge): Purge of
// the tasks that finished at fromMS (epoch ms) or later, for a sweep that
// carries on where its last batch ended, keeping every task of a workflow
// whose record has not ended. A step still running reads the results of
// the steps it waited for (StepResult), and an advance that found a
// finished step gone would count it lost; Purge, the protocol's, as every
// other SDK's purge, knows nothing of workflows. reached is the latest
// completed_at_ms the batch deleted (Postgres), fromMS when it deleted
// nothing or the dialect does not say. SQLite deletes index entries with
// their rows, so it reads no floor.
func (s *Store) PurgeFrom(ctx context.Context, p PurgeParams, fromMS int64) (ids []string, reached int64, err error) {
	return s.purge(ctx, stmtPurgeFrom, p, fromMS)
}

// purge runs stmt, purge or purge_from, for Purge and PurgeFrom.
func (s *Store) purge(ctx context.Context, stmt string, p PurgeParams, fromMS int64) (ids []string, reached int64, err error) {
	if err := ValidatePurge(p); err != nil {
		return nil, fromMS, err
	}
	limit := p.Limit
	if limit == 0 {
		limit = DefaultPurgeLimit
	}
	rows, err := s.writeOne(ctx, stmt, protocol.Args{
		"older_than_ms": ms(p.OlderThan),
		"queue":         nullable(p.Queue),
		"status":        nullable(string(p.Status)),
		"name":          nullable(p.Name),
		"limit":         int64(limit),
		"from_ms":       fromMS,
	})
	if err != nil {
		return nil, fromMS, err
	}
	ids = make([]string, 0, len(rows))
	reached = fromMS
	for _, r := range rows {
		id, _, err := asString("id", r["id"])
		if err != nil {
			return nil, fromMS, err
		}
		ids = append(ids, id)
		if at, ok, err := asInt64("completed_at_ms", r["completed_at_ms"]); err != nil {
			return nil, fromMS, err
		} else if ok {
			reached = max(reached, at)
		}
	}
	return ids, reached, nil
}

// ---------------------------------------------------------------- in-process wakeups

// settled tells this process's waiters that t may have reached a terminal
// status, so they re-read now instead of at their next poll.
func (s *Store) settled(t *Task) {
	if t != nil {
		s.settledRef(TaskRef{ID: t.ID, Status: t.Status})
	}
}

// settledRef is settled for a task known by its id and status.
func (s *Store) settledRef(r TaskRef) {
	if r.Status.IsTerminal() {
		s.hub.Done(r.ID)
	}
}

// requeued tells this process's idle workers that t is claimable again.
func (s *Store) requeued(t *Task) {
	if t != nil && t.Status == StatusQueued {
		s.hub.Queued(t.Queue)
	}
}
