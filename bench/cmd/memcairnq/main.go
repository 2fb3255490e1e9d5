// Command memcairnq measures the resident memory of cairnq processes
// (issue 16): a worker draining a backlog, and a client holding many
// concurrent Waits, on SQLite and on Postgres.
//
// Every measurement runs in a fresh process (this binary re-executed with
// --child) on a fresh database, so that the backlog's setup leaves nothing
// in the measured heap. The child samples VmRSS and VmHWM from
// /proc/self/status and the Go heap from runtime/metrics every
// --sample-every, and prints one JSON line that the parent tabulates.
//
//	export BENCH_PG_DSN=$(bench/pg.sh)
//	cd bench && go run ./cmd/memcairnq                      # both backends, 10k and 100k, 1000 waits
//	go run ./cmd/memcairnq --backends sqlite --tasks 100000 --heap-dir /tmp/memheap
//	go run ./cmd/memcairnq --time-v                         # children under /usr/bin/time -v as a cross-check
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cairnq/cairnq-go/bench/internal/pgadmin"
)

type config struct {
	backends    []string
	tasks       []int
	concurrency int
	waits       int
	waitWindow  time.Duration
	what        []string
	dsn         string
	dir         string
	heapDir     string
	timeV       bool
	sampleEvery time.Duration
	pool        int

	// child mode
	child string
	db    string
	n     int
}

func main() {
	var cfg config
	var backends, tasks, what string
	flag.StringVar(&backends, "backends", "sqlite,postgres", "backends to measure")
	flag.StringVar(&tasks, "tasks", "10000,100000", "backlog sizes of the drain measurement")
	flag.IntVar(&cfg.concurrency, "concurrency", 64, "worker concurrency")
	flag.IntVar(&cfg.waits, "waits", 1000, "concurrent Waits in the waits measurement")
	flag.DurationVar(&cfg.waitWindow, "wait-window", 5*time.Second, "how long the waits are held (after the first 2s) while queries are counted")
	flag.StringVar(&what, "bench", "drain,waits", "measurements: drain, waits")
	flag.StringVar(&cfg.dsn, "dsn", os.Getenv("BENCH_PG_DSN"), "Postgres server (default $BENCH_PG_DSN); its role must be allowed to CREATE DATABASE")
	flag.StringVar(&cfg.dir, "dir", "", "directory for the SQLite files (default: a fresh temporary one, removed after)")
	flag.StringVar(&cfg.heapDir, "heap-dir", "", "write an inuse heap profile of every drain at 90% drained into this directory")
	flag.BoolVar(&cfg.timeV, "time-v", false, "run every child under /usr/bin/time -v and print its maximum resident set size too")
	flag.DurationVar(&cfg.sampleEvery, "sample-every", 100*time.Millisecond, "sampling interval")
	flag.IntVar(&cfg.pool, "pool", 32, "Postgres: the pgx pool's MaxConns (0: the adapter's default), 32 as in pgbench-cairnq")
	flag.StringVar(&cfg.child, "child", "", "internal: run one measurement (drain or waits) in this process")
	flag.StringVar(&cfg.db, "db", "", "internal: the child's database (file path or DSN)")
	flag.IntVar(&cfg.n, "n", 0, "internal: the child's task count")
	flag.Parse()
	cfg.backends = splitList(backends)
	cfg.what = splitList(what)
	for _, s := range splitList(tasks) {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			fatalf("bad --tasks %q", tasks)
		}
		cfg.tasks = append(cfg.tasks, n)
	}

	ctx := context.Background()
	if cfg.child != "" {
		if err := runChild(ctx, &cfg); err != nil {
			fatalf("child %s: %v", cfg.child, err)
		}
		return
	}
	if err := runParent(ctx, &cfg); err != nil {
		fatalf("%v", err)
	}
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "memcairnq: "+format+"\n", args...)
	os.Exit(1)
}

// result is what a child prints, as one JSON line prefixed "RESULT ".
type result struct {
	Kind    string `json:"kind"`
	Backend string `json:"backend"`
	N       int    `json:"n"`

	// drain
	Elapsed     time.Duration `json:"elapsed"`
	PeakRSS     int64         `json:"peak_rss"`      // largest VmRSS sampled
	HWM         int64         `json:"hwm"`           // VmHWM at the end
	PeakHeap    int64         `json:"peak_heap"`     // largest heap objects sampled (live + not yet swept)
	PeakLive    int64         `json:"peak_live"`     // largest live heap after a GC (/gc/heap/live)
	PeakGoTotal int64         `json:"peak_go_total"` // largest memory mapped by the Go runtime
	RSSAt       [3]int64      `json:"rss_at"`        // VmRSS at 10%, 50%, 90% drained
	LiveAt      [3]int64      `json:"live_at"`       // live heap at 10%, 50%, 90% drained
	StartRSS    int64         `json:"start_rss"`     // after open, before Run
	EndLive     int64         `json:"end_live"`      // live heap after the drain and a forced GC, client still open
	Samples     int           `json:"samples"`

	// waits
	Base         snapshot   `json:"base"`
	Held         snapshot   `json:"held"`
	Goroutines   [2]int     `json:"goroutines"`    // before and while holding the waits
	QueriesPerS  [2]float64 `json:"calls_per_s"`   // executor calls/s with 0 and N waits (Postgres only; -1: not counted)
	GoroutinesAt int        `json:"goroutines_at"` // after every wait ended
	AfterLive    int64      `json:"after_live"`    // live heap after every wait ended and a GC
	TimeVMaxRSS  int64      `json:"time_v_max_rss,omitempty"`
}

func runParent(ctx context.Context, cfg *config) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir := cfg.dir
	if dir == "" {
		dir, err = os.MkdirTemp("", "memcairnq-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var srv *pgadmin.Server
	for _, b := range cfg.backends {
		if b == "postgres" {
			if cfg.dsn == "" {
				return fmt.Errorf("postgres needs --dsn or BENCH_PG_DSN (export BENCH_PG_DSN=$(bench/pg.sh))")
			}
			if srv, err = pgadmin.Connect(ctx, cfg.dsn); err != nil {
				return err
			}
		} else if b != "sqlite" {
			return fmt.Errorf("unknown backend %q", b)
		}
	}
	fmt.Printf("memcairnq: concurrency %d, sampling every %v, Go heap from runtime/metrics, RSS from /proc/self/status\n", cfg.concurrency, cfg.sampleEvery)
	if srv != nil {
		fmt.Printf("postgres: %s\n", srv.Version)
	}
	var results []result
	for _, b := range cfg.backends {
		for _, w := range cfg.what {
			sizes := cfg.tasks
			if w == "waits" {
				sizes = []int{cfg.waits}
			}
			for _, n := range sizes {
				r, err := measure(ctx, cfg, self, dir, srv, b, w, n)
				if err != nil {
					return fmt.Errorf("%s %s %d: %w", b, w, n, err)
				}
				printOne(r)
				results = append(results, r)
			}
		}
	}
	printTables(results, cfg)
	return nil
}

// measure prepares a fresh database (the backlog submitted from this
// process, untimed), then runs the measurement in a child process.
func measure(ctx context.Context, cfg *config, self, dir string, srv *pgadmin.Server, backend, what string, n int) (result, error) {
	var target string
	switch backend {
	case "sqlite":
		target = filepath.Join(dir, fmt.Sprintf("%s-%d-%d.db", what, n, time.Now().UnixNano()))
		defer func() {
			for _, suf := range []string{"", "-wal", "-shm"} {
				_ = os.Remove(target + suf)
			}
		}()
	case "postgres":
		db, err := srv.FreshDatabase(ctx, "mem_"+what)
		if err != nil {
			return result{}, err
		}
		defer db.Drop()
		target = db.DSN
	}
	if what == "drain" {
		start := time.Now()
		if err := fill(ctx, cfg, backend, target, n); err != nil {
			return result{}, fmt.Errorf("fill: %w", err)
		}
		fmt.Fprintf(os.Stderr, "  %s: %d tasks submitted in %v\n", backend, n, time.Since(start).Round(time.Millisecond))
	}
	args := []string{"--child", what, "--backends", backend, "--db", target, "--n", strconv.Itoa(n),
		"--concurrency", strconv.Itoa(cfg.concurrency), "--sample-every", cfg.sampleEvery.String(),
		"--wait-window", cfg.waitWindow.String(), "--pool", strconv.Itoa(cfg.pool)}
	if cfg.heapDir != "" {
		args = append(args, "--heap-dir", cfg.heapDir)
	}
	name := self
	if cfg.timeV {
		args = append([]string{"-v", self}, args...)
		name = "/usr/bin/time"
	}
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("%v\n%s%s", err, stdout.String(), stderr.String())
	}
	var r result
	found := false
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "RESULT "); ok {
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				return result{}, err
			}
			found = true
		}
	}
	if !found {
		return result{}, fmt.Errorf("no result from the child:\n%s%s", stdout.String(), stderr.String())
	}
	if cfg.timeV {
		if m := regexp.MustCompile(`Maximum resident set size \(kbytes\): (\d+)`).FindStringSubmatch(stderr.String()); m != nil {
			kb, _ := strconv.ParseInt(m[1], 10, 64)
			r.TimeVMaxRSS = kb << 10
		}
	}
	return r, nil
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func printOne(r result) {
	switch r.Kind {
	case "drain":
		fmt.Printf("drain %-8s %7d tasks in %v: peak RSS %s (VmHWM %s), peak heap %s, peak live heap %s, peak Go total %s; RSS at 10/50/90%%: %s / %s / %s; live at 10/50/90%%: %s / %s / %s; RSS before Run %s; live heap after drain %s; %d samples",
			r.Backend, r.N, r.Elapsed.Round(time.Millisecond), mib(r.PeakRSS), mib(r.HWM), mib(r.PeakHeap), mib(r.PeakLive), mib(r.PeakGoTotal),
			mib(r.RSSAt[0]), mib(r.RSSAt[1]), mib(r.RSSAt[2]), mib(r.LiveAt[0]), mib(r.LiveAt[1]), mib(r.LiveAt[2]), mib(r.StartRSS), mib(r.EndLive), r.Samples)
	case "waits":
		fmt.Printf("waits %-8s %5d waits: RSS %s -> %s, live heap %s -> %s, stacks %s -> %s, goroutines %d -> %d, executor calls/s %.1f -> %.1f; after the waits ended: %d goroutines, live heap %s",
			r.Backend, r.N, mib(r.Base.RSS), mib(r.Held.RSS), mib(r.Base.Live), mib(r.Held.Live), mib(r.Base.Stacks), mib(r.Held.Stacks), r.Goroutines[0], r.Goroutines[1],
			r.QueriesPerS[0], r.QueriesPerS[1], r.GoroutinesAt, mib(r.AfterLive))
	}
	if r.TimeVMaxRSS > 0 {
		fmt.Printf("; /usr/bin/time -v max RSS %s", mib(r.TimeVMaxRSS))
	}
	fmt.Println()
}

func printTables(rs []result, cfg *config) {
	fmt.Printf("\n| backend | backlog | drain time | peak RSS | RSS at 10%% / 50%% / 90%% drained | peak heap (objects) | peak live heap |%s\n", timeVHead(cfg))
	fmt.Printf("|---|---|---|---|---|---|---|%s\n", timeVSep(cfg))
	for _, r := range rs {
		if r.Kind != "drain" {
			continue
		}
		fmt.Printf("| %s | %d | %v | %s | %s / %s / %s | %s | %s |%s\n", r.Backend, r.N, r.Elapsed.Round(10*time.Millisecond),
			mib(r.PeakRSS), mib(r.RSSAt[0]), mib(r.RSSAt[1]), mib(r.RSSAt[2]), mib(r.PeakHeap), mib(r.PeakLive), timeVCell(cfg, r))
	}
	fmt.Printf("\n| backend | waits | RSS 0 -> N | live heap 0 -> N | stacks 0 -> N | per wait (heap + stacks) | goroutines 0 -> N | executor calls/s 0 -> N |%s\n", timeVHead(cfg))
	fmt.Printf("|---|---|---|---|---|---|---|---|%s\n", timeVSep(cfg))
	for _, r := range rs {
		if r.Kind != "waits" {
			continue
		}
		per := float64(r.Held.Live-r.Base.Live+r.Held.Stacks-r.Base.Stacks) / float64(r.N)
		calls := fmt.Sprintf("%.0f -> %.0f", r.QueriesPerS[0], r.QueriesPerS[1])
		if r.QueriesPerS[1] < 0 {
			calls = "not counted"
		}
		fmt.Printf("| %s | %d | %s -> %s | %s -> %s | %s -> %s | %.0f B, %.2f goroutines | %d -> %d | %s |%s\n", r.Backend, r.N,
			mib(r.Base.RSS), mib(r.Held.RSS), mib(r.Base.Live), mib(r.Held.Live), mib(r.Base.Stacks), mib(r.Held.Stacks), per,
			float64(r.Goroutines[1]-r.Goroutines[0])/float64(r.N), r.Goroutines[0], r.Goroutines[1], calls, timeVCell(cfg, r))
	}
}

func timeVHead(cfg *config) string {
	if cfg.timeV {
		return " time -v max RSS |"
	}
	return ""
}

func timeVSep(cfg *config) string {
	if cfg.timeV {
		return "---|"
	}
	return ""
}

func timeVCell(cfg *config, r result) string {
	if cfg.timeV {
		return " " + mib(r.TimeVMaxRSS) + " |"
	}
	return ""
}
