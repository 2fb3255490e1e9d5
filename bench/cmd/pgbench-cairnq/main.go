// Command pgbench-cairnq benchmarks cairnq on Postgres against River, and
// cairnq's Postgres adapters against each other.
//
//	export BENCH_PG_DSN=$(bench/pg.sh)        # a throwaway local cluster
//	cd bench && go run ./cmd/pgbench-cairnq    # every benchmark, 3 runs
//	bench/pg.sh stop
//
// Benchmarks (--bench, comma-separated):
//
//	burndown  20,000 no-op tasks, drained by one worker at concurrency 64:
//	          River 0.51.2 and cairnq through each adapter, interleaved per
//	          run; tasks/s with ratios to River and to pgx.
//	submit    Submit throughput from 1 and 64 goroutines (River's Insert
//	          beside it for reference).
//	latency   enqueue-to-handler-start p50/p95/p99, LISTEN on and off.
//	bulk      issue 30: SubmitMany against River's InsertMany and the
//	          COPY floors, 100,000 no-op tasks in batches of each
//	          --bulk-batch, alternating (not in the default set; "many"
//	          is another name for it).
//	fleet     N worker processes (--fleet-n) on one database, idle, with a
//	          trickle and saturated, cairnq and River (not in the default
//	          set; fleet.go).
//	sustained a steady load with retention, then a held vacuum horizon,
//	          cairnq and River (not in the default set; sustained.go).
//	backlog   claim rate and fresh-task pickup over large backlogs (queued,
//	          and finished retained), cairnq and River (not in the default
//	          set; see backlog.go).
//
// Every measurement runs in a fresh database (CREATE DATABASE, dropped
// after). See bench/README.md for what each figure means.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairnq/cairnq-go/internal/testkit/pgdsn"
)

type config struct {
	srv *server

	benches     []string
	adapters    []adapter
	latAdapters []adapter
	subAdapters []adapter
	runs        int
	tasks       int
	concurrency int
	pool        int
	timeout     time.Duration
	// via, when set, is the host:port of a connection pooler (pgbouncer)
	// in front of the server: cairnq's adapters reach each run's database
	// through it, while the bench's own reads and setup go straight to the
	// server. The pooler must serve every database (pgbouncer: "* =").
	via string

	riverFetchCooldown time.Duration
	riverFetchPoll     time.Duration
	noRiver            bool
	burnNoListen       bool
	floor              bool
	floorStreams       int
	floorBatch         int
	floorSettle        int

	submitN          int
	submitGoroutines []int

	bulkN          int
	bulkBatches    []int
	bulkGoroutines int
	bulkSystems    []string
	bulkSQL        string

	latencyN         int
	latencyNoListenN int
	latencyGap       time.Duration
	latencyListen    []bool

	fleetConfig // --bench fleet (fleet.go)

	countCalls     bool
	statements     bool
	waitEvents     bool
	cpuprofile     string
	profileAdapter string
	profiled       bool

	backlog     *backlogConfig
	durable     durableConfig
	durableKill killConfig
	workflow    workflowConfig
	limit       limitConfig
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "pgbench-cairnq:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		dsn         = flag.String("dsn", os.Getenv("BENCH_PG_DSN"), "server DSN whose role may CREATE DATABASE (default $BENCH_PG_DSN; bench/pg.sh prints one)")
		benches     = flag.String("bench", "burndown,submit,latency", "benchmarks to run: burndown, submit, latency, and (not by default) bulk, fleet, sustained, backlog, durable, durable-kill, workflow, limit")
		adapterList = flag.String("adapters", "all", "cairnq adapters for the burn-down, comma-separated, or all")
		latList     = flag.String("latency-adapters", "pgx", "adapters for the latency benchmark, or all")
		latModes    = flag.String("latency-listen", "on,off", "latency: LISTEN modes to measure (on, off)")
		subList     = flag.String("submit-adapters", "pgx", "adapters for the submit benchmark, or all")
		cfg         config
		goroutines  = flag.String("submit-goroutines", "1,64", "submit benchmark goroutine counts")
		bulkBatches = flag.String("bulk-batch", "1000,5000", "bulk: tasks per SubmitMany / InsertMany / COPY call; each size is measured")
		bulkSys     = flag.String("bulk-systems", "river,cairnq,copy,copy-river", "bulk: systems, in order ("+strings.Join(bulkSystems, ", ")+")")
	)
	flag.IntVar(&cfg.runs, "runs", 3, "repetitions of every measurement")
	flag.IntVar(&cfg.tasks, "tasks", 20_000, "burn-down: no-op tasks per run")
	flag.IntVar(&cfg.concurrency, "concurrency", 64, "burn-down: worker concurrency (River MaxWorkers)")
	flag.IntVar(&cfg.pool, "pool", 32, "max connections of every pool, River's and cairnq's alike (a LISTEN connection may come on top)")
	flag.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "give up on a burn-down after this long")
	flag.StringVar(&cfg.via, "via", "", "`host:port` of a connection pooler in front of the server, for cairnq's adapters only (the bench's own connections go straight to the server)")
	flag.DurationVar(&cfg.riverFetchCooldown, "river-fetch-cooldown", 1*time.Millisecond, "River FetchCooldown (its minimum is 1ms; default 100ms)")
	flag.DurationVar(&cfg.riverFetchPoll, "river-fetch-poll", 10*time.Millisecond, "River FetchPollInterval (default 1s)")
	flag.BoolVar(&cfg.burnNoListen, "burndown-no-listen", false, "burn-down: hide the executor's Listener, so the worker polls (measures what LISTEN costs)")
	flag.BoolVar(&cfg.floor, "floor", false, "burn-down: also drain through cairnq's claim and complete_many SQL alone (with the protocol schema, with only the claim-path indexes, in the worker's shape), and in that shape with calls, then through cairnq's store (see floor.go)")
	flag.IntVar(&cfg.floorStreams, "floor-streams", 2, "--floor: concurrent claim-then-complete loops")
	flag.IntVar(&cfg.floorBatch, "floor-batch", 64, "--floor: tasks per claim")
	flag.IntVar(&cfg.floorSettle, "floor-settle", 1, "--floor: claims whose tasks each complete_many settles")
	flag.BoolVar(&cfg.noRiver, "no-river", false, "skip River (burn-down and submit)")
	flag.IntVar(&cfg.submitN, "submit-n", 20_000, "submit: submits per measurement")
	flag.IntVar(&cfg.bulkN, "bulk-n", 100_000, "bulk: tasks per measurement")
	flag.StringVar(&cfg.bulkSQL, "bulk-sql", "", "bulk: a `file` of SQL that sql-insert-many runs instead of insert_many (same :each_X parameters), to measure a variant")
	flag.IntVar(&cfg.bulkGoroutines, "bulk-goroutines", 1, "bulk: goroutines sharing the tasks, each writing its batches one after another")
	flag.IntVar(&cfg.latencyN, "latency-n", 300, "latency: measured submits per run (after 10 warm-up ones)")
	flag.IntVar(&cfg.latencyNoListenN, "latency-n-nolisten", 0, "latency: measured submits with LISTEN off (default --latency-n; each waits up to a 500ms poll)")
	flag.DurationVar(&cfg.latencyGap, "latency-gap", 20*time.Millisecond, "latency: mean gap between one handler start and the next submit (uniform in [gap/2, 3gap/2])")
	flag.BoolVar(&cfg.countCalls, "count-calls", false, "burn-down: count executor calls (statements, transactions) per task")
	flag.BoolVar(&cfg.statements, "statements", false, "burn-down: print the top statements of each run from pg_stat_statements (needs BENCH_PG_STATEMENTS=1 bench/pg.sh)")
	flag.BoolVar(&cfg.waitEvents, "wait-events", false, "burn-down: sample pg_stat_activity every 10ms and print what the sessions waited on")
	flag.StringVar(&cfg.cpuprofile, "cpuprofile", "", "write a CPU profile of the first cairnq burn-down of --profile-adapter (the timed window only) to this file, and allocation profiles of the window's start and end beside it (FILE.allocs.start, FILE.allocs.end: compare with pprof -base)")
	flag.StringVar(&cfg.profileAdapter, "profile-adapter", "pgx", "adapter whose burn-down --cpuprofile profiles")
	fleetFlags(&cfg)
	parseBacklog := backlogFlags()
	parseDurable := durableFlags(&cfg.durable)
	killFlags(&cfg.durableKill)
	parseWorkflow := workflowFlags(&cfg.workflow)
	parseLimit := limitFlags(&cfg.limit)
	flag.Parse()
	if cfg.fleetChild != "" {
		return runFleetChild(context.Background(), &cfg)
	}
	if cfg.durableKill.child != "" {
		return runDurableChild(context.Background(), &cfg.durableKill)
	}

	if strings.TrimSpace(*dsn) == "" {
		return fmt.Errorf("no server: set BENCH_PG_DSN (e.g. export BENCH_PG_DSN=$(bench/pg.sh)) or pass --dsn")
	}
	for _, b := range splitList(*benches) {
		switch b {
		case "burndown", "submit", "latency", "bulk", "fleet", "sustained", "backlog", "durable", "durable-kill", "workflow", "limit":
			cfg.benches = append(cfg.benches, b)
		case "many":
			cfg.benches = append(cfg.benches, "bulk")
		default:
			return fmt.Errorf("unknown benchmark %q (burndown, submit, latency, bulk, fleet, sustained, backlog, durable, durable-kill, workflow, limit)", b)
		}
	}
	var err error
	if cfg.backlog, err = parseBacklog(); err != nil {
		return err
	}
	if err := parseDurable(); err != nil {
		return err
	}
	if err := parseWorkflow(); err != nil {
		return err
	}
	if err := parseLimit(); err != nil {
		return err
	}
	if cfg.adapters, err = pickAdapters(*adapterList); err != nil {
		return err
	}
	if cfg.latAdapters, err = pickAdapters(*latList); err != nil {
		return err
	}
	if cfg.subAdapters, err = pickAdapters(*subList); err != nil {
		return err
	}
	for _, m := range splitList(*latModes) {
		switch m {
		case "on":
			cfg.latencyListen = append(cfg.latencyListen, true)
		case "off":
			cfg.latencyListen = append(cfg.latencyListen, false)
		default:
			return fmt.Errorf("bad --latency-listen entry %q (on, off)", m)
		}
	}
	for _, g := range splitList(*goroutines) {
		n, err := strconv.Atoi(g)
		if err != nil || n < 1 {
			return fmt.Errorf("bad --submit-goroutines entry %q", g)
		}
		cfg.submitGoroutines = append(cfg.submitGoroutines, n)
	}
	for _, b := range splitList(*bulkBatches) {
		n, err := strconv.Atoi(b)
		if err != nil || n < 1 {
			return fmt.Errorf("bad --bulk-batch entry %q", b)
		}
		cfg.bulkBatches = append(cfg.bulkBatches, n)
	}
	for _, sys := range splitList(*bulkSys) {
		if !slices.Contains(bulkSystems, sys) {
			return fmt.Errorf("unknown --bulk-systems entry %q (%s)", sys, strings.Join(bulkSystems, ", "))
		}
		cfg.bulkSystems = append(cfg.bulkSystems, sys)
	}
	if cfg.bulkN < 1 || cfg.bulkGoroutines < 1 {
		return fmt.Errorf("--bulk-n and --bulk-goroutines must be >= 1")
	}
	if cfg.runs < 1 || cfg.tasks < 1 || cfg.concurrency < 1 || cfg.pool < 1 || cfg.floorStreams < 1 || cfg.floorBatch < 1 || cfg.floorSettle < 1 {
		return fmt.Errorf("--runs, --tasks, --concurrency, --pool, --floor-streams, --floor-batch and --floor-settle must be >= 1")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg.srv, err = connectServer(ctx, *dsn)
	if err != nil {
		return err
	}
	if cfg.statements && !cfg.srv.statements {
		return fmt.Errorf("--statements needs the server started with shared_preload_libraries = 'pg_stat_statements' (BENCH_PG_STATEMENTS=1 bench/pg.sh)")
	}
	rep := &report{cfg: &cfg}
	fmt.Printf("pgbench-cairnq: PostgreSQL %s at %s; fsync=%s synchronous_commit=%s full_page_writes=%s shared_buffers=%s max_connections=%s\n",
		cfg.srv.Version, pgdsn.Redact(*dsn), cfg.srv.settings["fsync"], cfg.srv.settings["synchronous_commit"],
		cfg.srv.settings["full_page_writes"], cfg.srv.settings["shared_buffers"], cfg.srv.settings["max_connections"])
	fmt.Printf("  GOMAXPROCS=%d NumCPU=%d %s/%s %s; runs=%d tasks=%d concurrency=%d pool=%d; River %s FetchCooldown=%v FetchPollInterval=%v\n\n",
		runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(),
		cfg.runs, cfg.tasks, cfg.concurrency, cfg.pool, riverVersion, cfg.riverFetchCooldown, cfg.riverFetchPoll)

	for _, b := range cfg.benches {
		switch b {
		case "burndown":
			benchBurnDown(ctx, &cfg, rep)
		case "submit":
			benchSubmit(ctx, &cfg, rep)
		case "latency":
			benchLatency(ctx, &cfg, rep)
		case "bulk":
			benchBulk(ctx, &cfg, rep)
		case "fleet":
			benchFleet(ctx, &cfg)
		case "sustained":
			benchSustained(ctx, &cfg, rep)
		case "backlog":
			benchBacklog(ctx, &cfg, cfg.backlog, rep)
		case "durable":
			benchDurable(ctx, &cfg)
		case "durable-kill":
			benchDurableKill(ctx, &cfg)
		case "workflow":
			benchWorkflow(ctx, &cfg)
		case "limit":
			benchLimit(ctx, &cfg)
		}
		if ctx.Err() != nil {
			break
		}
	}
	rep.print(os.Stdout)
	return nil
}

// benchBurnDown interleaves the systems within each run, so every run
// compares them under the same machine load.
func benchBurnDown(ctx context.Context, cfg *config, rep *report) {
	for run := 1; run <= cfg.runs && ctx.Err() == nil; run++ {
		if !cfg.noRiver {
			r, err := riverBurnDown(ctx, cfg, run)
			rep.addBurn(r, "river", run, err)
		}
		if cfg.floor {
			for _, sys := range floorSystems {
				r, err := floorBurnDown(ctx, cfg, sys, run)
				rep.addBurn(r, sys, run, err)
			}
		}
		for _, a := range cfg.adapters {
			if a.todo != "" {
				continue
			}
			r, err := cairnqBurnDown(ctx, cfg, a, run)
			rep.addBurn(r, a.name, run, err)
		}
	}
}

func benchSubmit(ctx context.Context, cfg *config, rep *report) {
	for run := 1; run <= cfg.runs && ctx.Err() == nil; run++ {
		for _, g := range cfg.submitGoroutines {
			for _, a := range cfg.subAdapters {
				if a.todo != "" {
					continue
				}
				r, err := cairnqSubmit(ctx, cfg, a, g, run)
				rep.addRate(r, a.name, g, run, err)
			}
			if !cfg.noRiver {
				r, err := riverSubmit(ctx, cfg, g, run)
				rep.addRate(r, "river", g, run, err)
			}
		}
	}
}

func benchLatency(ctx context.Context, cfg *config, rep *report) {
	for run := 1; run <= cfg.runs && ctx.Err() == nil; run++ {
		for _, a := range cfg.latAdapters {
			if a.todo != "" {
				continue
			}
			for _, listen := range cfg.latencyListen {
				r, err := cairnqLatency(ctx, cfg, a, listen, run)
				rep.addLat(r, a.name, listen, run, err)
			}
		}
	}
}

func pickAdapters(list string) ([]adapter, error) {
	if list == "all" {
		return slices.Clone(adapters), nil
	}
	var out []adapter
	for _, name := range splitList(list) {
		a, err := findAdapter(name)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
