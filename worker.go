package cairnq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnq/cairnq-go/internal/claimloop"
	"github.com/cairnq/cairnq-go/internal/completer"
	"github.com/cairnq/cairnq-go/internal/engine"
)

// Handler runs one task. Its context is canceled when the attempt loses its
// lease, when a cancel is requested for the task, when MaxRun is exceeded,
// or when the worker shuts down past its deadline. What it returns settles
// the task: a nil error succeeds it with result (any JSON-encodable value),
// an error fails it (see TaskError for choosing retryability). A panic
// fails it as handler_panic; runtime.Goexit settles nothing and is
// reported through OnError, the task left to its lease.
type Handler func(ctx context.Context, tc *TaskContext) (result any, err error)

// BatchHandler runs up to a batch of tasks in one call. Tasks it does not
// settle itself (TaskContext.Succeed / Fail) are settled by how the call
// ended: returned → succeeded, with results[id] as each one's result;
// returned a non-retryable *TaskError → failed for good; any other error →
// failed and retried with backoff, each task on its own attempt count.
type BatchHandler func(ctx context.Context, tcs []*TaskContext) (results map[string]any, err error)

// HandlerOptions are a handler's own limits. The zero value (or nil) means
// none beyond the worker's.
type HandlerOptions struct {
	// Concurrency caps this name's calls in flight (0: only the worker's cap).
	Concurrency int
	// Resource joins a capacity declared in WorkerOptions.Resources that
	// several names share, e.g. one GPU.
	Resource string
	// RateLimit bounds how fast this worker starts tasks of this name
	// (nil: no bound). See RateLimit for why it is per process.
	RateLimit *RateLimit
	// GlobalLimit bounds how many tasks of this name run at once across
	// every Go worker on the database, counted from the running rows
	// themselves (nil: no bound). See GlobalLimit for what it costs and
	// what it does not cover.
	GlobalLimit *GlobalLimit
}

// GlobalLimit is at most Max tasks of a name running at once across
// every Go worker on the database, or, with PerMetadataKey, at most Max
// per value of that metadata member (per tenant; a task without the
// member counts under the value "").
//
// A claim of the name takes a lock of its own (an advisory lock on
// Postgres; SQLite's write lock already serializes claims), counts the
// name's running tasks whose lease has not run out, and claims only as
// many as the limit leaves room for: no new state, so a task whose lease
// expired stops counting at once, and a worker never holds a claimed
// task waiting for room. Every worker of the name must set the same
// limit; TypeScript and Python workers do not honour it (their running
// tasks still count against it). When the limit is full a worker finds
// room again at its next poll (PollInterval), or at the next submit it
// hears of.
//
// The cost: a claim of the name is a transaction of four or five
// statements instead of one, and the claims of one name serialize on its
// lock across the fleet. A worker with a limited name claims its other
// names in the same transaction, so those wait with it while another
// worker holds the lock; workers without limited names are not slowed.
// A task that still runs after its lease expired (a stalled process) is
// not counted. On Postgres the count relies on READ COMMITTED, the
// server's default: a pool whose transactions default to REPEATABLE READ
// or SERIALIZABLE counts from a snapshot taken before the lock, and can
// pass the limit.
type GlobalLimit struct {
	// Max is how many may run at once, at least 1.
	Max int
	// PerMetadataKey, when set, makes Max a bound per value of this
	// metadata member: 1 to 64 letters, digits, '_' or '-'.
	PerMetadataKey string
}

// ErrorPhase says where an error the worker survived came from.
type ErrorPhase string

// The phases OnError reports.
const (
	PhaseClaim   ErrorPhase = "claim"   // a claim failed; the worker polls again
	PhaseExecute ErrorPhase = "execute" // settling or heartbeating a task failed
	// PhaseShutdown: Run returned while this task's handler, ignoring its
	// canceled context, still ran.
	PhaseShutdown ErrorPhase = "shutdown"
)

// WorkerOptions configures a Worker. Zero fields take the defaults.
type WorkerOptions struct {
	// ID identifies this worker in the tasks it leases. Default "worker_" + a ULID.
	ID string
	// Queues to claim from. Default ["default"].
	Queues []string
	// Concurrency is how many handler calls run at once; a batch call counts
	// as one. Default 1.
	Concurrency int
	// LeaseDuration is how long a claim or heartbeat holds a task. Default
	// 30s; at least MinLeaseDuration.
	LeaseDuration time.Duration
	// HeartbeatInterval is how often the worker renews every lease it holds,
	// in one statement. Default LeaseDuration/3; at least
	// MinHeartbeatInterval and less than LeaseDuration/2, so every lease is
	// renewed at least twice before it can run out.
	HeartbeatInterval time.Duration
	// PollInterval is the idle sleep between claims when nothing was
	// claimable. A submit ends it early, in any process on the
	// database. A worker that has just lost a task to another
	// process lets such submits wait, at most PollInterval (and 1s), so
	// that a fleet's idle processes do not all probe on every submit.
	// It also bounds how long an expired lease waits for an idle worker;
	// on Postgres the workers of a Client look for one about once a
	// second between them (less often while that read is slow), and a
	// worker whose poll left the look out polls again when it is due.
	// And it is how often the worker reads the queues paused for the
	// fleet (Client.PauseQueue): one small read each time.
	// Default 500ms; at least MinPollInterval.
	PollInterval time.Duration
	// ClaimBatch caps the rows one draw takes (never below one call of a
	// batch name). Default: the free call slots.
	ClaimBatch int
	// RetryBackoff is the base of the delay before a retryable failure runs
	// again; it doubles per attempt up to RetryBackoffMax, with equal jitter.
	// Default 1s; NoRetryBackoff requeues at once.
	RetryBackoff time.Duration
	// RetryBackoffMax caps the backoff. Default 30s.
	RetryBackoffMax time.Duration
	// MaxRun bounds one call's wall time. Past it the attempt is abandoned
	// (its contexts canceled and flagged lease-lost) and recorded as a
	// retryable handler_timeout failure. Default 0: no bound.
	MaxRun time.Duration
	// ShutdownTimeout is how long Run waits for running calls after its
	// context ends before canceling their contexts. Default 30s.
	ShutdownTimeout time.Duration
	// MaxInFlightBytes stops claiming while the running calls' payloads add
	// up to this many bytes. Default 0: no budget.
	MaxInFlightBytes int64
	// Resources declares capacities shared by the names that join them
	// (HandlerOptions.Resource): {"gpu": 1} runs one gpu call at a time.
	Resources map[string]int
	// OnError receives what the worker survives: a failed claim, a failed
	// settlement or heartbeat. Default: logged through Logger at error.
	OnError func(err error, phase ErrorPhase, taskID string)
	// Middleware wraps every handler call, the first outermost; see
	// Middleware.
	Middleware []Middleware
	// DurableStepMiddleware wraps every durable step's function that runs
	// (Once), the first outermost; see DurableStepMiddleware.
	DurableStepMiddleware []DurableStepMiddleware
	// Logger receives the worker's events (see the package documentation's
	// "Logging") and, through the default OnError, what it survives.
	// Default: the Client's (Options.Logger).
	Logger *slog.Logger
	// WorkflowSweep is how often the worker sweeps the workflows' records
	// that are due (SubmitWorkflow): a step another SDK's worker settled,
	// or one that lease recovery failed, is advanced by a sweep (a Go
	// worker's settlement advances in its own transaction). Each sweep is
	// one read of the due records, whether or not any workflow exists,
	// then a short write transaction per record found, at most 16 (at
	// once again while sweeps come back full). A sweep then reads the
	// records of the workflows that ended since the worker's last read
	// (every 5 s starting again 5 s back, for an end that committed
	// late) and advances the failed or canceled ones whose steps moved
	// since: a canceled workflow's steps still live are asked to stop
	// (another SDK's plain cancel of the record reached none), a failed
	// one whose step someone retried goes on (see Client.RetryWorkflow).
	// About every 5 minutes one sweep of all the Client's workers reads
	// every record of a failed or canceled workflow, in reads of 256;
	// the first at a random point of the minute after the first sweep,
	// so that processes started together do not all read at once.
	// Default DefaultWorkflowSweep; NoWorkflowSweep turns it off, which
	// leaves such workflows to the other workers' sweeps.
	WorkflowSweep time.Duration
}

// DefaultWorkflowSweep is WorkerOptions.WorkflowSweep's default.
const DefaultWorkflowSweep = 2 * time.Second

// NoWorkflowSweep, as WorkerOptions.WorkflowSweep, turns the sweep off.
const NoWorkflowSweep time.Duration = -1

// Worker claims tasks whose names it has handlers for and runs them.
// Register handlers with Handle / HandleBatch, then call Run.
type Worker struct {
	client *Client
	log    *slog.Logger
	st     *engine.Store
	claims claimer // st, but for tests
	id     string
	queues []string
	conc   int
	lease  time.Duration
	beat   time.Duration
	poll   time.Duration
	opts   WorkerOptions

	backoff, backoffMax time.Duration

	regMu   sync.Mutex
	regs    map[string]*registration
	order   []string // registration order, for a stable schedule
	started atomic.Bool

	// State of a run; owned by Run's goroutine unless noted.
	stopOnce sync.Once
	stopCh   chan struct{}
	stopped  chan struct{}
	giveUp   chan struct{} // closed when Run stops waiting for handlers
	// slots counts a Run's calls against the budgets (set by Run before
	// its loop starts); cursor is the draw the next claim starts from,
	// kept across Runs and WorkOnes.
	slots  *claimloop.Slots
	cursor int

	pause *claimloop.Pause // the queues Pause stopped

	// rowsMu keeps this worker's beat, its grouped settlements and the
	// groups of durable step records holding its tasks (Postgres) from
	// running at once. Each updates many of its tasks' rows in one
	// statement, locking them in whatever order their plans visit them,
	// so side by side they could deadlock, and the server notices only
	// after deadlock_timeout (1s by default), rolling one back: under
	// load a settlement's retries then outlasted a short lease
	// (TestNoLeaseLostWarningForASettledTask), and a step's attempt
	// ended (TestDurableStepsBesideHeartbeats). Each statement holds it
	// (a step group with the other workers' whose tasks it holds), never
	// across a retry's wait.
	rowsMu sync.Mutex

	mu   sync.Mutex              // guards live
	live map[string]*TaskContext // the calls' contexts whose leases the heartbeat renews
	// comp writes the settlements of Run's calls, in the store's form
	// (internal/completer), set by Run before its loop starts any call;
	// inline writes WorkOne's, set when the worker is made.
	comp, inline completer.Completer
}

type registration struct {
	name     string
	batch    int // 0: single-task delivery
	fn       Handler
	batchFn  BatchHandler
	opts     HandlerOptions
	ownDraw  bool
	resource string
}

// ErrWorkerStarted is returned by Handle after Run started and by a second Run.
var ErrWorkerStarted = errors.New("cairnq: worker already started")

// NewWorker returns a worker that runs tasks from c's database.
func NewWorker(c *Client, opts *WorkerOptions) (*Worker, error) {
	o := WorkerOptions{}
	if opts != nil {
		o = *opts
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	w := &Worker{
		client: c, st: c.store, claims: c.store, id: o.ID, queues: o.Queues, conc: o.Concurrency,
		lease: o.LeaseDuration, beat: o.HeartbeatInterval, poll: o.PollInterval, opts: o,
		backoff: o.RetryBackoff, backoffMax: o.RetryBackoffMax,
		regs: map[string]*registration{},
	}
	if w.id == "" {
		w.id = "worker_" + NewTaskID()[5:]
	}
	if len(w.queues) == 0 {
		w.queues = []string{DefaultQueue}
	}
	w.pause = claimloop.NewPause(w.queues)
	if w.conc == 0 {
		w.conc = 1
	}
	if w.lease == 0 {
		w.lease = engine.DefaultLease
	}
	if w.beat == 0 {
		w.beat = w.lease / 3
	}
	w.inline = completer.Inline(w.completerConfig())
	if w.poll == 0 {
		w.poll = 500 * time.Millisecond
	}
	switch w.backoff {
	case 0:
		w.backoff = DefaultRetryBackoff
	case NoRetryBackoff:
		w.backoff = 0
	}
	if w.backoffMax == 0 {
		w.backoffMax = DefaultRetryBackoffMax
	}
	if w.opts.ShutdownTimeout == 0 {
		w.opts.ShutdownTimeout = 30 * time.Second
	}
	if w.opts.WorkflowSweep == 0 {
		w.opts.WorkflowSweep = DefaultWorkflowSweep
	}
	w.log = o.Logger
	if w.log == nil {
		w.log = c.log
	}
	if w.opts.OnError == nil {
		w.opts.OnError = func(err error, phase ErrorPhase, taskID string) {
			w.log.Error(logWorkerError, "err", err, "phase", string(phase), "task_id", taskID, "worker_id", w.id)
		}
	}
	return w, nil
}

// Bounds on the worker's timing options. A lease shorter than
// MinLeaseDuration, or renewed less than twice per lease, expires under
// ordinary scheduling and network delay, and every such expiry runs a
// task a second time; a poll shorter than MinPollInterval turns an idle
// worker or a waiter into a busy loop against the database.
const (
	MinLeaseDuration     = time.Second
	MinHeartbeatInterval = 10 * time.Millisecond
	MinPollInterval      = 5 * time.Millisecond
)

// validate checks the options once, at construction.
func (o *WorkerOptions) validate() error {
	bad := func(arg, format string, a ...any) error {
		return &ArgumentError{Op: "worker", Arg: arg, Reason: fmt.Sprintf(format, a...)}
	}
	for _, f := range []struct {
		arg string
		v   int64
	}{
		{"Concurrency", int64(o.Concurrency)}, {"ClaimBatch", int64(o.ClaimBatch)},
		{"MaxRun", int64(o.MaxRun)}, {"ShutdownTimeout", int64(o.ShutdownTimeout)},
		{"MaxInFlightBytes", o.MaxInFlightBytes}, {"RetryBackoffMax", int64(o.RetryBackoffMax)},
	} {
		if f.v < 0 {
			return bad(f.arg, "must be >= 0, got %d", f.v)
		}
	}
	if o.RetryBackoff < 0 && o.RetryBackoff != NoRetryBackoff {
		return bad("RetryBackoff", "must be >= 0 or NoRetryBackoff, got %v", o.RetryBackoff)
	}
	lease := o.LeaseDuration
	if lease == 0 {
		lease = engine.DefaultLease
	}
	if lease < MinLeaseDuration {
		return bad("LeaseDuration", "must be >= %v (0 for the default %v), got %v", MinLeaseDuration, engine.DefaultLease, o.LeaseDuration)
	}
	if b := o.HeartbeatInterval; b != 0 && (b < MinHeartbeatInterval || b >= lease/2) {
		return bad("HeartbeatInterval", "must be at least %v and less than half the lease (%v), got %v", MinHeartbeatInterval, lease/2, b)
	}
	if p := o.PollInterval; p != 0 && p < MinPollInterval {
		return bad("PollInterval", "must be >= %v, got %v", MinPollInterval, p)
	}
	if p := o.WorkflowSweep; p != 0 && p != NoWorkflowSweep && p < MinPollInterval {
		return bad("WorkflowSweep", "must be >= %v or NoWorkflowSweep, got %v", MinPollInterval, p)
	}
	if o.ID != "" {
		if err := engine.ValidateName("worker", "ID", o.ID); err != nil {
			return err
		}
	}
	for _, q := range o.Queues {
		if err := engine.ValidateName("worker", "queue", q); err != nil {
			return err
		}
	}
	for i, mw := range o.Middleware {
		if mw == nil {
			return bad("Middleware", "entry %d is nil", i)
		}
	}
	for i, mw := range o.DurableStepMiddleware {
		if mw == nil {
			return bad("DurableStepMiddleware", "entry %d is nil", i)
		}
	}
	for name, n := range o.Resources {
		if n < 1 {
			return bad("Resources", "%q has capacity %d, want >= 1", name, n)
		}
	}
	return nil
}

// ID returns the worker's id.
func (w *Worker) ID() string { return w.id }

// Handle registers h for tasks named name, delivered one at a time.
func (w *Worker) Handle(name string, h Handler, opts *HandlerOptions) error {
	if h == nil {
		return &ArgumentError{Op: "handle", Arg: "handler", Reason: fmt.Sprintf("is nil for %q", name)}
	}
	return w.register(&registration{name: name, fn: h}, opts)
}

// HandleBatch registers h for tasks named name, delivered up to batch at a
// time in one call. concurrency counts calls, so a full batch needs only
// one free slot.
func (w *Worker) HandleBatch(name string, batch int, h BatchHandler, opts *HandlerOptions) error {
	if h == nil {
		return &ArgumentError{Op: "handle", Arg: "handler", Reason: fmt.Sprintf("is nil for %q", name)}
	}
	if batch < 1 {
		return &ArgumentError{Op: "handle", Arg: "batch size", Reason: fmt.Sprintf("for %q must be >= 1, got %d", name, batch)}
	}
	return w.register(&registration{name: name, batch: batch, batchFn: h}, opts)
}

func (w *Worker) register(r *registration, opts *HandlerOptions) error {
	if opts != nil {
		r.opts = *opts
	}
	if err := engine.ValidateName("handle", "name", r.name); err != nil {
		return err
	}
	if r.name == WorkflowName {
		return &ArgumentError{Op: "handle", Arg: "name", Reason: fmt.Sprintf("%q is the name of workflows' records, which the worker sweeps itself", r.name)}
	}
	if r.opts.Concurrency < 0 {
		return &ArgumentError{Op: "handle", Arg: "concurrency", Reason: fmt.Sprintf("for %q must be >= 0, got %d", r.name, r.opts.Concurrency)}
	}
	if r.opts.Resource != "" {
		if _, ok := w.opts.Resources[r.opts.Resource]; !ok {
			return &ArgumentError{Op: "handle", Arg: "resource", Reason: fmt.Sprintf(
				"%q joins resource %q, which WorkerOptions.Resources does not declare", r.name, r.opts.Resource)}
		}
	}
	if rl := r.opts.RateLimit; rl != nil {
		if err := rl.validate(r.name); err != nil {
			return err
		}
		r.opts.RateLimit = &RateLimit{Rate: rl.Rate, Burst: rl.Burst} // a copy: the caller's may change
	}
	if g := r.opts.GlobalLimit; g != nil {
		if err := engine.ValidateGlobalLimit(r.name, engine.GlobalLimit{Max: g.Max, PerKey: g.PerMetadataKey}); err != nil {
			return err
		}
		r.opts.GlobalLimit = &GlobalLimit{Max: g.Max, PerMetadataKey: g.PerMetadataKey} // a copy
	}
	r.resource = r.opts.Resource
	// A name that limits itself needs its own quota in the claim; every
	// other name shares one draw where a task is a call.
	r.ownDraw = r.batch > 0 || r.opts.Concurrency > 0 || r.resource != "" || r.opts.RateLimit != nil || r.opts.GlobalLimit != nil
	w.regMu.Lock()
	defer w.regMu.Unlock()
	if w.started.Load() {
		return ErrWorkerStarted
	}
	if _, dup := w.regs[r.name]; dup {
		return &ArgumentError{Op: "handle", Arg: "name", Reason: fmt.Sprintf("a handler for %q is already registered", r.name)}
	}
	w.regs[r.name] = r
	w.order = append(w.order, r.name)
	return nil
}

func (w *Worker) failDelay(attempt int, retryable bool) time.Duration {
	if !retryable {
		return 0
	}
	return retryDelay(attempt, w.backoff, w.backoffMax)
}

func (w *Worker) report(err error, phase ErrorPhase, taskID string) {
	defer func() { recover() }() // a hook that panics must not take the worker down
	w.opts.OnError(err, phase, taskID)
}
