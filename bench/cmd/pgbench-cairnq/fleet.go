package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/bench/internal/backlog"
	"github.com/cairnq/cairnq-go/bench/internal/pgadmin"
	"github.com/cairnq/cairnq-go/executor"
)

// The fleet benchmark (--bench fleet): N worker processes, each this
// binary re-executed as a child (fleet_child.go) holding one cairnq
// Client and Worker or one River client at --concurrency, on one
// database. Per N and system, in a fresh database: an idle window (no
// submits), a trickle (--fleet-rate submits/s from this process for
// --fleet-window), then, with a fresh fleet, a backlog of --fleet-backlog
// burned down. Everything is read from the server and /proc: statements
// (pg_stat_statements), commits, the server's and the fleet's CPU,
// connections (pg_stat_activity by application_name) and the children's
// peak RSS (VmHWM).

// fleetWorkerApp is the application_name of the fleet's connections.
const fleetWorkerApp = "fleet-worker"

// fleetConfig is the fleet benchmark's part of config.
type fleetConfig struct {
	fleetSizes, fleetSystems string
	fleetWindow, fleetIdle   time.Duration
	fleetRate, fleetBacklog  int
	fleetPool, fleetConc     int
	fleetRiverCooldown       time.Duration
	fleetRiverPoll           time.Duration
	fleetChild, fleetDB      string
}

func fleetFlags(cfg *config) {
	flag.StringVar(&cfg.fleetSizes, "fleet-n", "1,8,32", "fleet: worker process counts")
	flag.DurationVar(&cfg.fleetWindow, "fleet-window", 30*time.Second, "fleet: the trickle's length")
	flag.DurationVar(&cfg.fleetIdle, "fleet-idle", 10*time.Second, "fleet: the idle window (no submits) before the trickle")
	flag.IntVar(&cfg.fleetRate, "fleet-rate", 100, "fleet: trickle submits per second")
	flag.IntVar(&cfg.fleetBacklog, "fleet-backlog", 10_000, "fleet: the saturated run's backlog")
	flag.IntVar(&cfg.fleetConc, "fleet-concurrency", 8, "fleet: each process's worker concurrency (River MaxWorkers)")
	flag.IntVar(&cfg.fleetPool, "fleet-pool", 4, "fleet: max connections of each process's pool (LISTEN on top)")
	flag.StringVar(&cfg.fleetSystems, "fleet-systems", "cairnq,river", "fleet: systems to run")
	flag.DurationVar(&cfg.fleetRiverCooldown, "fleet-river-cooldown", time.Millisecond, "fleet: River FetchCooldown (1ms, its minimum: River's default 100ms caps a process at MaxWorkers jobs per 100ms)")
	flag.DurationVar(&cfg.fleetRiverPoll, "fleet-river-poll", time.Second, "fleet: River FetchPollInterval (River's default)")
	flag.StringVar(&cfg.fleetChild, "fleet-child", "", "internal: run as one process of the fleet (cairnq, river)")
	flag.StringVar(&cfg.fleetDB, "fleet-db", "", "internal: the fleet child's database")
}

// fleetPhase is what one window of one fleet measured.
type fleetPhase struct {
	tasks      int
	elapsed    time.Duration
	statements int64 // pg_stat_statements calls in the database (-1: not available)
	claimPath  int64 // of which probes, lease recoveries, claims (River: fetches)
	commits    int64
	serverCPU  time.Duration
	fleetCPU   time.Duration
	connsMax   int
	connsMean  float64
	lat        []time.Duration
	top        []stmtStat
}

type fleetResult struct {
	system    string
	n         int
	idle      fleetPhase
	trickle   fleetPhase
	saturated fleetPhase
	hwmIdle   [2]int64 // max, mean VmHWM after idle+trickle
	hwmSat    [2]int64
}

func benchFleet(ctx context.Context, cfg *config) {
	var sizes []int
	for _, s := range splitList(cfg.fleetSizes) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "fleet: bad --fleet-n entry %q\n", s)
			return
		}
		sizes = append(sizes, n)
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		return
	}
	var results []fleetResult
	defer func() { printFleetTable(os.Stdout, cfg, results) }()
	for _, n := range sizes {
		for _, sys := range splitList(cfg.fleetSystems) {
			if sys == "river" && cfg.noRiver {
				continue
			}
			r, err := runFleet(ctx, cfg, self, sys, n)
			if err != nil {
				fmt.Fprintf(os.Stderr, "fleet %s N=%d: %v\n", sys, n, err)
				continue
			}
			printFleet(os.Stdout, r)
			results = append(results, r)
		}
		if ctx.Err() != nil {
			return
		}
	}
}

func runFleet(ctx context.Context, cfg *config, self, sys string, n int) (fleetResult, error) {
	res := fleetResult{system: sys, n: n}
	db, err := cfg.srv.FreshDatabase(ctx, "fleet_"+sys)
	if err != nil {
		return res, err
	}
	defer db.Drop()
	sub, err := newFleetSubmitter(ctx, cfg, sys, db)
	if err != nil {
		return res, err
	}
	defer sub.close()
	if cfg.srv.statements {
		if err := enableStatements(ctx, db); err != nil {
			return res, err
		}
	}

	f, err := startFleet(ctx, cfg, self, sys, db.DSN, n)
	if err != nil {
		return res, err
	}
	defer f.stop()
	if err := f.send("GO"); err != nil {
		return res, err
	}
	sleepCtx(ctx, 2*time.Second) // the processes' first claims and LISTENs
	res.idle = measureWindow(ctx, cfg, db, f, 0, func() error { sleepCtx(ctx, cfg.fleetIdle); return ctx.Err() })
	total := int(cfg.fleetWindow.Seconds() * float64(cfg.fleetRate))
	res.trickle = measureWindow(ctx, cfg, db, f, total, func() error {
		if err := sub.trickle(ctx, cfg.fleetRate, total); err != nil {
			return err
		}
		return waitDone(ctx, sub, total)
	})
	if res.trickle.lat, err = f.latencies(); err != nil {
		return res, err
	}
	res.hwmIdle = f.hwm()
	f.stop()

	// Saturated: a backlog loaded with the fleet down, then burned down.
	if err := sub.backlog(ctx, cfg.fleetBacklog); err != nil {
		return res, fmt.Errorf("backlog: %w", err)
	}
	f, err = startFleet(ctx, cfg, self, sys, db.DSN, n)
	if err != nil {
		return res, err
	}
	defer f.stop()
	res.saturated = measureWindow(ctx, cfg, db, f, cfg.fleetBacklog, func() error {
		if err := f.send("GO"); err != nil {
			return err
		}
		return waitDone(ctx, sub, total+cfg.fleetBacklog)
	})
	res.hwmSat = f.hwm()
	return res, nil
}

// measureWindow runs body and reads around it what the server and the
// fleet spent.
func measureWindow(ctx context.Context, cfg *config, db *pgadmin.Database, f *fleet, tasks int, body func() error) fleetPhase {
	ph := fleetPhase{tasks: tasks, statements: -1}
	if cfg.srv.statements {
		_ = enableStatements(ctx, db) // resets the counters
	}
	settle()
	before := readCounters(ctx, db)
	srv0, fleet0 := cfg.srv.serverCPU(ctx), f.cpu()
	conns := startConnSampler(ctx, cfg, db)
	start := time.Now()
	if err := body(); err != nil {
		fmt.Fprintln(os.Stderr, "fleet: window:", err)
	}
	ph.elapsed = time.Since(start)
	ph.connsMax, ph.connsMean = conns()
	ph.serverCPU, ph.fleetCPU = cfg.srv.serverCPU(ctx).since(srv0), f.cpu()-fleet0
	sleepCtx(ctx, 1200*time.Millisecond) // busy backends report their commits at most once a second
	ph.commits = readCounters(ctx, db).delta(before).commits
	if cfg.srv.statements {
		if stats, err := topStatements(ctx, db, 1000); err == nil {
			ph.statements = 0
			stats = slices.DeleteFunc(stats, func(s stmtStat) bool { return benchOwn(s.query) })
			for _, s := range stats {
				ph.statements += s.calls
				if claimPath(s.query) {
					ph.claimPath += s.calls
				}
			}
			slices.SortFunc(stats, func(a, b stmtStat) int { return int(b.calls - a.calls) })
			ph.top = stats[:min(len(stats), 8)]
		}
	}
	return ph
}

// benchOwn says whether a statement is the bench's own progress poll
// (waitDone), which the figures leave out.
func benchOwn(q string) bool {
	return strings.Contains(q, "count(*)") && (strings.Contains(q, "river_job") || strings.Contains(q, "GROUP BY"))
}

// claimPath says whether a statement is a worker looking for work: a
// cairnq probe, lease recovery or claim, or River's job fetch.
func claimPath(q string) bool {
	return strings.Contains(q, "has_work") || strings.Contains(q, "SKIP LOCKED")
}

// startConnSampler counts the fleet's connections every 250ms until the
// returned func is called, which returns the maximum and mean.
func startConnSampler(ctx context.Context, cfg *config, db *pgadmin.Database) func() (int, float64) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var maxN, sum, samples int
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := cfg.srv.Conn(ctx)
		if err != nil {
			return
		}
		defer conn.Close(context.WithoutCancel(ctx))
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			var c int
			if conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND application_name = $2", db.Name, fleetWorkerApp).Scan(&c) == nil {
				maxN, sum, samples = max(maxN, c), sum+c, samples+1
			}
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() (int, float64) {
		close(done)
		wg.Wait()
		if samples == 0 {
			return -1, -1
		}
		return maxN, float64(sum) / float64(samples)
	}
}

// fleetSubmitter submits from this process, and counts what is done.
type fleetSubmitter struct {
	submit func(ctx context.Context, p fleetPayload) error
	fill   func(ctx context.Context, n int) error
	done   func(ctx context.Context) (int, error)
	close  func()
}

func newFleetSubmitter(ctx context.Context, cfg *config, sys string, db *pgadmin.Database) (*fleetSubmitter, error) {
	dsn := withAppName(db.DSN, "fleet-submitter")
	switch sys {
	case "cairnq":
		a, err := findAdapter("pgx")
		if err != nil {
			return nil, err
		}
		c, ex, closeFn, err := openClientEx(ctx, cfg, a, dsn, false, nil)
		if err != nil {
			return nil, err
		}
		return &fleetSubmitter{
			submit: func(ctx context.Context, p fleetPayload) error {
				_, err := c.Submit(ctx, fleetName, p, nil)
				return err
			},
			fill: func(ctx context.Context, n int) error { return fillNamed(ctx, c, ex, fleetName, n) },
			done: func(ctx context.Context) (int, error) {
				st, err := c.Stats(ctx, "")
				total := 0
				for _, q := range st {
					total += q.Succeeded
				}
				return total, err
			},
			close: closeFn,
		}, nil
	case "river":
		if err := riverSetup(ctx, cfg, db, 0); err != nil {
			return nil, err
		}
		pool, err := riverPool(ctx, dsn, 4)
		if err != nil {
			return nil, err
		}
		client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: quietLogger()})
		if err != nil {
			pool.Close()
			return nil, err
		}
		return &fleetSubmitter{
			submit: func(ctx context.Context, p fleetPayload) error {
				_, err := client.Insert(ctx, fleetArgs{T: p.T}, nil)
				return err
			},
			fill: func(ctx context.Context, n int) error {
				for done := 0; done < n; {
					params := make([]river.InsertManyParams, 0, 1000)
					for i := 0; i < 1000 && done+i < n; i++ {
						params = append(params, river.InsertManyParams{Args: fleetArgs{}})
					}
					if _, err := client.InsertMany(ctx, params); err != nil {
						return err
					}
					done += len(params)
				}
				return nil
			},
			done: func(ctx context.Context) (int, error) {
				var c int
				err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&c)
				return c, err
			},
			close: pool.Close,
		}, nil
	}
	return nil, fmt.Errorf("unknown fleet system %q (cairnq, river)", sys)
}

// trickle submits total tasks at rate a second, each stamped with the
// time just before its submit.
func (s *fleetSubmitter) trickle(ctx context.Context, rate, total int) error {
	t := time.NewTicker(time.Second / time.Duration(rate))
	defer t.Stop()
	for i := 0; i < total; i++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if err := s.submit(ctx, fleetPayload{T: time.Now().UnixNano()}); err != nil {
			return err
		}
	}
	return nil
}

func (s *fleetSubmitter) backlog(ctx context.Context, n int) error { return s.fill(ctx, n) }

// waitDone polls the database until want tasks are done.
func waitDone(ctx context.Context, s *fleetSubmitter, want int) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		got, err := s.done(ctx)
		if err != nil {
			return err
		}
		if got >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d done", got, want)
		}
		sleepCtx(ctx, 20*time.Millisecond) // polling the database for progress
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// fleet is the running child processes.
type fleet struct {
	procs   []*fleetProc
	stopped bool
}

type fleetProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// startFleet starts n children and waits for each to be READY. Each dies
// with this process (Pdeathsig), and stop ends them all.
func startFleet(ctx context.Context, cfg *config, self, sys, dsn string, n int) (*fleet, error) {
	f := &fleet{}
	for i := 0; i < n; i++ {
		cmd := exec.CommandContext(ctx, self, "--fleet-child", sys, "--fleet-db", dsn,
			"--fleet-concurrency", strconv.Itoa(cfg.fleetConc), "--fleet-pool", strconv.Itoa(cfg.fleetPool),
			"--fleet-river-cooldown", cfg.fleetRiverCooldown.String(), "--fleet-river-poll", cfg.fleetRiverPoll.String())
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			f.stop()
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			f.stop()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			f.stop()
			return nil, err
		}
		p := &fleetProc{cmd: cmd, in: in, out: bufio.NewScanner(out)}
		p.out.Buffer(make([]byte, 1<<20), 64<<20)
		f.procs = append(f.procs, p)
		if !p.out.Scan() || p.out.Text() != "READY" {
			f.stop()
			return nil, fmt.Errorf("fleet child %d did not start", i)
		}
	}
	return f, nil
}

func (f *fleet) send(line string) error {
	for _, p := range f.procs {
		if _, err := io.WriteString(p.in, line+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// latencies collects every child's submit-to-start times since the last.
func (f *fleet) latencies() ([]time.Duration, error) {
	if err := f.send("REPORT"); err != nil {
		return nil, err
	}
	var all []time.Duration
	for i, p := range f.procs {
		if !p.out.Scan() {
			return nil, fmt.Errorf("fleet child %d: no report", i)
		}
		line, ok := strings.CutPrefix(p.out.Text(), "RESULT ")
		var r childResult
		if !ok || json.Unmarshal([]byte(line), &r) != nil {
			return nil, fmt.Errorf("fleet child %d: bad report %q", i, p.out.Text())
		}
		all = append(all, r.Latencies...)
	}
	slices.Sort(all)
	return all, nil
}

// cpu is the fleet's CPU time so far, from /proc.
func (f *fleet) cpu() time.Duration {
	var total time.Duration
	for _, p := range f.procs {
		if d, ok := procCPU(p.cmd.Process.Pid); ok {
			total += d
		}
	}
	return total
}

// hwm is the largest and the mean peak RSS (VmHWM) of the children.
func (f *fleet) hwm() [2]int64 {
	var most, sum int64
	for _, p := range f.procs {
		v := procStatusKB(p.cmd.Process.Pid, "VmHWM")
		most, sum = max(most, v), sum+v
	}
	if len(f.procs) == 0 {
		return [2]int64{}
	}
	return [2]int64{most, sum / int64(len(f.procs))}
}

// stop ends the children (STOP, then closing their stdin), killing any
// that has not exited after 30s. Calling it again does nothing.
func (f *fleet) stop() {
	if f.stopped {
		return
	}
	f.stopped = true
	_ = f.send("STOP")
	for _, p := range f.procs {
		_ = p.in.Close()
	}
	for _, p := range f.procs {
		exited := make(chan struct{})
		go func() {
			_ = p.cmd.Wait()
			close(exited)
		}()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-exited
		}
	}
}

// fillNamed loads n tasks named name (untimed), as fill does.
func fillNamed(ctx context.Context, c *cairnq.Client, ex executor.Executor, name string, n int) error {
	return backlog.Fill(n, 500, 8, func(count int) error { return backlog.InTx(ctx, c, ex, name, count) })
}
