package cairnq

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/maintenance"
	"github.com/cairnq/cairnq-go/internal/quietlog"
	"github.com/cairnq/cairnq-go/store"
)

// Options are a Client's settings on either backend. SQLiteOptions and
// PostgresOptions embed them beside the settings only one backend has, so
// a setting a backend cannot honour does not compile against it.
type Options struct {
	// Logger receives the client's events and, unless they are given
	// loggers of their own, its workers' and schedulers' (the package
	// documentation's "Logging" lists them). Default nil: WARN and above,
	// through slog.Default()'s handler; pass slog.Default() (or any
	// logger) to have INFO and below as that logger's handler allows.
	Logger *slog.Logger

	// MaxQueueDepth, when > 0, gates Submit on every queue: a submit waits
	// while the queue holds this many queued tasks. Default 0 (no gate).
	MaxQueueDepth int
	// QueueDepths sets the gate per queue, overriding MaxQueueDepth for the
	// queues it names. A queue with neither is not gated.
	QueueDepths map[string]int
	// MaxQueueWait is how long a gated submit waits for room before failing
	// with ErrQueueFull. Default 10 minutes.
	MaxQueueWait time.Duration

	// Retention, when set, purges finished tasks in the background while
	// the client is open.
	Retention *RetentionOptions

	// SubmitHooks wrap every submit, the first outermost; see SubmitHook.
	SubmitHooks []SubmitHook

	// OpenExisting opens only a database cairnq is already installed in,
	// and changes nothing about its schema: Open creates no file or
	// directory (the file is opened with mode=rw) and leaves the journal
	// mode and planner statistics alone; OpenPostgres creates no ledger or
	// table; neither applies a migration. For tools and for processes
	// whose migrations run elsewhere (a deploy step, cairnq migrate). The
	// client still writes tasks when asked to (Submit, Cancel, Purge,
	// Retention). Refusals change nothing:
	//   - no SQLite file, a named Postgres schema that does not exist, or
	//     no cairnq tables: ErrNoDatabase;
	//   - another protocol major: *ProtocolVersionMismatchError;
	//   - a ledger lacking migrations this SDK has: ErrSchemaMismatch.
	// A database a newer SDK of the same major migrated further opens,
	// with a warning logged. InspectSQLite and InspectPostgres report the
	// same without opening a client. Default false: create and migrate as
	// needed.
	OpenExisting bool
}

// SQLiteOptions are the settings of Open. The zero value (or nil) is a
// client with the defaults below.
type SQLiteOptions struct {
	Options
	// BusyTimeout is how long a write waits for another process to release
	// the write lock before failing with ErrBusy. Default 5s.
	BusyTimeout time.Duration
	// FullSync makes every commit survive a power cut (synchronous=FULL).
	// Default false (synchronous=NORMAL in WAL: an application crash loses
	// nothing).
	FullSync bool
	// AllowOtherTables lets Open add cairnq's tables to a database that
	// already holds other tables but no cairnq ones. Default false: Open
	// refuses it with ErrForeignDatabase and leaves it as it was.
	AllowOtherTables bool
}

// PostgresOptions are the settings of OpenPostgres. The zero value (or
// nil) is a client with the defaults below.
type PostgresOptions struct {
	Options
	// Schema is the schema cairnq's tables live in; OpenPostgres asserts
	// the executor's connections resolve there, and naming it confirms a
	// deliberate second installation in one database. Adapters opened
	// from a DSN take the same option and set search_path. Default:
	// wherever the connection resolves.
	Schema string
	// CloseExecutor makes Close close the executor given to OpenPostgres.
	// Default false: an application's pool is never closed by cairnq.
	CloseExecutor bool
}

// Client submits tasks and reads, waits on, cancels, retries and purges
// them. It is safe for concurrent use. Close it when done.
type Client struct {
	store   *engine.Store
	ownsSt  bool
	log     *slog.Logger
	gate    *depthGate
	sweeper *maintenance.Retention
	hooks   []SubmitHook

	closeOnce sync.Once
	closeErr  error
}

// Open opens the SQLite database at path (created with its parent
// directories if absent; ":memory:" for a private in-memory one), migrates
// it and returns a client on it. With Options.OpenExisting it creates and
// migrates nothing.
func Open(ctx context.Context, path string, opts *SQLiteOptions) (*Client, error) {
	if opts == nil {
		opts = &SQLiteOptions{}
	}
	st, err := engine.OpenSQLite(ctx, path, engine.SQLiteOptions{
		BusyTimeout:      opts.BusyTimeout,
		FullSync:         opts.FullSync,
		Logger:           quietlog.Or(opts.Logger),
		AllowOtherTables: opts.AllowOtherTables,
		OpenExisting:     opts.OpenExisting,
	})
	if err != nil {
		return nil, userErr(err)
	}
	return ownClient(st, &opts.Options)
}

// OpenPostgres opens a client on a Postgres database reached through ex, an
// adapter over the application's own pool (cairnqpgx, cairnqlibpq, the
// database/sql executor, gorm, bun) or one opened from a DSN. It checks the
// schema, migrates under a lock (with Options.OpenExisting: only checks
// that nothing needs migrating) and checks the protocol version. When ex
// can LISTEN, waiters and idle workers wake on notifications; otherwise
// they poll.
func OpenPostgres(ctx context.Context, ex executor.Executor, opts *PostgresOptions) (*Client, error) {
	if opts == nil {
		opts = &PostgresOptions{}
	}
	st, err := engine.OpenPostgres(ctx, ex, engine.PostgresOptions{
		Schema: opts.Schema, CloseExecutor: opts.CloseExecutor, Logger: quietlog.Or(opts.Logger),
		OpenExisting: opts.OpenExisting,
	})
	if err != nil {
		return nil, userErr(err)
	}
	return ownClient(st, &opts.Options)
}

// ownClient is newClient for a store the client opened, and so closes.
func ownClient(st *engine.Store, opts *Options) (*Client, error) {
	c, err := newClient(st, opts)
	if err != nil {
		st.Close()
		return nil, err
	}
	c.ownsSt = true
	return c, nil
}

func newClient(st *engine.Store, opts *Options) (*Client, error) {
	c := &Client{store: st, log: quietlog.Or(opts.Logger), hooks: slices.Clone(opts.SubmitHooks)}
	for i, h := range c.hooks {
		if h == nil {
			return nil, &ArgumentError{Op: "open", Arg: "SubmitHooks", Reason: fmt.Sprintf("hook %d is nil", i)}
		}
	}
	gate, err := newDepthGate(st, opts)
	if err != nil {
		return nil, err
	}
	c.gate = gate
	if opts.Retention != nil {
		sw, err := newRetention(st, *opts.Retention, c.log)
		if err != nil {
			return nil, err
		}
		c.sweeper = sw
		sw.Start()
	}
	return c, nil
}

// Close stops the retention sweeper (waiting for a sweep in flight) and,
// for a client made by Open, closes the database.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		if c.sweeper != nil {
			c.sweeper.Stop()
		}
		if c.ownsSt {
			c.closeErr = c.store.Close()
		}
	})
	return c.closeErr
}

// Store returns the protocol-level API over c's database: one call per
// protocol operation, for tools and certification (package store). It
// lives as long as c.
func (c *Client) Store() *store.Store {
	st := new(store.Store)
	engine.Bind(st, c.store)
	return st
}

// submitParams is what the engine submits for name, payload and o.
func submitParams(name string, payload any, o SubmitOptions) engine.SubmitParams {
	return engine.SubmitParams{Name: name, Payload: payload, SubmitOptions: o.row()}
}

// Submit stores a task named name with payload (any JSON-encodable value;
// a value JSON cannot hold is a *SerializationError and nothing is
// written). With a key it applies the conflict strategy and may return an
// existing task instead. When the queue is gated (Options.MaxQueueDepth) it
// first waits for room, failing with ErrQueueFull past MaxQueueWait.
//
// On Postgres, unkeyed submits from goroutines of one Client that arrive
// while another is being written share one statement and one commit; each
// returns once its own row is committed, and a row the server refuses
// fails only its own call. Keyed submits each run their own transaction.
func (c *Client) Submit(ctx context.Context, name string, payload any, opts *SubmitOptions) (*Task, error) {
	if err := checkCtx(ctx, "submit"); err != nil {
		return nil, err
	}
	return c.submitThrough(ctx, newSubmission(name, payload, opts, false), c.insert)
}

func newSubmission(name string, payload any, opts *SubmitOptions, inTx bool) *Submission {
	s := &Submission{Name: name, Payload: payload, InTx: inTx}
	if opts != nil {
		s.Options = *opts
	}
	return s
}

// insert is Submit past the hooks.
func (c *Client) insert(ctx context.Context, s *Submission) (*Task, error) {
	p := submitParams(s.Name, s.Payload, s.Options)
	if c.gate != nil {
		p.Admit = c.gate.acquire
	}
	return taskResult(c.store.Submit(ctx, p))
}

// Get returns the task with id, or ErrNotFound.
func (c *Client) Get(ctx context.Context, id string) (*Task, error) {
	return taskResult(c.store.Get(ctx, id))
}

// GetByKey returns the task key points at, or ErrNotFound.
func (c *Client) GetByKey(ctx context.Context, key string) (*Task, error) {
	return taskResult(c.store.GetByKey(ctx, key))
}

// GetStatus returns the id and status of the task, or ErrNotFound, without
// reading its payload.
func (c *Client) GetStatus(ctx context.Context, id string) (TaskRef, error) {
	return refResult(c.store.GetStatus(ctx, id))
}

// GetStatusByKey is GetStatus for the task key points at.
func (c *Client) GetStatusByKey(ctx context.Context, key string) (TaskRef, error) {
	return refResult(c.store.GetStatusByKey(ctx, key))
}

// List returns the tasks matching every given filter, newest first.
func (c *Client) List(ctx context.Context, opts *ListOptions) ([]*Task, error) {
	if opts == nil {
		opts = &ListOptions{}
	}
	return tasksResult(c.store.List(ctx, opts.row()))
}

// Stats counts tasks per queue and status, zero-filled. queue "" counts
// every queue (a queue with no rows is absent); a named queue is always in
// the result. It counts every row it reports, so it is a dashboard read;
// poll QueueHeadroom instead.
func (c *Client) Stats(ctx context.Context, queue string) (map[string]StatusCounts, error) {
	counts, err := c.store.Stats(ctx, queue)
	if err != nil {
		return nil, userErr(err)
	}
	out := make(map[string]StatusCounts, len(counts))
	for q, n := range counts {
		out[q] = StatusCounts(n)
	}
	return out, nil
}

// QueueHeadroom returns how many more tasks queue can take before it holds
// maxDepth queued tasks (delayed ones included): maxDepth minus the depth,
// and 0 when full. It reads at most maxDepth index entries, so it is cheap
// to poll where Stats is not.
func (c *Client) QueueHeadroom(ctx context.Context, queue string, maxDepth int) (int, error) {
	n, err := c.store.QueueHeadroom(ctx, queue, maxDepth)
	return n, userErr(err)
}

// Cancel cancels a queued task at once; a running task is asked to stop and
// ends canceled when its worker settles it. It returns nil, nil when no
// queued or running task has that id. A workflow's record canceled this
// way cancels its workflow's steps too, as CancelWorkflow does.
func (c *Client) Cancel(ctx context.Context, id string) (*Task, error) {
	if t, err := c.store.Get(ctx, id); err == nil && t.Name == WorkflowName {
		// A workflow's record: canceled as CancelWorkflow cancels it, so
		// that its steps go with it and a retry of the record resumes it.
		if t.IsTerminal() {
			return nil, nil
		}
		return taskResult(c.store.CancelWorkflow(ctx, id))
	}
	return taskResult(c.store.Cancel(ctx, id))
}

// CancelByKey is Cancel for the task key points at.
func (c *Client) CancelByKey(ctx context.Context, key string) (*Task, error) {
	return taskResult(c.store.CancelByKey(ctx, key))
}

// RetryOptions tunes Retry.
type RetryOptions struct {
	// ResetAttempt restarts the attempt count, giving the task its full
	// MaxAttempts again.
	ResetAttempt bool
}

// Retry queues a failed or canceled task again. It returns nil, nil when no
// failed or canceled task has that id. A workflow's step retried this way
// takes its workflow on with it (see RetryWorkflow): a failed workflow
// goes on from the step, and a step of a canceled workflow is an
// *ArgumentError.
func (c *Client) Retry(ctx context.Context, id string, opts *RetryOptions) (*Task, error) {
	return taskResult(c.store.RetryTask(ctx, id, opts != nil && opts.ResetAttempt))
}

// RetryByKey is Retry for the task key points at.
func (c *Client) RetryByKey(ctx context.Context, key string, opts *RetryOptions) (*Task, error) {
	if t, isStep, err := c.retryStepByKey(ctx, key, opts != nil && opts.ResetAttempt); isStep || err != nil {
		return t, err
	}
	return taskResult(c.store.RetryByKey(ctx, key, opts != nil && opts.ResetAttempt))
}

// Purge deletes up to Limit finished tasks (succeeded, failed, canceled)
// older than OlderThan, with their keys, and returns their ids. Live tasks
// are never purged, nor the tasks of a workflow that has not ended (see
// RetentionOptions).
func (c *Client) Purge(ctx context.Context, opts *PurgeOptions) ([]string, error) {
	if opts == nil {
		opts = &PurgeOptions{}
	}
	ids, _, err := c.store.PurgeFrom(ctx, opts.row(), engine.NoPurgeFloor)
	return ids, userErr(err)
}

// storeGone reports whether err means the store serves nothing more:
// closed, or its SQLite file deleted or replaced. A loop meeting it ends
// with it rather than retry.
func storeGone(err error) bool { return engine.Gone(err) }

// checkCtx refuses a nil context with an *ArgumentError instead of the
// panic it would cause further down.
func checkCtx(ctx context.Context, op string) error {
	if ctx == nil {
		return &ArgumentError{Op: op, Arg: "context", Reason: "is nil"}
	}
	return nil
}
