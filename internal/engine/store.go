package engine

import (
	"context"
	"encoding/json"
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
	statusReads *group.Grouper[string, rowAt]
	// stepSettles groups the successes of workflow steps into one
	// transaction each group (settleStepsGrouped).
	stepSettles   *group.Grouper[*stepSuccess, Settled]
	statusReading atomic.Bool
	// workflowSubmits groups the workflows submitted together into one
	// transaction (workflow_submit.go).
	workflowSubmits *group.Grouper[*preparedWorkflow, *cairnqtype.Task]
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
	// flows is what this process read of the workflows it advances from
	// a settled step (workflow_step_advance.go).
	flows flowCache
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
	s.stepSettles = newStepSettler(s)
	s.workflowSubmits = newWorkflowSubmitter(s)
	return s, nil
}

// Held is the engine under a public store.Store, which embeds it. Only
// this module's packages can reach it, through Of, or set it, through
// Bind: both take a value with Held's unexported method, which no type
// outside this module can have but by embedding Held, and no program
// outside the module can name Held to embed it. So the engine, which
// makes no compatibility promise, stays out of reach of other programs
// even through the public store package, and nothing there needs a key.
type Held struct{ s *Store }

func (h *Held) held() *Held { return h }

// holder is a value that embeds Held: a *store.Store.
type holder interface{ held() *Held }

// Of returns the engine under h, nil if none was bound.
func Of(h holder) *Store { return h.held().s }

// Bind puts s under h.
func Bind(h holder, s *Store) { h.held().s = s }

// SettleOnClaim reports whether a busy worker's completions ride on its
// next claim (ClaimRequest.Settle), as on SQLite, where one writer commits
// everything. Otherwise (Postgres) a worker's completer writes them
// beside its claims, on a connection of their own.
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
	if s.stepSettles != nil {
		s.stepSettles.Close()
	}
	if s.workflowSubmits != nil {
		s.workflowSubmits.Close()
	}
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

func oneTask(rows []executor.Row) (*cairnqtype.Task, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	return rowToTask(rows[0])
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// ---------------------------------------------------------------- submit
