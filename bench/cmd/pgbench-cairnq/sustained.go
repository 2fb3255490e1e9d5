package main

import (
	"context"
	"flag"
	"fmt"
	"io"
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
	sustainedRate      = flag.Int("sustained-rate", 0, "sustained: tasks submitted per second (0: half the slower system's burn-down rate, measured first)")
	sustainedRiverRate = flag.Int("sustained-river-rate", 0, "sustained: River's rate, when it cannot hold cairnq's (0: --sustained-rate)")
	sustainedHold      = flag.Duration("sustained-hold", 5*time.Minute, "sustained: a transaction holds the vacuum horizon this long after the steady phase (0: none)")
	sustainedAfter     = flag.Duration("sustained-after", 5*time.Minute, "sustained: load after the hold, to watch the recovery")
	sustainedEvery     = flag.Duration("sustained-every", time.Minute, "sustained: how often to sample sizes, dead tuples, throughput and p99")
)

// sustainedSample is what one interval of the sustained benchmark saw.
type sustainedSample struct {
	at         time.Duration // since the load started
	phase      string        // steady, hold, after
	submitted  int64         // in the interval
	ran        int64         // handler starts in the interval
	p50, p99   time.Duration // submit-to-start of the interval's starts
	tableBytes int64         // heap, TOAST included
	indexBytes int64
	live, dead int64 // pg_stat_user_tables' estimates
	vacuums    int64 // autovacuum runs so far
	rssKB      int64 // this process's peak RSS so far (VmHWM)
}

// pickups collects submit-to-start delays between samples, and the
// wall-clock second of each slow one, so that a bad minute's p99 can be
// matched against the server's log (checkpoints, autovacuums).
type pickups struct {
	mu   sync.Mutex
	ds   []time.Duration
	slow map[int64]slowSecond // by Unix second
}

// slowPickup is the delay from which a pickup counts as slow.
const slowPickup = 100 * time.Millisecond

// slowSecond is the slow pickups that started within one second.
type slowSecond struct {
	n     int
	worst time.Duration
}

func (p *pickups) add(d time.Duration) {
	var sec int64
	if d >= slowPickup {
		sec = time.Now().Unix()
	}
	p.mu.Lock()
	p.ds = append(p.ds, d)
	if sec != 0 {
		if p.slow == nil {
			p.slow = make(map[int64]slowSecond)
		}
		s := p.slow[sec]
		s.n++
		s.worst = max(s.worst, d)
		p.slow[sec] = s
	}
	p.mu.Unlock()
}

func (p *pickups) take() ([]time.Duration, map[int64]slowSecond) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ds, slow := p.ds, p.slow
	p.ds, p.slow = nil, nil
	return ds, slow
}

// printSlow prints the seconds that held slow pickups, in UTC as the
// server's log prints them.
func printSlow(w io.Writer, slow map[int64]slowSecond) {
	secs := make([]int64, 0, len(slow))
	for sec := range slow {
		secs = append(secs, sec)
	}
	slices.Sort(secs)
	for _, sec := range secs {
		s := slow[sec]
		fmt.Fprintf(w, "    slow %s UTC: %d pickups over %v, worst %s\n",
			time.Unix(sec, 0).UTC().Format("15:04:05"), s.n, slowPickup, ms(s.worst))
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

func benchSustained(ctx context.Context, cfg *config, rep *report) {
	rate := *sustainedRate
	if rate <= 0 {
		var err error
		if rate, err = sustainedDefaultRate(ctx, cfg); err != nil {
			rep.fail("sustained: measuring the maximum", err)
			return
		}
	}
	fmt.Printf("sustained: %d tasks/s for %v, then a transaction held %v, then %v more; retention 1m; sampled every %v\n",
		rate, *sustainedFor, *sustainedHold, *sustainedAfter, *sustainedEvery)
	type system struct {
		open func(context.Context, *config, *pgadmin.Database, *pickups) (*sustainedSystem, error)
		rate int
	}
	systems := []system{{sustainedCairnq, rate}}
	if !cfg.noRiver {
		riverRate := rate
		if *sustainedRiverRate > 0 {
			riverRate = *sustainedRiverRate
			fmt.Printf("sustained: River at %d tasks/s\n", riverRate)
		}
		systems = append(systems, system{sustainedRiver, riverRate})
	}
	for _, sys := range systems {
		samples, name, err := runSustained(ctx, cfg, sys.rate, sys.open)
		if err != nil {
			rep.fail("sustained "+name, err)
			continue
		}
		printSustained(os.Stdout, name, samples)
		if ctx.Err() != nil {
			return
		}
	}
}

// sustainedDefaultRate is half the slower system's burn-down rate.
func sustainedDefaultRate(ctx context.Context, cfg *config) (int, error) {
	a, err := findAdapter("pgx")
	if err != nil {
		return 0, err
	}
	r, err := cairnqBurnDown(ctx, cfg, a, 1)
	if err != nil {
		return 0, err
	}
	slowest := r.rate()
	fmt.Printf("sustained: cairnq burn-down %.0f tasks/s\n", r.rate())
	if !cfg.noRiver {
		rr, err := riverBurnDown(ctx, cfg, 1)
		if err != nil {
			return 0, err
		}
		fmt.Printf("sustained: River burn-down %.0f tasks/s\n", rr.rate())
		slowest = min(slowest, rr.rate())
	}
	return max(1, int(slowest/2)), nil
}

func runSustained(ctx context.Context, cfg *config, rate int,
	open func(context.Context, *config, *pgadmin.Database, *pickups) (*sustainedSystem, error)) ([]sustainedSample, string, error) {
	db, err := cfg.srv.FreshDatabase(ctx, "sustained")
	if err != nil {
		return nil, "?", err
	}
	defer db.Drop()
	var pk pickups
	sys, err := open(ctx, cfg, db, &pk)
	if err != nil {
		return nil, "?", err
	}
	defer sys.stop()
	admin, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		return nil, sys.name, err
	}
	defer admin.Close(context.WithoutCancel(ctx))

	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var submitted, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the offered load, owned by runSustained
		defer wg.Done()
		offer(loadCtx, rate, 64, func(ctx context.Context) {
			if err := sys.submit(ctx); err != nil {
				if ctx.Err() == nil && failed.Add(1) == 1 {
					firstErr.Store(err)
				}
				return
			}
			submitted.Add(1)
		})
	}()

	var samples []sustainedSample
	start := time.Now()
	var lastSubmitted int64
	var holdTx pgx.Tx
	sample := func(phase string) error {
		ds, slow := pk.take()
		s := sustainedSample{at: time.Since(start).Round(time.Second), phase: phase, ran: int64(len(ds))}
		sub := submitted.Load()
		s.submitted, lastSubmitted = sub-lastSubmitted, sub
		if len(ds) > 0 {
			s.p50, s.p99 = pct(ds, 50), pct(ds, 99)
		}
		err := admin.QueryRow(ctx, `SELECT pg_table_size(c.oid), pg_indexes_size(c.oid), coalesce(s.n_live_tup, 0), coalesce(s.n_dead_tup, 0), coalesce(s.autovacuum_count, 0)
			FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = $1::regclass`, sys.table).
			Scan(&s.tableBytes, &s.indexBytes, &s.live, &s.dead, &s.vacuums)
		if err != nil {
			return err
		}
		s.rssKB = peakRSS() >> 10
		samples = append(samples, s)
		fmt.Printf("  %s %6v %-6s submitted %7d ran %7d p50 %8s p99 %8s table %6.1f MB indexes %6.1f MB live %8d dead %8d autovacuums %d\n",
			sys.name, s.at, s.phase, s.submitted, s.ran, ms(s.p50), ms(s.p99),
			float64(s.tableBytes)/1e6, float64(s.indexBytes)/1e6, s.live, s.dead, s.vacuums)
		printSlow(os.Stdout, slow)
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
				return samples, sys.name, err
			}
			defer holder.Close(context.WithoutCancel(ctx))
			if holdTx, err = holder.Begin(ctx); err != nil {
				return samples, sys.name, err
			}
			if _, err := holdTx.Exec(ctx, "SELECT txid_current()"); err != nil {
				return samples, sys.name, err
			}
		}
		end := time.Now().Add(ph.for_)
		for time.Now().Before(end) {
			select {
			case <-ctx.Done():
				return samples, sys.name, ctx.Err()
			case <-tick.C:
			}
			if err := sample(ph.name); err != nil {
				return samples, sys.name, err
			}
		}
		if holdTx != nil {
			_ = holdTx.Rollback(ctx)
			holdTx = nil
		}
	}
	stopLoad()
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return samples, sys.name, fmt.Errorf("%d submits failed, the first: %v", n, firstErr.Load())
	}
	return samples, sys.name, nil
}

// offer calls fn rate times a second, from at most workers goroutines at
// once, until ctx ends. Calls due while every goroutine is busy wait for
// one: the offered rate falls short rather than bursting later.
func offer(ctx context.Context, rate, workers int, fn func(context.Context)) {
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

// printSustained ends a system's run with the verdict the issue asks for:
// do the sizes plateau, and does p99 stay within 2x of the first minutes?
func printSustained(w io.Writer, name string, samples []sustainedSample) {
	var steady []sustainedSample
	for _, s := range samples {
		if s.phase == "steady" {
			steady = append(steady, s)
		}
	}
	if len(steady) < 4 {
		fmt.Fprintf(w, "sustained %s: %d steady samples, too few for a verdict\n", name, len(steady))
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
	fmt.Fprintf(tw, "sustained %s:\tp99 of the first 3 samples (median) %s, worst of the second half %s (%.2fx)\n", name, ms(base), ms(worst.p99), float64(worst.p99)/float64(max(base, 1)))
	fmt.Fprintf(tw, "\ttable+indexes %.1f MB at the middle of the steady phase, %.1f MB at its end (%.2fx)\n", float64(mid)/1e6, float64(last)/1e6, float64(last)/float64(max(mid, 1)))
	if len(samples) > len(steady) {
		peak := slices.MaxFunc(samples[len(steady):], func(a, b sustainedSample) int { return int(size(a) - size(b)) })
		end := samples[len(samples)-1]
		fmt.Fprintf(tw, "\tafter the steady phase: peak %.1f MB (%s, dead %d, p99 %s), at the end %.1f MB (dead %d, p99 %s)\n",
			float64(size(peak))/1e6, peak.phase, peak.dead, ms(peak.p99), float64(size(end))/1e6, end.dead, ms(end.p99))
	}
	fmt.Fprintf(tw, "\tpeak RSS of the bench process %d MB\n", samples[len(samples)-1].rssKB/1024)
	tw.Flush()
}
