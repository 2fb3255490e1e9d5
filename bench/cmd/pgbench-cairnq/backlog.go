package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/bench/internal/pgadmin"
	"github.com/cairnq/cairnq-go/internal/testkit/pgdsn"
	"github.com/cairnq/cairnq-go/protocol"
)

// The backlog benchmark (issue 30, part 4): how fast a worker claims, and
// how soon it picks up a fresh task, when the table holds a large
// backlog: many queued tasks, or many finished ones retained beside a few
// queued. For each shape, cairnq (pgx) and River start from a copy of a
// template database filled by set-based SQL (backlog_fill.go), and one
// worker at --concurrency drains --backlog-drain tasks from the top of
// the backlog after a --backlog-warm warm-up, while a second client
// submits fresh tasks at a trickle, one priority above the backlog's
// (cairnq: 1 over 0; River: 1 over 2, its highest being 1), so that they
// are claimed next rather than after the whole backlog. Pickup is the
// handler's start minus the time just before the fresh task's submit.

// backlogShape is one backlog: queued tasks, and finished ones retained
// beside them.
type backlogShape struct{ queued, finished int }

func (s backlogShape) String() string {
	if s.finished == 0 {
		return fmt.Sprintf("%s queued", count(s.queued))
	}
	return fmt.Sprintf("%s finished + %s queued", count(s.finished), count(s.queued))
}

func (s backlogShape) tag() string { return fmt.Sprintf("q%d_f%d", s.queued, s.finished) }

// count writes 10000 as 10k and 1000000 as 1M.
func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.Itoa(n)
}

// backlogConfig holds the backlog benchmark's flags.
type backlogConfig struct {
	shapes []backlogShape
	drain  int
	warm   int
	gap    time.Duration
	keep   bool
	lock   benchLock
	// explain prints EXPLAIN (ANALYZE, BUFFERS) of each system's claim
	// before and after the timed drain (in a transaction rolled back).
	explain bool
	// fillOnly fills (and keeps) the templates without timing anything.
	fillOnly bool
}

// backlogFlags registers the backlog benchmark's flags; parse reads them
// once flag.Parse has run.
func backlogFlags() (parse func() (*backlogConfig, error)) {
	bc := &backlogConfig{}
	shapes := flag.String("backlog", "10000,1000000,10000+10000000", "backlog: shapes, comma-separated: QUEUED or QUEUED+FINISHED")
	lock := flag.String("lock", "", "backlog: take this flock(2) file shared while filling and copying, exclusive while timing (e.g. /tmp/bench.lock)")
	flag.IntVar(&bc.drain, "backlog-drain", 9000, "backlog: tasks drained in the timed window (at most the queued tasks less the warm-up)")
	flag.IntVar(&bc.warm, "backlog-warm", 1000, "backlog: tasks drained before the window opens")
	flag.DurationVar(&bc.gap, "backlog-gap", 10*time.Millisecond, "backlog: mean gap between the trickle's fresh submits (uniform in [gap/2, 3gap/2])")
	flag.BoolVar(&bc.keep, "backlog-keep", false, "backlog: keep the filled template databases and reuse them on the next run")
	flag.BoolVar(&bc.fillOnly, "backlog-fill-only", false, "backlog: fill the template databases (kept, as with --backlog-keep) and stop")
	flag.BoolVar(&bc.explain, "backlog-explain", false, "backlog: print EXPLAIN (ANALYZE, BUFFERS) of the claim before and after each timed drain")
	return func() (*backlogConfig, error) {
		for _, s := range splitList(*shapes) {
			var sh backlogShape
			q, f, _ := strings.Cut(s, "+")
			var err error
			if sh.queued, err = strconv.Atoi(q); err != nil || sh.queued < 1 {
				return nil, fmt.Errorf("bad --backlog shape %q", s)
			}
			if f != "" {
				if sh.finished, err = strconv.Atoi(f); err != nil || sh.finished < 0 {
					return nil, fmt.Errorf("bad --backlog shape %q", s)
				}
			}
			bc.shapes = append(bc.shapes, sh)
		}
		if bc.drain < 1 || bc.warm < 0 || bc.gap <= 0 {
			return nil, errors.New("--backlog-drain must be >= 1, --backlog-warm >= 0, --backlog-gap > 0")
		}
		bc.lock.path = *lock
		bc.keep = bc.keep || bc.fillOnly
		return bc, nil
	}
}

// benchLock is the machine's benchmark lock, when --lock names one: fills
// and copies hold it shared, timed windows exclusive.
type benchLock struct {
	path string
	f    *os.File
}

func (l *benchLock) take(how int) error {
	if l.path == "" {
		return nil
	}
	l.release()
	f, err := os.OpenFile(l.path, os.O_RDONLY|os.O_CREATE, 0o666)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return fmt.Errorf("flock %s: %w", l.path, err)
	}
	l.f = f
	return nil
}

func (l *benchLock) shared() error    { return l.take(syscall.LOCK_SH) }
func (l *benchLock) exclusive() error { return l.take(syscall.LOCK_EX) }

func (l *benchLock) release() {
	if l.f != nil {
		_ = l.f.Close() // closing drops the lock
		l.f = nil
	}
}

// backlogSystem is one of the two systems the benchmark compares.
type backlogSystem struct {
	name  string // "cairnq" or "river"
	table string
	// fill creates and fills the template database.
	fill func(ctx context.Context, cfg *config, db *pgadmin.Database, sh backlogShape) error
	// drain measures one run on db.
	drain func(ctx context.Context, cfg *config, bc *backlogConfig, db *pgadmin.Database, drain int) (backlogResult, error)
	// claimSQL is the claim (or its core) and its arguments, for --backlog-explain.
	claimSQL func() (string, []any, error)
}

var backlogSystems = []backlogSystem{
	{name: "cairnq", table: "cairnq_tasks", fill: fillCairnq, drain: cairnqBacklogDrain, claimSQL: cairnqClaimSQL},
	{name: "river", table: "river_job", fill: fillRiver, drain: riverBacklogDrain, claimSQL: riverClaimSQL},
}

// backlogResult is one timed drain.
type backlogResult struct {
	system  string
	shape   backlogShape
	run     int
	drained int
	elapsed time.Duration
	pickups []time.Duration
	// clientRSS is this process's peak RSS in the window (VmHWM, reset at
	// its start); serverRSS and serverAnon the peak of the summed VmRSS
	// and RssAnon of the run database's server backends, sampled every
	// 100ms.
	clientRSS, serverRSS, serverAnon int64
	clientCPU, serverCPU             time.Duration
}

func (r backlogResult) rate() float64 { return float64(r.drained) / r.elapsed.Seconds() }

// relSizes are a table's sizes in the template (bytes).
type relSizes struct{ table, indexes, database int64 }

func benchBacklog(ctx context.Context, cfg *config, bc *backlogConfig, rep *report) {
	defer bc.lock.release()
	type key struct {
		sys   string
		shape backlogShape
	}
	results := map[key][]backlogResult{}
	sizes := map[key]relSizes{}
	var systems []backlogSystem
	for _, s := range backlogSystems {
		if s.name != "river" || !cfg.noRiver {
			systems = append(systems, s)
		}
	}
	for _, sh := range bc.shapes {
		drain := min(bc.drain, sh.queued-bc.warm)
		if drain < 1 {
			rep.fail(fmt.Sprintf("backlog %v", sh), fmt.Errorf("%d queued leave nothing after a %d-task warm-up", sh.queued, bc.warm))
			continue
		}
		tpls := map[string]*pgadmin.Database{}
		for _, sys := range systems {
			if err := bc.lock.shared(); err != nil {
				rep.fail("backlog lock", err)
				return
			}
			tpl, sz, err := backlogTemplate(ctx, cfg, bc, sys, sh)
			if err != nil {
				rep.fail(fmt.Sprintf("backlog %v %s fill", sh, sys.name), err)
				continue
			}
			tpls[sys.name], sizes[key{sys.name, sh}] = tpl, sz
			fmt.Printf("  backlog %v %s: table %s, indexes %s, database %s\n", sh, sys.name, mib(sz.table), mib(sz.indexes), mib(sz.database))
		}
		if bc.fillOnly {
			continue
		}
		// Every run's copy first, holding the lock shared; then every
		// timed drain of the shape in one exclusive hold.
		copies := map[string][]*pgadmin.Database{}
		for run := 1; run <= cfg.runs && ctx.Err() == nil; run++ {
			for _, sys := range systems {
				if tpl := tpls[sys.name]; tpl != nil {
					db, err := backlogCopy(ctx, cfg, sys, sh, tpl, run)
					if err != nil {
						rep.fail(fmt.Sprintf("backlog %v run %d %s copy", sh, run, sys.name), err)
						continue
					}
					defer db.Drop() // when a run fails before its own Drop
					copies[sys.name] = append(copies[sys.name], db)
				}
			}
		}
		if err := bc.lock.exclusive(); err != nil {
			rep.fail("backlog lock", err)
			return
		}
		for run := 1; run <= cfg.runs && ctx.Err() == nil; run++ {
			for _, sys := range systems {
				if len(copies[sys.name]) < run {
					continue
				}
				db := copies[sys.name][run-1]
				r, err := backlogRun(ctx, cfg, bc, sys, sh, db, drain, run)
				db.Drop()
				what := fmt.Sprintf("backlog %v run %d %s", sh, run, sys.name)
				if err != nil {
					rep.fail(what, err)
					continue
				}
				results[key{sys.name, sh}] = append(results[key{sys.name, sh}], r)
				fmt.Printf("  %-44s %8.0f tasks/s (%d in %v)  pickup p50 %s p95 %s (%d)  peak RSS client %s, server backends %s (anon %s)  CPU ms/1k client %.0f server %.0f  load %s\n",
					what, r.rate(), r.drained, r.elapsed.Round(time.Millisecond), ms(pct(r.pickups, 50)), ms(pct(r.pickups, 95)), len(r.pickups),
					mib(r.clientRSS), mib(r.serverRSS), mib(r.serverAnon), cpuPer1k(r.clientCPU, r.drained), cpuPer1k(r.serverCPU, r.drained), loadAvg())
			}
		}
		bc.lock.release()
		if !bc.keep {
			for _, tpl := range tpls {
				tpl.Drop()
			}
		}
	}
	for _, sys := range systems {
		fmt.Printf("\n== Backlog, %s: drain %d (after %d warm-up) at concurrency %d, fresh tasks every ~%v ==\n", sys.name, bc.drain, bc.warm, cfg.concurrency, bc.gap)
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "| backlog\t| claim rate, runs (tasks/s)\t| median\t| pickup p50 / p95 / p99 (n)\t| peak RSS client\t| server backends (anon)\t| table + indexes\t|")
		for _, sh := range bc.shapes {
			rs := results[key{sys.name, sh}]
			if len(rs) == 0 {
				continue
			}
			var rates []float64
			var picks []time.Duration
			var crss, srss, sanon int64
			for _, r := range rs {
				rates = append(rates, r.rate())
				picks = append(picks, r.pickups...)
				crss, srss, sanon = max(crss, r.clientRSS), max(srss, r.serverRSS), max(sanon, r.serverAnon)
			}
			sz := sizes[key{sys.name, sh}]
			fmt.Fprintf(tw, "| %v\t| %s\t| %.0f\t| %s / %s / %s (%d)\t| %s\t| %s (%s)\t| %s + %s\t|\n", sh, joinRates(rates), median(rates),
				ms(pct(picks, 50)), ms(pct(picks, 95)), ms(pct(picks, 99)), len(picks), mib(crss), mib(srss), mib(sanon), mib(sz.table), mib(sz.indexes))
		}
		tw.Flush()
	}
	fmt.Println()
}

// backlogTemplate returns the filled template database of sys for sh:
// the kept one when --backlog-keep left one, else a new one.
func backlogTemplate(ctx context.Context, cfg *config, bc *backlogConfig, sys backlogSystem, sh backlogShape) (*pgadmin.Database, relSizes, error) {
	name := "bench_backlog_tpl_" + sys.name + "_" + sh.tag()
	dsn, err := pgdsn.WithDatabase(cfg.srv.AdminDSN, name)
	if err != nil {
		return nil, relSizes{}, err
	}
	db := &pgadmin.Database{Server: cfg.srv.Server, Name: name, DSN: dsn}
	const filled = "cairnq-bench backlog: filled"
	conn, err := cfg.srv.Conn(ctx)
	if err != nil {
		return nil, relSizes{}, err
	}
	var note *string
	err = conn.QueryRow(ctx, "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1", name).Scan(&note)
	conn.Close(context.WithoutCancel(ctx))
	switch {
	case err == nil && bc.keep && note != nil && *note == filled:
		fmt.Printf("  backlog %v %s: reusing %s\n", sh, sys.name, name)
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return nil, relSizes{}, err
	default:
		db.Drop()
		if err := cfg.srv.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" STRATEGY = FILE_COPY"); err != nil {
			return nil, relSizes{}, err
		}
		start := time.Now()
		if err := sys.fill(ctx, cfg, db, sh); err != nil {
			db.Drop()
			return nil, relSizes{}, err
		}
		if err := cfg.srv.Exec(ctx, "COMMENT ON DATABASE "+pgx.Identifier{name}.Sanitize()+" IS '"+filled+"'"); err != nil {
			return nil, relSizes{}, err
		}
		fmt.Printf("  backlog %v %s: filled in %v (load %s)\n", sh, sys.name, time.Since(start).Round(time.Second), loadAvg())
	}
	sz, err := readSizes(ctx, db, sys.table)
	return db, sz, err
}

func readSizes(ctx context.Context, db *pgadmin.Database, table string) (relSizes, error) {
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		return relSizes{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var s relSizes
	err = conn.QueryRow(ctx, "SELECT pg_table_size($1::regclass), pg_indexes_size($1::regclass), pg_database_size(current_database())", table).
		Scan(&s.table, &s.indexes, &s.database)
	return s, err
}

// backlogCopy copies the template for one run (FILE_COPY: the files as
// they are, statistics and visibility map included).
func backlogCopy(ctx context.Context, cfg *config, sys backlogSystem, sh backlogShape, tpl *pgadmin.Database, run int) (*pgadmin.Database, error) {
	name := fmt.Sprintf("bench_backlog_%s_%s_run%d", sys.name, sh.tag(), run)
	dsn, err := pgdsn.WithDatabase(cfg.srv.AdminDSN, name)
	if err != nil {
		return nil, err
	}
	db := &pgadmin.Database{Server: cfg.srv.Server, Name: name, DSN: dsn}
	db.Drop()
	if err := cfg.srv.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{tpl.Name}.Sanitize()+" STRATEGY = FILE_COPY"); err != nil {
		return nil, fmt.Errorf("copy the template: %w", err)
	}
	return db, nil
}

// backlogRun times one drain on db, a copy of the template.
func backlogRun(ctx context.Context, cfg *config, bc *backlogConfig, sys backlogSystem, sh backlogShape, db *pgadmin.Database, drain, run int) (backlogResult, error) {
	if bc.explain {
		explainClaim(ctx, db, sys, "before")
	}
	r, err := sys.drain(ctx, cfg, bc, db, drain)
	if err != nil {
		return r, err
	}
	if bc.explain {
		explainClaim(ctx, db, sys, "after")
	}
	r.system, r.shape, r.run = sys.name, sh, run
	return r, nil
}

// explainClaim prints the plan of sys's claim of 64 on db, run and rolled
// back.
func explainClaim(ctx context.Context, db *pgadmin.Database, sys backlogSystem, when string) {
	sql, args, err := sys.claimSQL()
	if err == nil {
		var plan []string
		plan, err = explain(ctx, db.DSN, sql, args)
		if err == nil {
			fmt.Printf("    EXPLAIN %s's claim %s the drain:\n      %s\n", sys.name, when, strings.Join(plan, "\n      "))
			return
		}
	}
	fmt.Printf("    EXPLAIN %s's claim %s the drain: %v\n", sys.name, when, err)
}

func explain(ctx context.Context, dsn, sql string, args []any) ([]string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// cairnqClaimSQL is the worker's claim for one queue and one name, of 64.
func cairnqClaimSQL() (string, []any, error) {
	st := protocol.Statements(protocol.Postgres).Get("claim").Specialize(floorClaimArgs())
	a := floorClaimArgs()
	a["worker_id"], a["lease_ms"], a["limit"] = "explain", int64(30_000), int64(64)
	args, err := st.Bind(a)
	return st.SQL, args, err
}

// riverClaimSQL is the core of River's fetch (riverpgxv5's
// JobGetAvailable): the locked pick of the next available jobs.
func riverClaimSQL() (string, []any, error) {
	return `SELECT id FROM river_job
WHERE state = 'available' AND queue = 'default' AND scheduled_at <= now()
ORDER BY priority ASC, scheduled_at ASC, id ASC
LIMIT 64
FOR UPDATE SKIP LOCKED`, nil, nil
}

func fillCairnq(ctx context.Context, cfg *config, db *pgadmin.Database, sh backlogShape) error {
	a, err := findAdapter("pgx")
	if err != nil {
		return err
	}
	_, closeC, err := openClient(ctx, cfg, a, db.DSN, false, nil) // migrates
	if err != nil {
		return err
	}
	closeC()
	var now int64
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		return err
	}
	err = conn.QueryRow(ctx, "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS bigint)").Scan(&now)
	conn.Close(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	return fillBacklog(ctx, db.DSN, cairnqFillSQL(), "cairnq_tasks", now-int64(sh.finished+sh.queued), sh.finished, sh.queued)
}

func fillRiver(ctx context.Context, cfg *config, db *pgadmin.Database, sh backlogShape) error {
	if err := riverSetup(ctx, cfg, db, 0); err != nil {
		return err
	}
	start := time.Now().Add(-time.Duration(sh.finished+sh.queued) * time.Millisecond)
	return fillBacklog(ctx, db.DSN, riverFillSQL(), "river_job", start, sh.finished, sh.queued)
}

// drainWindow is what both systems' drains share: counting the backlog's
// handler calls, the trickle of fresh tasks, the window's measurements.
type drainWindow struct {
	cfg        *config
	bc         *backlogConfig
	db         *pgadmin.Database
	warm, n    int64
	ran        atomic.Int64
	opened     chan struct{} // closed when ran reaches warm
	done       chan struct{} // closed when ran reaches warm + n
	mu         sync.Mutex
	submitted  map[int]time.Time
	pickups    []time.Duration
	freshCount atomic.Int64
}

func newDrainWindow(cfg *config, bc *backlogConfig, db *pgadmin.Database, n int) *drainWindow {
	w := &drainWindow{cfg: cfg, bc: bc, db: db, warm: int64(bc.warm), n: int64(n),
		opened: make(chan struct{}), done: make(chan struct{}), submitted: map[int]time.Time{}}
	if w.warm == 0 {
		close(w.opened)
	}
	return w
}

// backlogRan counts one handler call of a backlog task.
func (w *drainWindow) backlogRan() {
	switch w.ran.Add(1) {
	case w.warm:
		close(w.opened)
	case w.warm + w.n:
		close(w.done)
	}
}

// freshRan records fresh task i's start.
func (w *drainWindow) freshRan(i int) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if t0, ok := w.submitted[i]; ok {
		w.pickups = append(w.pickups, now.Sub(t0))
		delete(w.submitted, i)
	}
}

// measure waits for the warm-up, then times the window while trickle
// submits fresh task i = 1, 2, ... at the configured gaps; it returns the
// result once n more backlog tasks ran and the fresh tasks submitted in
// the window started (or 5s passed).
func (w *drainWindow) measure(ctx context.Context, trickle func(ctx context.Context, i int) error) (backlogResult, error) {
	if err := w.wait(ctx, w.opened, 0); err != nil {
		return backlogResult{}, fmt.Errorf("warm-up: %w", err)
	}
	freeOSMemory()
	resetPeakRSS()
	srv := startServerRSS(ctx, w.db)
	srvCPU0, cli0 := w.cfg.srv.serverCPU(ctx), clientCPU()
	start := time.Now()
	tctx, stopTrickle := context.WithCancel(ctx)
	trickleDone := make(chan error, 1)
	go func() { trickleDone <- w.trickle(tctx, trickle) }()
	err := w.wait(ctx, w.done, w.warm)
	elapsed := time.Since(start)
	cliCPU, srvCPU := clientCPU()-cli0, w.cfg.srv.serverCPU(ctx).since(srvCPU0)
	stopTrickle()
	if terr := <-trickleDone; err == nil && terr != nil && !errors.Is(terr, context.Canceled) {
		err = fmt.Errorf("trickle: %w", terr)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		w.mu.Lock()
		left := len(w.submitted)
		w.mu.Unlock()
		if left == 0 {
			break
		}
	}
	srss, sanon := srv.stop()
	if err != nil {
		return backlogResult{}, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.submitted) > 0 {
		return backlogResult{}, fmt.Errorf("%d of the fresh tasks did not start within 5s of the window's end", len(w.submitted))
	}
	return backlogResult{drained: int(w.n), elapsed: elapsed, pickups: w.pickups, clientRSS: peakRSS(),
		serverRSS: srss, serverAnon: sanon, clientCPU: cliCPU, serverCPU: srvCPU}, nil
}

func (w *drainWindow) trickle(ctx context.Context, submit func(ctx context.Context, i int) error) error {
	for i := 1; ; i++ {
		gap := w.bc.gap/2 + time.Duration(rand.Int64N(int64(w.bc.gap)+1))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.done:
			return nil
		case <-time.After(gap):
		}
		w.mu.Lock()
		w.submitted[i] = time.Now()
		w.mu.Unlock()
		if err := submit(ctx, i); err != nil {
			w.mu.Lock()
			delete(w.submitted, i)
			w.mu.Unlock()
			return err
		}
	}
}

// wait waits for ch, failing when the count stalls for a minute.
func (w *drainWindow) wait(ctx context.Context, ch <-chan struct{}, base int64) error {
	return waitRan(ctx, ch, &w.ran, int(base+w.n), w.cfg.timeout)
}

func cairnqBacklogDrain(ctx context.Context, cfg *config, bc *backlogConfig, db *pgadmin.Database, n int) (backlogResult, error) {
	a, err := findAdapter("pgx")
	if err != nil {
		return backlogResult{}, err
	}
	win := newDrainWindow(cfg, bc, db, n)
	c, closeC, err := openClient(ctx, cfg, a, db.DSN, true, nil)
	if err != nil {
		return backlogResult{}, err
	}
	defer closeC()
	sc, closeS, err := openClient(ctx, cfg, a, db.DSN, false, nil)
	if err != nil {
		return backlogResult{}, err
	}
	defer closeS()
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Concurrency: cfg.concurrency, Logger: quietLogger()})
	if err != nil {
		return backlogResult{}, err
	}
	_ = w.Handle(noopName, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var f struct{ I int } // the backlog's payload is {}, the trickle's {"i": i}
		if json.Unmarshal(tc.Payload(), &f) == nil && f.I > 0 {
			win.freshRan(f.I)
			return nil, nil
		}
		win.backlogRan()
		return nil, nil
	}, nil)
	runCtx, stop := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(runCtx) }()
	r, err := win.measure(ctx, func(ctx context.Context, i int) error {
		_, err := sc.Submit(ctx, noopName, map[string]int{"i": i}, &cairnq.SubmitOptions{Priority: 1})
		return err
	})
	stop()
	if rerr := <-runDone; err == nil && rerr != nil {
		err = fmt.Errorf("worker Run: %w", rerr)
	}
	return r, err
}

// backlogArgs are River's jobs in this benchmark: the backlog's have no
// I (args {}), the trickle's I >= 1.
type backlogArgs struct {
	I int `json:"i,omitempty"`
}

func (backlogArgs) Kind() string { return noopName }

type backlogWorker struct {
	river.WorkerDefaults[backlogArgs]
	win *drainWindow
}

func (w *backlogWorker) Work(ctx context.Context, job *river.Job[backlogArgs]) error {
	if job.Args.I > 0 {
		w.win.freshRan(job.Args.I)
		return nil
	}
	w.win.backlogRan()
	return nil
}

func riverBacklogDrain(ctx context.Context, cfg *config, bc *backlogConfig, db *pgadmin.Database, n int) (backlogResult, error) {
	win := newDrainWindow(cfg, bc, db, n)
	pool, err := riverPool(ctx, db.DSN, cfg.pool)
	if err != nil {
		return backlogResult{}, err
	}
	defer pool.Close()
	workers := river.NewWorkers()
	river.AddWorker(workers, &backlogWorker{win: win})
	// Completed jobs retained, as cairnq keeps finished tasks.
	client, err := river.NewClient(riverpgxv5.New(pool), riverWorkerConfig(cfg, workers, -1))
	if err != nil {
		return backlogResult{}, err
	}
	insPool, err := riverPool(ctx, db.DSN, 2)
	if err != nil {
		return backlogResult{}, err
	}
	defer insPool.Close()
	inserter, err := river.NewClient(riverpgxv5.New(insPool), &river.Config{Logger: quietLogger()})
	if err != nil {
		return backlogResult{}, err
	}
	if err := client.Start(ctx); err != nil {
		return backlogResult{}, err
	}
	r, err := win.measure(ctx, func(ctx context.Context, i int) error {
		_, err := inserter.Insert(ctx, backlogArgs{I: i}, &river.InsertOpts{Priority: 1})
		return err
	})
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = client.Stop(sctx)
	return r, err
}

func mib(b int64) string {
	switch {
	case b >= 10<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// loadAvg is the machine's 1-minute load average.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
