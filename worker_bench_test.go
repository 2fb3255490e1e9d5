package cairnq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/protocol"
	"github.com/ncruces/go-sqlite3"
)

// submitMany fills the default queue with n "noop" tasks from several
// goroutines (setup, not measured).
func submitMany(b *testing.B, c *cairnq.Client, n int) {
	b.Helper()
	var wg sync.WaitGroup
	per := n / 32
	for g := range 32 {
		count := per
		if g == 31 {
			count = n - per*31
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range count {
				if _, err := c.Submit(context.Background(), "noop", nil, nil); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// burnDownTasks is the backlog the burn-down benchmarks drain.
const burnDownTasks = 10_000

// backlog returns the path of a database file holding n queued "noop"
// tasks in the default queue, submitted once (setup, not measured); each
// run drains a copy of it (openBacklog).
func backlog(b *testing.B, n int) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "backlog.db")
	c, err := cairnq.Open(context.Background(), path, nil)
	if err != nil {
		b.Fatal(err)
	}
	submitMany(b, c, n)
	if err := c.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

// copyBacklog copies the backlog database at path (and its WAL, if one is
// left) to a fresh directory and returns the copy's path.
func copyBacklog(b *testing.B, path string) string {
	b.Helper()
	dst := filepath.Join(b.TempDir(), "tasks.db")
	for _, suffix := range []string{"", "-wal"} {
		data, err := os.ReadFile(path + suffix)
		if errors.Is(err, fs.ErrNotExist) && suffix != "" {
			continue
		}
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(dst+suffix, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dst
}

// BenchmarkBurnDown drains 10,000 no-op tasks with one worker at several
// concurrencies, on a file database. cpu-ms/1k is the whole process's CPU
// time per 1,000 tasks while it drains.
func BenchmarkBurnDown(b *testing.B) {
	const tasks = burnDownTasks
	template := backlog(b, tasks)
	for _, conc := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			var total, cpu time.Duration
			for range b.N {
				elapsed, used := drainWorker(b, template, tasks, conc)
				total += elapsed
				cpu += used
			}
			b.ReportMetric(float64(tasks*b.N)/total.Seconds(), "tasks/s")
			reportCPU(b, cpu, tasks*b.N)
		})
	}
}

// drainWorker drains a copy of the backlog at template, tasks no-op tasks,
// with one worker at concurrency conc, and returns the time and the
// process CPU from the worker's start until the database shows every task
// succeeded. Opening and closing are left out of both, and of b's timer.
func drainWorker(b *testing.B, template string, tasks, conc int) (elapsed, cpu time.Duration) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	c, err := cairnq.Open(context.Background(), copyBacklog(b, template), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	w := newWorker(b, c, &cairnq.WorkerOptions{Concurrency: conc})
	var ran atomic.Int64
	w.Handle("noop", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		ran.Add(1)
		return nil, nil
	}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	defer func() {
		cancel()
		<-runDone
	}()
	b.StartTimer()
	start, cpu0 := time.Now(), processCPU()
	go func() { runDone <- w.Run(ctx) }()
	// Counting rows is itself costly on a 10k table, so poll the handler
	// count first and the database only at the end.
	for ran.Load() < int64(tasks) {
		time.Sleep(time.Millisecond)
	}
	for {
		stats, err := c.Stats(context.Background(), "default")
		if err != nil {
			b.Fatal(err)
		}
		if stats["default"].Succeeded == tasks {
			break
		}
		time.Sleep(time.Millisecond)
	}
	elapsed, cpu = time.Since(start), processCPU()-cpu0
	b.StopTimer()
	return elapsed, cpu
}

// BenchmarkCallLatency measures Call round trips (submit, a worker in this
// process runs a no-op, the caller sees the result) with default settings.
func BenchmarkCallLatency(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { benchCallLatency(b, openTemp(b, nil)) })
	b.Run("postgres", func(b *testing.B) { benchCallLatency(b, openPostgres(b, nil)) })
}

func benchCallLatency(b *testing.B, c *cairnq.Client) {
	w, err := cairnq.NewWorker(c, nil) // every default, including the 500ms idle poll
	if err != nil {
		b.Fatal(err)
	}
	w.Handle("echo", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return tc.Payload(), nil }, nil)
	startWorker(b, w)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	runtime.GC()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if _, err := c.Call(ctx, "echo", map[string]int{"i": i}, nil); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
}

// BenchmarkSQLiteFloor drains the burn-down's backlog with the worker's
// statements alone, on one ncruces connection configured as the store
// configures its writer, in the worker's shape: claims of at most 64 tasks
// (claim for one queue and one name, each its own transaction, as the
// worker's claims are durable), and the settlements of four claims' worth
// in one transaction (claimloop.SettlingCap). No handler, goroutine, row decoding or
// write queue: what is left is what SQLite spends on the protocol's
// statements and commits, the floor the worker's cost is measured
// against. settle=each settles a task per complete statement (the
// protocol's), settle=many all of them with one complete_many, and
// settle=ride each claim's tasks with one complete_many in the next
// claim's transaction, the worker's own shape on SQLite.
func BenchmarkSQLiteFloor(b *testing.B) {
	const tasks = burnDownTasks
	template := backlog(b, tasks)
	for _, settle := range []string{"each", "many", "ride"} {
		b.Run("settle="+settle, func(b *testing.B) {
			var total, cpu time.Duration
			for range b.N {
				elapsed, used := drainFloor(b, template, tasks, settle)
				total += elapsed
				cpu += used
			}
			b.ReportMetric(float64(tasks*b.N)/total.Seconds(), "tasks/s")
			reportCPU(b, cpu, tasks*b.N)
		})
	}
}

// drainFloor drains a copy of the backlog at template, tasks tasks, with
// the floor's statements settled as settle says ("each", "many" or
// "ride"), and returns the time and the process CPU the drain took;
// opening and closing are left out of both, and of b's timer.
func drainFloor(b *testing.B, template string, tasks int, settle string) (elapsed, cpu time.Duration) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	f := openFloor(b, copyBacklog(b, template))
	defer f.close()
	b.StartTimer()
	start, cpu0 := time.Now(), processCPU()
	var n int
	if settle == "ride" {
		n = f.drainRide(b)
	} else {
		n = f.drain(b, settle == "many")
	}
	elapsed, cpu = time.Since(start), processCPU()-cpu0
	b.StopTimer()
	if n != tasks {
		b.Fatalf("settled %d tasks, want %d", n, tasks)
	}
	return elapsed, cpu
}

// BenchmarkSQLiteWorkerVsFloor measures issue 16's SQLite target, the
// worker at concurrency 64 against the floor, as one figure: each round
// drains a copy of the backlog with the worker and then one with each
// floor, back to back in this process, and the benchmark reports the
// median of the rounds' rate ratios. The rates themselves move by 10-30%
// between windows on a shared machine; a ratio taken within one round
// moves much less. Run it with -benchtime Nx for N rounds.
func BenchmarkSQLiteWorkerVsFloor(b *testing.B) {
	const tasks = burnDownTasks
	template := backlog(b, tasks)
	var many, ride []float64
	for range b.N {
		worker, _ := drainWorker(b, template, tasks, 64)
		m, _ := drainFloor(b, template, tasks, "many")
		r, _ := drainFloor(b, template, tasks, "ride")
		// The rates are tasks over time: worker/floor is floor time over
		// worker time.
		many = append(many, m.Seconds()/worker.Seconds())
		ride = append(ride, r.Seconds()/worker.Seconds())
	}
	b.ReportMetric(median(many), "worker/many")
	b.ReportMetric(median(ride), "worker/ride")
}

// median is the middle of xs (the mean of the middle two for an even
// count); it sorts xs.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// floorClaimArgs is what the floor's claim is specialized for: one queue
// and one name, as a worker with one queue and one task registered claims.
func floorClaimArgs() protocol.Args {
	return protocol.Args{"queues": protocol.One("default"), "names": protocol.One("noop")}
}

// floorConn is BenchmarkSQLiteFloor's connection and statements.
type floorConn struct {
	c                      *sqlite3.Conn
	begin, commit          *sqlite3.Stmt
	claim, one, many       *sqlite3.Stmt
	claimSt, oneSt, manySt *protocol.Statement
}

func openFloor(b *testing.B, path string) *floorConn {
	b.Helper()
	c, err := sqlite3.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	// What the store sets on its connections (store/sqlite.go, openConn).
	if err := c.Exec("PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY; PRAGMA synchronous = NORMAL"); err != nil {
		b.Fatal(err)
	}
	set := protocol.Statements(protocol.SQLite)
	f := &floorConn{c: c, claimSt: set.Get("claim").Specialize(floorClaimArgs()),
		oneSt: set.Get("complete"), manySt: set.Get("complete_many")}
	prep := func(sql string) *sqlite3.Stmt {
		st, _, err := c.Prepare(sql)
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
	f.begin, f.commit = prep("BEGIN IMMEDIATE"), prep("COMMIT")
	f.claim, f.one, f.many = prep(f.claimSt.SQL), prep(f.oneSt.SQL), prep(f.manySt.SQL)
	return f
}

func (f *floorConn) close() {
	for _, st := range []*sqlite3.Stmt{f.begin, f.commit, f.claim, f.one, f.many} {
		st.Close()
	}
	f.c.Close()
}

// run binds st's arguments (compiled from a) to s, steps it to the end and
// returns the first column of each row (claim: the ids).
func (f *floorConn) run(b *testing.B, s *sqlite3.Stmt, st *protocol.Statement, a protocol.Args, out []string) []string {
	args, err := st.Bind(a)
	if err != nil {
		b.Fatal(err)
	}
	for i, v := range args {
		switch v := v.(type) {
		case nil:
			err = s.BindNull(i + 1)
		case string:
			err = s.BindText(i+1, v)
		case int64:
			err = s.BindInt64(i+1, v)
		default:
			b.Fatalf("cannot bind %T", v)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	for s.Step() {
		out = append(out, s.ColumnText(0))
	}
	if err := s.Err(); err != nil {
		b.Fatal(err)
	}
	if err := s.Reset(); err != nil {
		b.Fatal(err)
	}
	return out
}

func (f *floorConn) exec(b *testing.B, s *sqlite3.Stmt) {
	if err := s.Exec(); err != nil {
		b.Fatal(err)
	}
}

// drainRide claims and settles until nothing is left the way the worker
// does on SQLite while its claims draw several tasks: each transaction
// settles the previous claim's tasks with one complete_many, then claims
// up to 64 more. It returns how many tasks settled.
func (f *floorConn) drainRide(b *testing.B) int {
	const worker = "floor"
	settled := 0
	var claimed, next, got []string
	var done [][3]any
	for {
		now := time.Now().UnixMilli()
		f.exec(b, f.begin)
		if len(claimed) > 0 {
			done = done[:0]
			for _, id := range claimed {
				done = append(done, [3]any{id, worker, nil})
			}
			text, _ := json.Marshal(done)
			got = f.run(b, f.many, f.manySt, protocol.Args{"done": string(text), "now_ms": now}, got[:0])
			settled += len(got)
		}
		next = f.run(b, f.claim, f.claimSt, protocol.Args{"queues": protocol.One("default"), "names": protocol.One("noop"),
			"worker_id": worker, "now_ms": now, "lease_until_ms": now + 30_000, "limit": int64(64)}, next[:0])
		f.exec(b, f.commit)
		if len(claimed) == 0 && len(next) == 0 {
			return settled
		}
		claimed, next = next, claimed
	}
}

// drain claims and settles until nothing is left; it returns how many
// tasks settled.
func (f *floorConn) drain(b *testing.B, many bool) int {
	const worker = "floor"
	settled := 0
	var claimed, got []string
	for claims := 1; ; claims++ {
		now := time.Now().UnixMilli()
		f.exec(b, f.begin)
		before := len(claimed)
		claimed = f.run(b, f.claim, f.claimSt, protocol.Args{"queues": protocol.One("default"), "names": protocol.One("noop"),
			"worker_id": worker, "now_ms": now, "lease_until_ms": now + 30_000, "limit": int64(64)}, claimed)
		f.exec(b, f.commit)
		empty := len(claimed) == before
		if len(claimed) > 0 && (claims%4 == 0 || empty) {
			now = time.Now().UnixMilli()
			f.exec(b, f.begin)
			got = got[:0]
			if many {
				done := make([][3]any, len(claimed))
				for i, id := range claimed {
					done[i] = [3]any{id, worker, nil}
				}
				text, _ := json.Marshal(done)
				got = f.run(b, f.many, f.manySt, protocol.Args{"done": string(text), "now_ms": now}, got)
			} else {
				for _, id := range claimed {
					got = f.run(b, f.one, f.oneSt, protocol.Args{"id": id, "worker_id": worker, "result": nil, "now_ms": now}, got)
				}
			}
			f.exec(b, f.commit)
			settled += len(got)
			claimed = claimed[:0]
		}
		if empty {
			return settled
		}
	}
}
