package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/bench/internal/pgadmin"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// The sustained benchmark (--bench sustained, issue 30): a steady offered
// load, retention purging finished work older than a minute, and a
// sample of the table every --sustained-every. After the steady phase a
// transaction holds the vacuum horizon for --sustained-hold, as a slow
// report on a replica with hot_standby_feedback would, and the load goes
// on for --sustained-after to show the recovery. River runs the same
// scenario after cairnq, on a database of its own.
var (
	sustainedFor       = flag.Duration("sustained-for", 30*time.Minute, "sustained: the steady phase")
	sustainedRate      = flag.Int("sustained-rate", 0, "sustained: tasks submitted per second (0: half of what each system can submit and run at once, measured first)")
	sustainedRiverRate = flag.Int("sustained-river-rate", 0, "sustained: River's tasks per second (0: --sustained-rate, or half of what River can submit and run at once)")
	sustainedHold      = flag.Duration("sustained-hold", 5*time.Minute, "sustained: a transaction holds the vacuum horizon this long after the steady phase (0: none)")
	sustainedAfter     = flag.Duration("sustained-after", 5*time.Minute, "sustained: load after the hold, to watch the recovery")
	sustainedEvery     = flag.Duration("sustained-every", time.Minute, "sustained: how often to sample sizes, dead tuples, throughput and p99")
	sustainedSeconds   = flag.String("sustained-seconds", "", "sustained: append each second's pickups (count, p50, p99, max) to this file, to set beside the server's log")
)

// sustainedSample is what one interval of the sustained benchmark saw.
type sustainedSample struct {
	at          time.Duration // since the load started
	phase       string        // steady, hold, after
	submitted   int64         // in the interval
	ran         int64         // handler starts in the interval
	p50, p99    time.Duration // submit-to-start of the interval's starts
	submitP99   time.Duration // what the interval's taken submits took, p99
	calmP99     time.Duration // p99 of the starts whose wait no control's stall overlapped
	setAside    int64         // the starts whose wait a control's stall overlapped
	tableBytes  int64         // heap, TOAST included
	indexBytes  int64
	live, dead  int64 // pg_stat_user_tables' estimates
	vacuums     int64 // autovacuum runs so far
	checkpoints int64 // the server's checkpoints so far, timed and requested
	rssKB       int64 // this process's peak RSS so far (VmHWM)
	controls    []controlStat
}

// controlStat is what a control's commits took in one interval.
type controlStat struct {
	name          string
	commits       int
	p50, p99, max time.Duration
	stalled       time.Duration // how long the commit under way at the sample had waited
	errs          int64         // failed commits so far
}

// pickups collects submit-to-start delays between samples, when each
// ended, and the wall-clock second of each slow one, so that a bad
// minute's p99 can be matched against the server's log (checkpoints,
// autovacuums) and against the controls' stalls.
type pickups struct {
	mu   sync.Mutex
	cur  batch
	room chan struct{} // when set, a pickup frees a slot in it (sustainedCapacity)
}

// batch is what pickups collected between two takes.
type batch struct {
	ds   []time.Duration
	ends []int64              // when each ended, Unix ns, in step with ds
	slow map[int64]slowSecond // by Unix second
}

// slowPickup is the delay from which a pickup counts as slow, and a
// control's commit as a stall.
const slowPickup = 100 * time.Millisecond

// slowSecond is the slow pickups that started within one second.
type slowSecond struct {
	n     int
	worst time.Duration
}

func (p *pickups) add(d time.Duration) {
	now := time.Now()
	p.mu.Lock()
	p.cur.ds = append(p.cur.ds, d)
	p.cur.ends = append(p.cur.ends, now.UnixNano())
	if d >= slowPickup {
		if p.cur.slow == nil {
			p.cur.slow = make(map[int64]slowSecond)
		}
		s := p.cur.slow[now.Unix()]
		s.n++
		s.worst = max(s.worst, d)
		p.cur.slow[now.Unix()] = s
	}
	p.mu.Unlock()
	if p.room != nil {
		select {
		case <-p.room:
		default:
		}
	}
}

func (p *pickups) take() batch {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.cur
	p.cur = batch{}
	return b
}

// span is a stretch of wall-clock time, Unix ns.
type span struct{ from, to int64 }

// stalls is the stretches in which a commit of b's took slowPickup or
// longer: a control's stalls, in which any writer of the server waited.
func (b batch) stalls() []span {
	var out []span
	for i, d := range b.ds {
		if d >= slowPickup {
			out = append(out, span{b.ends[i] - int64(d), b.ends[i]})
		}
	}
	return out
}

// outside is the delays of b whose wait overlapped none of stalls, and
// how many did overlap one.
func (b batch) outside(stalls []span) (kept []time.Duration, setAside int) {
	kept = make([]time.Duration, 0, len(b.ds))
	for i, d := range b.ds {
		from, to := b.ends[i]-int64(d), b.ends[i]
		if slices.ContainsFunc(stalls, func(s span) bool { return from < s.to && to > s.from }) {
			setAside++
			continue
		}
		kept = append(kept, d)
	}
	return kept, setAside
}

// printSlow prints the seconds that held slow pickups (or what, if not
// pickups), in UTC as the server's log prints them.
func printSlow(w io.Writer, what string, slow map[int64]slowSecond) {
	secs := make([]int64, 0, len(slow))
	for sec := range slow {
		secs = append(secs, sec)
	}
	slices.Sort(secs)
	for _, sec := range secs {
		s := slow[sec]
		fmt.Fprintf(w, "    slow %s UTC: %d %s over %v, worst %s\n",
			time.Unix(sec, 0).UTC().Format("15:04:05"), s.n, what, slowPickup, ms(s.worst))
	}
}

// sustainedSystem is one system under the scenario, its worker running:
// submit offers one task, stop stops the worker and closes the client.
type sustainedSystem struct {
	name   string
	table  string
	submit func(ctx context.Context) error
	stop   func()
}

// sustainedOpen opens a system on db, its worker recording pickups in pk.
type sustainedOpen func(ctx context.Context, cfg *config, db *pgadmin.Database, pk *pickups) (*sustainedSystem, error)

func benchSustained(ctx context.Context, cfg *config, rep *report) {
	fmt.Printf("sustained: %v steady, then a transaction held %v, then %v more; retention 1m; sampled every %v\n",
		*sustainedFor, *sustainedHold, *sustainedAfter, *sustainedEvery)
	type system struct {
		name string
		open sustainedOpen
		rate int // 0: half what the system itself can do
	}
	systems := []system{{"cairnq", sustainedCairnq, *sustainedRate}}
	if !cfg.noRiver {
		riverRate := *sustainedRate
		if *sustainedRiverRate > 0 {
			riverRate = *sustainedRiverRate
		}
		systems = append(systems, system{"river", sustainedRiver, riverRate})
	}
	for _, sys := range systems {
		rate := sys.rate
		if rate <= 0 {
			c, err := sustainedCapacity(ctx, cfg, sys.open, capacityWarm, capacityFor)
			if err != nil {
				rep.fail("sustained "+sys.name+": measuring its maximum", err)
				if ctx.Err() != nil {
					return
				}
				continue
			}
			rate = max(1, int(c.rate()/2))
			fmt.Printf("sustained %s: submitting and running at once, %.0f tasks/s started (%d submitted, %d started in %v); offering half, %d tasks/s\n",
				sys.name, c.rate(), c.submitted, c.started, c.window, rate)
		} else {
			fmt.Printf("sustained %s: offering %d tasks/s\n", sys.name, rate)
		}
		samples, err := runSustained(ctx, cfg, rate, sys.open)
		if err != nil {
			rep.fail("sustained "+sys.name, err)
			if ctx.Err() != nil {
				return
			}
			continue
		}
		printSustained(os.Stdout, sys.name, rate, samples)
	}
}

// The maximum the sustained load is offered half of is the system's own
// cycle, submits and runs on the same machine at once: a burn-down drains
// a filled table and pays for no submit, and on two cores half of it
// left the steady phase no headroom (docs/benchmarks.md, "Sustained
// load"). capacityWarm is spent before the count starts: long enough for
// retention's first sweeps (a minute's work ages past its rule) and the
// table's first autovacuum, which a fresh table does not pay and the
// steady phase does. capacityFor is counted.
const (
	capacityWarm = 70 * time.Second
	capacityFor  = 20 * time.Second
)

// capacity is what one measurement of a system's cycle counted.
type capacity struct {
	submitted, started int64
	window             time.Duration
}

// rate is the starts per second: with the backlog bounded, the rate at
// which the system both takes and runs tasks.
func (c capacity) rate() float64 { return float64(c.started) / c.window.Seconds() }

// sustainedCapacity counts, over window after warm, the tasks a system
// opened on a fresh database accepts and starts while 64 goroutines
// submit as fast as it lets them. A submit waits while twice the worker's
// concurrency are submitted and not yet started: unbounded, the submits
// would take the machine from the worker, and the starts would measure
// that share rather than the balance a steady load needs.
func sustainedCapacity(ctx context.Context, cfg *config, open sustainedOpen, warm, window time.Duration) (capacity, error) {
	db, err := cfg.srv.FreshDatabase(ctx, "sustained_max")
	if err != nil {
		return capacity{}, err
	}
	defer db.Drop()
	pk := pickups{room: make(chan struct{}, 2*cfg.concurrency)}
	sys, err := open(ctx, cfg, db, &pk)
	if err != nil {
		return capacity{}, err
	}
	defer sys.stop()
	var l load
	failed, fail := context.WithCancel(ctx) // a failed submit ends the measurement
	defer fail()
	run := startLoad(failed, 0, func(ctx context.Context) {
		select {
		case pk.room <- struct{}{}:
		case <-ctx.Done():
			return
		}
		if !l.submit(ctx, sys) {
			fail()
		}
	})
	defer run.stop()
	waitFor := func(d time.Duration) {
		select {
		case <-run.ctx.Done():
		case <-time.After(d):
		}
	}
	waitFor(warm)
	pk.take()
	from := l.submitted.Load()
	waitFor(window)
	c := capacity{submitted: l.submitted.Load() - from, started: int64(len(pk.take().ds)), window: window}
	run.stop()
	if err := l.err(); err != nil {
		return capacity{}, err
	}
	if err := ctx.Err(); err != nil {
		return capacity{}, err
	}
	return c, nil
}

// loadRun is an offered load (offer from 64 goroutines) in a goroutine
// of its own, owned by whoever started it: stop ends it and waits for
// the calls in flight, and may be called more than once.
type loadRun struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startLoad(ctx context.Context, rate int, fn func(context.Context)) *loadRun {
	r := &loadRun{}
	r.ctx, r.cancel = context.WithCancel(ctx)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		offer(r.ctx, rate, 64, fn)
	}()
	return r
}

func (r *loadRun) stop() {
	r.cancel()
	r.wg.Wait()
}

// load counts one run's submits, keeps its first failure and what each
// taken submit took: a pickup's wait starts inside its submit's write
// (the task's creation time is the writing transaction's), so the
// submits' tail against the pickups' tells how much of a slow pickup
// was the write and its commit, and how much the claim after it.
type load struct {
	submitted, failed atomic.Int64
	firstErr          atomic.Value
	timed             bool // keep what each submit took (the sustained run's samples)
	mu                sync.Mutex
	took              []time.Duration // since the last take
}

// submit offers one task to sys and reports whether it was taken; a
// failure after ctx ended is the run stopping, not counted.
func (l *load) submit(ctx context.Context, sys *sustainedSystem) bool {
	start := time.Now()
	if err := sys.submit(ctx); err != nil {
		if ctx.Err() == nil && l.failed.Add(1) == 1 {
			l.firstErr.Store(err)
		}
		return false
	}
	if l.timed {
		d := time.Since(start)
		l.mu.Lock()
		l.took = append(l.took, d)
		l.mu.Unlock()
	}
	l.submitted.Add(1)
	return true
}

// takeSubmits returns what the submits taken since the last call took.
func (l *load) takeSubmits() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	took := l.took
	l.took = nil
	return took
}

func (l *load) err() error {
	if n := l.failed.Load(); n > 0 {
		return fmt.Errorf("%d submits failed, the first: %v", n, l.firstErr.Load())
	}
	return nil
}

func runSustained(ctx context.Context, cfg *config, rate int, open sustainedOpen) ([]sustainedSample, error) {
	db, err := cfg.srv.FreshDatabase(ctx, "sustained")
	if err != nil {
		return nil, err
	}
	defer db.Drop()
	var pk pickups
	sys, err := open(ctx, cfg, db, &pk)
	if err != nil {
		return nil, err
	}
	defer sys.stop()
	admin, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		return nil, err
	}
	defer admin.Close(context.WithoutCancel(ctx))

	checkpoints, err := checkpointsSQL(ctx, admin)
	if err != nil {
		return nil, err
	}
	ctlDB, err := cfg.srv.FreshDatabase(ctx, "control")
	if err != nil {
		return nil, err
	}
	defer ctlDB.Drop()
	ctl, err := startControls(ctx, ctlDB.DSN)
	if err != nil {
		return nil, err
	}
	defer ctl.stop() // before the database is dropped

	l := load{timed: true}
	run := startLoad(ctx, rate, func(ctx context.Context) { l.submit(ctx, sys) })
	defer run.stop() // before the system stops: no submit meets a closed client

	var samples []sustainedSample
	start := time.Now()
	var lastSubmitted int64
	var holdTx pgx.Tx
	var lastStalls []span // the previous interval's: a pickup's wait may start there
	sample := func(phase string) error {
		pb := pk.take()
		s := sustainedSample{at: time.Since(start).Round(time.Second), phase: phase, ran: int64(len(pb.ds))}
		sub := l.submitted.Load()
		s.submitted, lastSubmitted = sub-lastSubmitted, sub
		if took := l.takeSubmits(); len(took) > 0 {
			s.submitP99 = pct(took, 99)
		}
		err := admin.QueryRow(ctx, `SELECT pg_table_size(c.oid), pg_indexes_size(c.oid), coalesce(s.n_live_tup, 0), coalesce(s.n_dead_tup, 0), coalesce(s.autovacuum_count, 0), (`+checkpoints+`)
			FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = $1::regclass`, sys.table).
			Scan(&s.tableBytes, &s.indexBytes, &s.live, &s.dead, &s.vacuums, &s.checkpoints)
		if err != nil {
			return err
		}
		s.rssKB = peakRSS() >> 10
		ctlSlow := make([]map[int64]slowSecond, len(ctl.all))
		stalls := lastStalls
		lastStalls = nil
		for i, c := range ctl.all {
			cb := c.commits.take()
			st := controlStat{name: c.name, commits: len(cb.ds), stalled: c.stalled(), errs: c.errs.Load()}
			if len(cb.ds) > 0 {
				st.p50, st.p99, st.max = pct(cb.ds, 50), pct(cb.ds, 99), slices.Max(cb.ds)
			}
			s.controls, ctlSlow[i] = append(s.controls, st), cb.slow
			lastStalls = append(lastStalls, cb.stalls()...)
			if st.stalled >= slowPickup {
				// Still waiting: the stall runs to now, and its end is
				// counted with the next interval's commits.
				lastStalls = append(lastStalls, span{time.Now().Add(-st.stalled).UnixNano(), time.Now().UnixNano()})
			}
		}
		stalls = append(stalls, lastStalls...)
		calm, setAside := pb.outside(stalls)
		s.setAside = int64(setAside)
		if len(pb.ds) > 0 {
			s.p50, s.p99 = pct(pb.ds, 50), pct(pb.ds, 99)
		}
		if len(calm) > 0 {
			s.calmP99 = pct(calm, 99)
		}
		samples = append(samples, s)
		fmt.Printf("  %s %6v %-6s submitted %7d ran %7d p50 %8s p99 %8s table %6.1f MB indexes %6.1f MB live %8d dead %8d autovacuums %d checkpoints %d\n",
			sys.name, s.at, s.phase, s.submitted, s.ran, ms(s.p50), ms(s.p99),
			float64(s.tableBytes)/1e6, float64(s.indexBytes)/1e6, s.live, s.dead, s.vacuums, s.checkpoints)
		fmt.Printf("    submits took p99 %s\n", ms(s.submitP99))
		if setAside > 0 {
			fmt.Printf("    outside the controls' stalls: p99 %s, %d pickups set aside\n", ms(s.calmP99), setAside)
		}
		printSlow(os.Stdout, "pickups", pb.slow)
		if *sustainedSeconds != "" {
			if err := appendSeconds(*sustainedSeconds, sys.name, phase, pb); err != nil {
				return err
			}
		}
		for i, c := range s.controls {
			fmt.Printf("    %s: %s\n", c.name, c)
			printSlow(os.Stdout, c.name+" commits", ctlSlow[i])
		}
		return nil
	}
	phases := []struct {
		name string
		for_ time.Duration
	}{{"steady", *sustainedFor}, {"hold", *sustainedHold}, {"after", *sustainedAfter}}
	tick := time.NewTicker(*sustainedEvery)
	defer tick.Stop()
	for _, ph := range phases {
		if ph.for_ <= 0 {
			continue
		}
		if ph.name == "hold" {
			// An xid holds the horizon: no dead tuple newer than it can
			// be vacuumed while the transaction lasts.
			holder, err := pgx.Connect(ctx, db.DSN)
			if err != nil {
				return samples, err
			}
			defer holder.Close(context.WithoutCancel(ctx))
			if holdTx, err = holder.Begin(ctx); err != nil {
				return samples, err
			}
			if _, err := holdTx.Exec(ctx, "SELECT txid_current()"); err != nil {
				return samples, err
			}
		}
		// A count, not a deadline: a phase ending on a tick's edge would
		// take one sample more or fewer, and a hold a minute more or less.
		for range max(1, int(ph.for_ / *sustainedEvery)) {
			select {
			case <-ctx.Done():
				return samples, ctx.Err()
			case <-tick.C:
			}
			if err := sample(ph.name); err != nil {
				return samples, err
			}
		}
		if holdTx != nil {
			_ = holdTx.Rollback(ctx)
			holdTx = nil
		}
	}
	run.stop()
	return samples, l.err()
}

// appendSeconds writes one line per wall-clock second of b's pickups:
// system, phase, the second (UTC), count, p50, p99 and max in ms.
func appendSeconds(path, system, phase string, b batch) error {
	bySec := make(map[int64][]time.Duration)
	for i, d := range b.ds {
		sec := b.ends[i] / int64(time.Second)
		bySec[sec] = append(bySec[sec], d)
	}
	secs := slices.Sorted(maps.Keys(bySec))
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, sec := range secs {
		ds := bySec[sec]
		fmt.Fprintf(w, "%s %s %s %d %.1f %.1f %.1f\n", system, phase, time.Unix(sec, 0).UTC().Format("15:04:05"), len(ds),
			msf(pct(ds, 50)), msf(pct(ds, 99)), msf(slices.Max(ds)))
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// checkpointsSQL is a query for the server's checkpoints so far, timed
// and requested: PostgreSQL 17 moved the counts from pg_stat_bgwriter to
// pg_stat_checkpointer.
func checkpointsSQL(ctx context.Context, conn *pgx.Conn) (string, error) {
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return "", err
	}
	if version >= 170000 {
		return "SELECT num_timed + num_requested FROM pg_stat_checkpointer", nil
	}
	return "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter", nil
}

// offer calls fn rate times a second, from at most workers goroutines at
// once, until ctx ends. Calls due while every goroutine is busy wait for
// one: the offered rate falls short rather than bursting later. A rate of
// 0 or less offers calls as fast as the goroutines take them.
func offer(ctx context.Context, rate, workers int, fn func(context.Context)) {
	if rate <= 0 {
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					fn(ctx)
				}
			}()
		}
		wg.Wait()
		return
	}
	due := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range due {
				fn(ctx)
			}
		}()
	}
	defer func() {
		close(due)
		wg.Wait()
	}()
	const step = 10 * time.Millisecond
	tick := time.NewTicker(step)
	defer tick.Stop()
	start := time.Now()
	var sent int64
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			owed := int64(now.Sub(start).Seconds()*float64(rate)) - sent
			for ; owed > 0; owed-- {
				select {
				case due <- struct{}{}:
					sent++
				case <-ctx.Done():
					return
				}
			}
		}
	}
}

// sustainedCairnq is cairnq on pgx: one worker of the configured
// concurrency and a retention rule purging what finished over a minute
// ago, swept every 10 s.
func sustainedCairnq(ctx context.Context, cfg *config, db *pgadmin.Database, pk *pickups) (*sustainedSystem, error) {
	a, err := findAdapter("pgx")
	if err != nil {
		return nil, err
	}
	ex, closeEx, err := a.open(ctx, db.DSN, cfg.pool)
	if err != nil {
		return nil, err
	}
	c, err := cairnq.OpenPostgres(ctx, ex, &cairnq.PostgresOptions{Options: cairnq.Options{
		Logger: quietLogger(),
		Retention: &cairnq.RetentionOptions{
			Rules:    []cairnq.RetentionRule{{OlderThan: time.Minute}},
			Interval: 10 * time.Second,
		},
	}})
	if err != nil {
		_ = closeEx()
		return nil, err
	}
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Concurrency: cfg.concurrency, Logger: quietLogger()})
	if err != nil {
		_ = c.Close()
		_ = closeEx()
		return nil, err
	}
	_ = w.Handle(noopName, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		pk.add(time.Since(tc.Task().CreatedAt))
		return nil, nil
	}, nil)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	return &sustainedSystem{
		name:  "cairnq",
		table: "cairnq_tasks",
		submit: func(ctx context.Context) error {
			_, err := c.Submit(ctx, noopName, nil, nil)
			return err
		},
		stop: func() {
			cancel()
			<-done
			_ = c.Close()
			_ = closeEx()
		},
	}, nil
}

// pickupWorker is River's no-op worker that records submit-to-start.
type pickupWorker struct {
	river.WorkerDefaults[noopArgs]
	pk *pickups
}

func (w *pickupWorker) Work(ctx context.Context, job *river.Job[noopArgs]) error {
	w.pk.add(time.Since(job.CreatedAt))
	return nil
}

// sustainedRiver is River with the same worker concurrency, its completed
// jobs kept a minute (River's job cleaner deletes them after).
func sustainedRiver(ctx context.Context, cfg *config, db *pgadmin.Database, pk *pickups) (*sustainedSystem, error) {
	if err := riverSetup(ctx, cfg, db, 0); err != nil {
		return nil, err
	}
	pool, err := riverPool(ctx, db.DSN, cfg.pool)
	if err != nil {
		return nil, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &pickupWorker{pk: pk})
	client, err := river.NewClient(riverpgxv5.New(pool), riverWorkerConfig(cfg, workers, time.Minute))
	if err != nil {
		pool.Close()
		return nil, err
	}
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		pool.Close()
		return nil, err
	}
	return &sustainedSystem{
		name:  "river",
		table: "river_job",
		submit: func(ctx context.Context) error {
			_, err := client.Insert(ctx, noopArgs{}, nil)
			return err
		},
		stop: func() {
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = client.Stop(sctx)
			pool.Close()
		},
	}, nil
}

// String says what the control's commits took: none finished says so,
// and a commit still waiting at the sample says for how long.
func (c controlStat) String() string {
	out := fmt.Sprintf("%d commits", c.commits)
	if c.commits > 0 {
		out += fmt.Sprintf(", p50 %s p99 %s max %s", ms(c.p50), ms(c.p99), ms(c.max))
	}
	if c.stalled >= slowPickup {
		out += fmt.Sprintf(", one waiting for %s", ms(c.stalled))
	}
	if c.errs > 0 {
		out += fmt.Sprintf(", %d failed so far", c.errs)
	}
	return out
}

// printSustained ends a system's run with the verdict the issue asks for:
// do the sizes plateau, and does p99 stay within 2x of the first minutes?
func printSustained(w io.Writer, name string, rate int, samples []sustainedSample) {
	var steady []sustainedSample
	for _, s := range samples {
		if s.phase == "steady" {
			steady = append(steady, s)
		}
	}
	if len(steady) < 4 {
		fmt.Fprintf(w, "sustained %s at %d tasks/s: %d steady samples, too few for a verdict\n", name, rate, len(steady))
		return
	}
	// The median of the first three: the very first sample holds the
	// start-up (connections, the first autovacuum) and would flatter
	// every later one.
	first := []time.Duration{steady[0].p99, steady[1].p99, steady[2].p99}
	slices.Sort(first)
	base := first[1]
	half := steady[len(steady)/2:]
	worst := slices.MaxFunc(half, func(a, b sustainedSample) int { return int(a.p99 - b.p99) })
	size := func(s sustainedSample) int64 { return s.tableBytes + s.indexBytes }
	mid, last := size(steady[len(steady)/2]), size(steady[len(steady)-1])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "sustained %s at %d tasks/s:\tp99 of the first 3 samples (median) %s, worst of the second half %s (%.2fx)\n", name, rate, ms(base), ms(worst.p99), float64(worst.p99)/float64(max(base, 1)))
	// The same verdict over the pickups whose wait no control's stall
	// overlapped: a stall every writer of the server waited through is
	// the machine's, or the server's (a checkpoint's I/O stalls the
	// controls too, whoever caused it); both verdicts are printed.
	firstCalm := []time.Duration{steady[0].calmP99, steady[1].calmP99, steady[2].calmP99}
	slices.Sort(firstCalm)
	calmBase := firstCalm[1]
	worstCalm := slices.MaxFunc(half, func(a, b sustainedSample) int { return int(a.calmP99 - b.calmP99) })
	var ran, setAside int64
	for _, s := range steady {
		ran, setAside = ran+s.ran, setAside+s.setAside
	}
	fmt.Fprintf(tw, "\toutside the controls' stalls: p99 of the first 3 samples (median) %s, worst of the second half %s (%.2fx); %d of %d steady pickups set aside (%.2f%%)\n",
		ms(calmBase), ms(worstCalm.calmP99), float64(worstCalm.calmP99)/float64(max(calmBase, 1)), setAside, ran, 100*float64(setAside)/float64(max(ran, 1)))
	fmt.Fprintf(tw, "\ttable+indexes %.1f MB at the middle of the steady phase, %.1f MB at its end (%.2fx)\n", float64(mid)/1e6, float64(last)/1e6, float64(last)/float64(max(mid, 1)))
	if len(samples) > len(steady) {
		peak := slices.MaxFunc(samples[len(steady):], func(a, b sustainedSample) int { return int(size(a) - size(b)) })
		end := samples[len(samples)-1]
		fmt.Fprintf(tw, "\tafter the steady phase: peak %.1f MB (%s, dead %d, p99 %s), at the end %.1f MB (dead %d, p99 %s)\n",
			float64(size(peak))/1e6, peak.phase, peak.dead, ms(peak.p99), float64(size(end))/1e6, end.dead, ms(end.p99))
	}
	fmt.Fprintf(tw, "\tpeak RSS of the bench process since it started %d MB\n", samples[len(samples)-1].rssKB/1024)
	// The steady samples past 2x, beside what the controls' commits
	// took in them: a control as slow says the server stalled.
	for i, s := range steady {
		if s.p99 <= 2*base {
			continue
		}
		fmt.Fprintf(tw, "\tsample %d over 2x: p99 %s (%.2fx)", i+1, ms(s.p99), float64(s.p99)/float64(max(base, 1)))
		for _, c := range s.controls {
			fmt.Fprintf(tw, "; %s %s", c.name, c)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}
