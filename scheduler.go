package cairnq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/internal/cronspec"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/quietlog"
)

// SlotKeyPrefix starts the key of every task a Scheduler submits; see
// SlotKey.
const SlotKeyPrefix = "cairnq:periodic:"

// MaxCatchUp bounds ScheduleOptions.CatchUp, and is how many slots back a
// starting scheduler looks for the newest slot the database holds.
const MaxCatchUp = 1000

// DefaultScheduleGrace is ScheduleOptions.Grace when it is zero.
const DefaultScheduleGrace = time.Minute

// ErrSchedulerRunning is returned by Run while another Run of the same
// Scheduler has not returned.
var ErrSchedulerRunning = errors.New("cairnq: scheduler already running")

// SlotKey returns the key of the task a Scheduler submits for entryID's
// slot at slot: SlotKeyPrefix, the entry id, ":" and the slot's Unix time
// in milliseconds in decimal, e.g. "cairnq:periodic:nightly-report:1767312000000".
// Any process (in any SDK) that derives the same key submits the same
// slot, so it gets the task already there instead of a second one.
// c.GetByKey(ctx, SlotKey(id, slot)) finds a slot's task.
func SlotKey(entryID string, slot time.Time) string {
	return SlotKeyPrefix + entryID + ":" + strconv.FormatInt(slot.UnixMilli(), 10)
}

// MissedPolicy is what an entry does with the slots that fell due while no
// scheduler could submit them (every scheduler process was down, or the
// database could not be written within the slot's grace).
type MissedPolicy int

// The missed-slot policies.
const (
	// MissedSkip submits no missed slot: the entry resumes with the next
	// one. The default.
	MissedSkip MissedPolicy = iota
	// MissedRunOnce submits the newest missed slot: one run stands for
	// all of them.
	MissedRunOnce
	// MissedCatchUp submits the newest ScheduleOptions.CatchUp missed
	// slots, oldest first.
	MissedCatchUp
)

// String returns the policy's name.
func (p MissedPolicy) String() string {
	switch p {
	case MissedSkip:
		return "skip"
	case MissedRunOnce:
		return "run-once"
	case MissedCatchUp:
		return "catch-up"
	}
	return "MissedPolicy(" + strconv.Itoa(int(p)) + ")"
}

// SchedulerOptions are a Scheduler's settings. The zero value (or nil) is
// the defaults below.
type SchedulerOptions struct {
	// Logger receives submissions (debug), missed slots (info) and errors
	// the scheduler retries (warn). Default: the client's logger.
	Logger *slog.Logger
}

// ScheduleOptions are the optional parts of an entry. The zero value (or
// nil) is the defaults below.
type ScheduleOptions struct {
	// ID names the entry in its tasks' keys (see SlotKey): every process
	// that schedules this entry must give it the same ID, and no other
	// entry may use it. 1 to 255 bytes of UTF-8, no NUL. Default: the
	// task name, a space and the spec with its runs of white space made
	// single spaces, then, when Location is set and not UTC, a space and
	// the location's name ("report 0 9 * * * Europe/Paris"). Two entries
	// of one name and spec (with different payloads, say) need IDs.
	ID string
	// Location is the time zone the spec's fields are read in. A spec
	// may name its zone itself ("CRON_TZ=Asia/Tokyo 0 9 * * *"), but not
	// as well as this. Default UTC, never the host's zone, so that every
	// host computes the same slots (time.Local is taken as given: then
	// every host scheduling the entry must be set to the same zone).
	Location *time.Location
	// Submit holds the tasks' queue, priority, attempts, delay, metadata
	// and links. Key and Conflict must be empty: the scheduler sets them.
	Submit *SubmitOptions
	// Missed is what to do with slots that fell due while no scheduler
	// submitted them. Default MissedSkip.
	Missed MissedPolicy
	// CatchUp is how many missed slots MissedCatchUp submits, 1 to
	// MaxCatchUp; it must be 0 with the other policies.
	CatchUp int
	// Grace is how late a slot may be submitted and still count as on
	// time (on-time slots are submitted whatever Missed says). A running
	// scheduler submits every slot at most Grace late, so a paused
	// process or a busy database loses no slot; a starting one takes only
	// the newest due slot as on time, as the older ones fell due while it
	// was down. Slots found later than that are missed ones. Default
	// DefaultScheduleGrace (one minute).
	Grace time.Duration
}

// Scheduler submits a task for every slot of its entries, the times a cron
// spec names, on a Client. Any number of schedulers, in any number of
// processes, may run the same entries: each slot's task is submitted under
// a key derived from the entry and the slot (SlotKey) with the reject
// strategy, so the first submit of a slot makes its task and every other
// finds the key taken. There is no leader to elect and none to lose; a
// scheduler that restarts finds the slots already submitted.
//
// Slots are computed on the database's clock: on Postgres a scheduler
// measures its offset from the server's clock when it starts and every
// minute after; on SQLite every process shares the host's clock, which is
// the one the store uses.
//
// A slot submitted once stays submitted as long as its task (and so its
// key) is kept: a purged task frees its key. Keep finished periodic tasks
// longer than the window a scheduler may still submit their slot in (the
// grace, or the CatchUp slots a starting scheduler may submit late), or a
// purged slot may be submitted again.
//
// While it runs, a scheduler rewrites a row of cairnq_meta per entry
// every 30 seconds (its spec, task, next slot and newest slot submitted),
// which Client.Schedules reads; docs/operators.md has the format.
type Scheduler struct {
	c   *Client
	log *slog.Logger

	// offset is the database clock minus this process's, in nanoseconds.
	offset atomic.Int64

	mu      sync.Mutex
	entries []*schedEntry
	ids     map[string]bool
	running bool
	spawn   func(*schedEntry) // starts an entry's loop; set while Run runs
	// rewrite asks beat to rewrite the rows now: an entry's first
	// evaluation found its newest slot. Set while Run runs.
	rewrite chan struct{}
}

// schedEntry is one added entry.
type schedEntry struct {
	id      string
	spec    string
	name    string
	payload any
	opts    SubmitOptions
	sched   cronspec.Schedule
	policy  cronspec.Policy
	missed  MissedPolicy
	// last is the newest slot submitted or found submitted, in Unix
	// milliseconds (0: none yet), for the entry's row.
	last atomic.Int64
}

// NewScheduler returns a scheduler submitting to c. Add entries, then Run
// it in every process that should keep them going.
func NewScheduler(c *Client, opts *SchedulerOptions) *Scheduler {
	s := &Scheduler{c: c, ids: map[string]bool{}}
	if opts != nil && opts.Logger != nil {
		s.log = opts.Logger
	} else if c != nil {
		s.log = c.log
	}
	if s.log == nil {
		s.log = quietlog.Default()
	}
	return s
}

// Add adds an entry: a task named name with payload, submitted for every
// slot of spec, and returns the entry's ID. spec is five cron fields
// (minute hour day-of-month month day-of-week), six with a leading seconds
// field, a descriptor (@yearly, @annually, @monthly, @weekly, @daily,
// @midnight, @hourly), or "@every D" with D a Go duration of whole seconds,
// at least 1s, whose slots are the multiples of D since the Unix epoch. A
// spec that does not parse or never fires, and any other argument Submit
// would refuse, is an *ArgumentError, found here rather than at a slot.
// The payload is encoded at every submit.
//
// Add may be called while Run runs; the entry starts at once.
func (s *Scheduler) Add(spec, name string, payload any, opts *ScheduleOptions) (string, error) {
	const op = "schedule"
	if s == nil || s.c == nil {
		return "", &ArgumentError{Op: op, Arg: "client", Reason: "is nil"}
	}
	if opts == nil {
		opts = &ScheduleOptions{}
	}
	if err := engine.ValidateName(op, "name", name); err != nil {
		return "", err
	}
	sched, err := cronspec.Parse(spec, opts.Location, time.Now())
	if err != nil {
		return "", &ArgumentError{Op: op, Arg: "spec", Reason: err.Error()}
	}
	e := &schedEntry{id: opts.ID, spec: spec, name: name, payload: payload, sched: sched, missed: opts.Missed}
	if e.id == "" {
		e.id = name + " " + strings.Join(strings.Fields(spec), " ")
		if opts.Location != nil && opts.Location != time.UTC && opts.Location.String() != "UTC" {
			e.id += " " + opts.Location.String()
		}
	}
	if err := engine.ValidateName(op, "id", e.id); err != nil {
		return "", err
	}
	if opts.Submit != nil {
		e.opts = *opts.Submit
	}
	if e.opts.Key != "" {
		return "", &ArgumentError{Op: op, Arg: "key", Reason: "is set by the scheduler (see SlotKey); leave SubmitOptions.Key empty"}
	}
	if e.opts.Conflict != "" {
		return "", &ArgumentError{Op: op, Arg: "conflict", Reason: "is set by the scheduler (reject); leave SubmitOptions.Conflict empty"}
	}
	e.opts.Conflict = ConflictReject
	// The longest key this entry will make: a slot in the year 9999.
	probe := e.opts
	probe.Key = SlotKey(e.id, time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC))
	if err := engine.ValidateSubmit(submitParams(name, payload, probe)); err != nil {
		return "", err
	}
	switch {
	case opts.Missed == MissedCatchUp && (opts.CatchUp < 1 || opts.CatchUp > MaxCatchUp):
		return "", &ArgumentError{Op: op, Arg: "CatchUp", Reason: fmt.Sprintf("must be between 1 and %d with MissedCatchUp, got %d", MaxCatchUp, opts.CatchUp)}
	case opts.Missed == MissedCatchUp:
		e.policy.CatchUp = opts.CatchUp
	case opts.Missed == MissedRunOnce || opts.Missed == MissedSkip:
		if opts.CatchUp != 0 {
			return "", &ArgumentError{Op: op, Arg: "CatchUp", Reason: fmt.Sprintf("is only for MissedCatchUp, got %d with %v", opts.CatchUp, opts.Missed)}
		}
		if opts.Missed == MissedRunOnce {
			e.policy.CatchUp = 1
		}
	default:
		return "", &ArgumentError{Op: op, Arg: "Missed", Reason: fmt.Sprintf("unknown policy %v", opts.Missed)}
	}
	if opts.Grace < 0 {
		return "", &ArgumentError{Op: op, Arg: "Grace", Reason: fmt.Sprintf("must be >= 0, got %v", opts.Grace)}
	}
	e.policy.Grace = opts.Grace
	if e.policy.Grace == 0 {
		e.policy.Grace = DefaultScheduleGrace
	}
	e.policy.Lookback = MaxCatchUp

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids[e.id] {
		return "", &ArgumentError{Op: op, Arg: "id", Reason: fmt.Sprintf("%q is already an entry of this scheduler", e.id)}
	}
	s.ids[e.id] = true
	s.entries = append(s.entries, e)
	if s.spawn != nil {
		s.spawn(e)
	}
	return e.id, nil
}

// Run keeps the entries going until ctx ends, then returns nil once every
// goroutine it started has ended. It returns ErrClosed when the client is
// closed under it, ErrDatabaseReplaced when its SQLite file is deleted or
// replaced, and ErrSchedulerRunning when another Run of s has not
// returned. Errors on the way (a busy or unreachable database) are logged
// and retried with backoff; a slot that cannot be submitted within its
// grace becomes a missed slot.
func (s *Scheduler) Run(ctx context.Context) error {
	if err := checkCtx(ctx, "scheduler run"); err != nil {
		return err
	}
	if s == nil || s.c == nil {
		return &ArgumentError{Op: "scheduler run", Arg: "client", Reason: "is nil"}
	}
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return ErrSchedulerRunning
	}
	s.running = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running = false
		s.mu.Unlock()
	}()

	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	clock := s.clockReader()
	if clock != nil {
		if err := s.measureUntilDone(ctx, clock); err != nil {
			return goneCause(err) // nil when ctx ended
		}
	} else {
		s.offset.Store(0)
	}

	var wg sync.WaitGroup
	s.mu.Lock()
	s.rewrite = make(chan struct{}, 1)
	s.spawn = func(e *schedEntry) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := goneCause(s.runEntry(ctx, e)); err != nil {
				stop(err)
			}
		}()
	}
	for _, e := range s.entries {
		s.spawn(e)
	}
	wg.Add(1)
	go func(rewrite <-chan struct{}) {
		defer wg.Done()
		s.beat(ctx, rewrite)
	}(s.rewrite)
	s.mu.Unlock()

	if clock != nil {
		s.keepMeasuring(ctx, clock)
	}
	select {
	case <-ctx.Done():
	case <-s.c.store.Lost(): // an entry may sleep long before it would notice
		stop(s.c.store.LostErr())
	}
	s.mu.Lock()
	s.spawn = nil // no wg.Add after this point
	s.mu.Unlock()
	wg.Wait()
	return s.endCause(ctx)
}

// endCause is Run's result once ctx has ended: ErrClosed when the client
// was closed under it, ErrDatabaseReplaced when its file was, nil
// otherwise.
func (s *Scheduler) endCause(ctx context.Context) error {
	return goneCause(context.Cause(ctx))
}

// goneCause is what a Run ends with for err: ErrClosed itself for a
// closed store, err for a lost one, nil for anything else.
func goneCause(err error) error {
	switch {
	case errors.Is(err, ErrClosed):
		return ErrClosed
	case errors.Is(err, ErrDatabaseReplaced):
		return err
	}
	return nil
}

// now is the database clock, as this process estimates it.
func (s *Scheduler) now() time.Time {
	return time.Now().Add(time.Duration(s.offset.Load())).Round(0)
}

// schedDBClock reads the clock the store's statements use.
type schedDBClock interface {
	ConsoleNow(ctx context.Context) (time.Time, error)
}

// clockReader returns the database clock to measure, or nil on SQLite,
// whose statements use this process's clock (shared by every process on
// the host the file lives on).
func (s *Scheduler) clockReader() schedDBClock {
	if clock := s.c.store.DatabaseClock(); clock != nil {
		return clock
	}
	return nil
}

// clockRefresh is how often the offset from the database clock is measured
// again on Postgres.
const clockRefresh = time.Minute

// measure sets the offset from one reading of the database clock, taken
// as read halfway through the round trip.
func (s *Scheduler) measure(ctx context.Context, clock schedDBClock) error {
	t0 := time.Now()
	db, err := clock.ConsoleNow(ctx)
	if err != nil {
		return err
	}
	rtt := time.Since(t0)
	local := t0.Add(rtt / 2)
	s.offset.Store(int64(db.Sub(local.Round(0))))
	return nil
}

// measureUntilDone measures until a reading succeeds or ctx ends.
func (s *Scheduler) measureUntilDone(ctx context.Context, clock schedDBClock) error {
	for backoff := time.Duration(0); ; {
		err := s.measure(ctx, clock)
		if err == nil {
			return nil
		}
		if storeGone(err) {
			return err
		}
		backoff = schedBackoff(backoff)
		s.log.LogAttrs(ctx, slog.LevelWarn, logSchedClock, slog.Any("error", err), slog.Duration("retry_in", backoff))
		if !sleepCtx(ctx, backoff) {
			return ctx.Err()
		}
	}
}

// keepMeasuring refreshes the offset every clockRefresh until ctx ends.
func (s *Scheduler) keepMeasuring(ctx context.Context, clock schedDBClock) {
	for {
		if !sleepCtx(ctx, clockRefresh) {
			return
		}
		if err := s.measure(ctx, clock); err != nil && ctx.Err() == nil {
			s.log.LogAttrs(ctx, slog.LevelWarn, logSchedClock, slog.Any("error", err))
		}
	}
}

// maxSchedSleep caps one wait between evaluations, so a clock step (or a
// suspended host) is noticed within it.
const maxSchedSleep = time.Minute

// runEntry evaluates e at each of its slots until ctx ends.
func (s *Scheduler) runEntry(ctx context.Context, e *schedEntry) error {
	var cursor time.Time
	var backoff time.Duration
	attrs := []slog.Attr{slog.String("entry", e.id), slog.String("task_name", e.name)}
	for {
		next, err := s.evaluate(ctx, e, cursor)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			if storeGone(err) {
				return err
			}
			backoff = schedBackoff(backoff)
			s.log.LogAttrs(ctx, slog.LevelWarn, logSchedError, append(attrs, slog.Any("error", err), slog.Duration("retry_in", backoff))...)
			if !sleepCtx(ctx, backoff) {
				return ctx.Err()
			}
			continue
		}
		if !next.IsZero() && e.last.Swap(next.UnixMilli()) == 0 {
			s.rewriteRows() // the row shows the newest slot from the start
		}
		backoff, cursor = 0, next
		now := s.now()
		wait := maxSchedSleep
		if due := e.sched.Next(now); !due.IsZero() {
			wait = min(wait, due.Sub(now))
		}
		if !sleepCtx(ctx, wait) {
			return ctx.Err()
		}
	}
}

// evaluate submits what is due for e after cursor and returns the new
// cursor; on an error the cursor stays, and the next evaluation decides
// again from the database.
func (s *Scheduler) evaluate(ctx context.Context, e *schedEntry, cursor time.Time) (time.Time, error) {
	present := func(ctx context.Context, slot time.Time) (bool, error) {
		_, err := s.c.GetStatusByKey(ctx, SlotKey(e.id, slot))
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	}
	d, err := cronspec.Decide(ctx, e.sched, cursor, s.now(), e.policy, present)
	if err != nil {
		return cursor, err
	}
	attrs := []slog.Attr{slog.String("entry", e.id), slog.String("task_name", e.name)}
	if d.NoHistory {
		s.log.LogAttrs(ctx, slog.LevelDebug, logSchedNoHistory, attrs...)
	}
	if d.Late > 0 || (d.Missed > 0 && e.policy.CatchUp > 0) {
		s.log.LogAttrs(ctx, slog.LevelInfo, logSchedCaughtUp, append(attrs,
			slog.String("policy", e.missed.String()), slog.Int("submitted_late", d.Late), slog.Int("skipped", d.Missed))...)
	}
	for _, slot := range d.Submit {
		o := e.opts
		o.Key = SlotKey(e.id, slot)
		t, err := s.c.Submit(ctx, e.name, e.payload, &o)
		if errors.Is(err, ErrAlreadyExists) {
			continue // another scheduler submitted it first
		}
		if err != nil {
			return cursor, err
		}
		if s.log.Enabled(ctx, slog.LevelDebug) {
			s.log.LogAttrs(ctx, slog.LevelDebug, logSchedSubmitted, append(attrs,
				slog.String("key", o.Key), slog.String("task_id", t.ID), slog.Time("slot", slot))...)
		}
	}
	return d.Cursor, nil
}

// schedBackoff doubles a retry wait from 1s to 30s.
func schedBackoff(d time.Duration) time.Duration {
	if d <= 0 {
		return time.Second
	}
	return min(2*d, 30*time.Second)
}

// scheduleBeatEvery is how often a running scheduler rewrites its
// entries' rows of cairnq_meta (Client.Schedules).
const scheduleBeatEvery = 30 * time.Second

// rewriteRows asks beat to rewrite the entries' rows now.
func (s *Scheduler) rewriteRows() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case s.rewrite <- struct{}{}:
	default:
	}
}

// beat keeps the entries' rows of cairnq_meta, which Client.Schedules
// reads, until ctx ends: written at once, every scheduleBeatEvery and
// when rewrite asks, after it deletes the rows silent for a day. The
// rows stay when it stops: another scheduler may run the same entries.
func (s *Scheduler) beat(ctx context.Context, rewrite <-chan struct{}) {
	st := s.c.store
	warn := func(err error) {
		if err != nil && ctx.Err() == nil && !storeGone(err) {
			s.log.LogAttrs(ctx, slog.LevelWarn, logSchedError, slog.String("writing", "the schedules' rows"), slog.Any("error", err))
		}
	}
	if rows, err := st.Schedules(ctx); err == nil {
		for _, r := range rows {
			if !r.BeatAt.IsZero() && time.Since(r.BeatAt) > engine.WorkerForgetAfter {
				warn(st.ScheduleForget(ctx, r.ID))
			}
		}
	} else {
		warn(err)
	}
	t := time.NewTicker(scheduleBeatEvery)
	defer t.Stop()
	for {
		s.mu.Lock()
		entries := slices.Clone(s.entries)
		s.mu.Unlock()
		now := s.now()
		for _, e := range entries {
			queue := e.opts.Queue
			if queue == "" {
				queue = DefaultQueue
			}
			warn(st.ScheduleBeat(ctx, cairnqtype.ScheduleInfo{ID: e.id, Spec: e.spec, Name: e.name, Queue: queue,
				Missed: e.missed.String(), Next: e.sched.Next(now), LastSlot: msOrZero(e.last.Load()),
				BeatAt: now, Every: scheduleBeatEvery}))
		}
		select {
		case <-t.C:
		case <-rewrite:
		case <-ctx.Done():
			return
		}
	}
}

// msOrZero is the time of Unix milliseconds ms, the zero time for 0.
func msOrZero(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
