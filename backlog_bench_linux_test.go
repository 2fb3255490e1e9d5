package cairnq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/protocol"
	"github.com/ncruces/go-sqlite3"
)

// The SQLite half of issue 30's backlog figures (the Postgres half, with
// River, is bench/cmd/pgbench-cairnq --bench backlog): the claim rate and
// a fresh task's pickup when the file holds 10k or 1M queued tasks, or
// 10M finished ones retained beside 10k queued.
//
//	CAIRNQ_BENCH_BACKLOG_DIR=/tmp/backlogs go test -run '^$' -bench 'BacklogFill' -benchtime 1x .
//	CAIRNQ_BENCH_BACKLOG_DIR=/tmp/backlogs CAIRNQ_BENCH_LOCK=/tmp/bench.lock \
//	    go test -run '^$' -bench '^BenchmarkBacklog$' -benchtime 3x -timeout 1h .
//
// The fill writes each shape's template file once, with set-based SQL
// (rows as Submit and a no-op completion leave them: TestBacklogFillRows);
// the directory keeps them between invocations, and every run drains a
// copy. CAIRNQ_BENCH_BACKLOG (default "10000,1000000,10000+10000000")
// lists the shapes, QUEUED or QUEUED+FINISHED. With CAIRNQ_BENCH_LOCK
// set, the benchmark holds that flock(2) file shared while it fills and
// copies, and exclusive only while it times a drain.

// Each timed drain runs backlogDrain tasks after backlogWarm, at
// concurrency 64, while fresh tasks are submitted through the same
// client, priority 1 over the backlog's 0, every ~backlogGap.
const (
	backlogWarm  = 1000
	backlogDrain = 9000
	backlogGap   = 10 * time.Millisecond
)

type backlogShape struct{ queued, finished int }

func (s backlogShape) String() string {
	return fmt.Sprintf("queued=%d/finished=%d", s.queued, s.finished)
}

func backlogShapes(b *testing.B) []backlogShape {
	spec := os.Getenv("CAIRNQ_BENCH_BACKLOG")
	if spec == "" {
		spec = "10000,1000000,10000+10000000"
	}
	var out []backlogShape
	for _, s := range strings.Split(spec, ",") {
		q, f, _ := strings.Cut(strings.TrimSpace(s), "+")
		var sh backlogShape
		var err error
		if sh.queued, err = strconv.Atoi(q); err != nil {
			b.Fatalf("CAIRNQ_BENCH_BACKLOG: bad shape %q", s)
		}
		if f != "" {
			if sh.finished, err = strconv.Atoi(f); err != nil {
				b.Fatalf("CAIRNQ_BENCH_BACKLOG: bad shape %q", s)
			}
		}
		out = append(out, sh)
	}
	return out
}

// benchLock is CAIRNQ_BENCH_LOCK, the machine's benchmark lock.
type benchLock struct{ f *os.File }

func (l *benchLock) take(b *testing.B, how int) {
	l.release()
	path := os.Getenv("CAIRNQ_BENCH_LOCK")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o666)
	if err != nil {
		b.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		b.Fatal(err)
	}
	l.f = f
}

func (l *benchLock) release() {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// backlogDir is where the templates live: CAIRNQ_BENCH_BACKLOG_DIR, or a
// directory of b's that goes when it ends.
func backlogDir(b *testing.B) string {
	if d := os.Getenv("CAIRNQ_BENCH_BACKLOG_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		return d
	}
	return b.TempDir()
}

// backlogTemplate returns the path of sh's template in dir, filling it
// first when it is missing.
func backlogTemplate(b *testing.B, dir string, sh backlogShape) string {
	b.Helper()
	path := filepath.Join(dir, fmt.Sprintf("backlog-q%d-f%d.db", sh.queued, sh.finished))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	start := time.Now()
	tmp := path + ".filling"
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(tmp + suffix)
	}
	if err := fillSQLiteBacklog(context.Background(), tmp, sh); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	b.Logf("%v: filled in %v, %s", sh, time.Since(start).Round(time.Second), fileSizes(path))
	return path
}

// fileSizes says how large the database file and its WAL are.
func fileSizes(path string) string {
	var parts []string
	for _, suffix := range []string{"", "-wal"} {
		if st, err := os.Stat(path + suffix); err == nil {
			parts = append(parts, fmt.Sprintf("%s%s %.1f MiB", filepath.Base(path), suffix, float64(st.Size())/(1<<20)))
		}
	}
	return strings.Join(parts, ", ")
}

// sqliteFillChunk bounds the rows of one fill transaction.
const sqliteFillChunk = 500_000

// sqliteBacklogFinishedWorker is the worker id the finished rows carry.
const sqliteBacklogFinishedWorker = "bench-backlog-worker"

// sqliteULID is an SQL expression for a task id: "task_", 10 Crockford
// base32 characters of the millisecond time ms, then 8 of 40 scrambled
// bits (rnd) and 8 of the sequence number g, so that ids are unique and
// in sequence order within a millisecond. rnd is a function of g and a
// seed, not random(): SQLite flattens the subquery and would evaluate
// random() once per use, giving root_id another value than id.
func sqliteULID() string {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	var b strings.Builder
	b.WriteString("'task_'")
	digit := func(expr string, shift int) {
		fmt.Fprintf(&b, " || substr('%s', ((%s >> %d) & 31) + 1, 1)", alphabet, expr, shift)
	}
	for k := 9; k >= 0; k-- {
		digit("ms", 5*k)
	}
	for k := 7; k >= 0; k-- {
		digit("rnd", 5*k)
	}
	for k := 7; k >= 0; k-- {
		digit("g", 5*k)
	}
	return b.String()
}

// sqliteFillSQL inserts rows g = ?1 .. ?2-1 of a backlog whose queued part
// starts at g = ?3 (rows below are finished: succeeded, no result, as a
// no-op handler's completion leaves them); row g was created at ?4 + g ms;
// ?5 seeds the ids' random part.
func sqliteFillSQL() string {
	return `WITH RECURSIVE s(g) AS (SELECT ?1 UNION ALL SELECT g + 1 FROM s WHERE g + 1 < ?2),
r AS (SELECT g, ?4 + g AS ms, g < ?3 AS fin, (g * 2654435761 + ?5) % 1099511627776 AS rnd FROM s)
INSERT INTO cairnq_tasks (
    id, name, queue, status, payload, result, error, metadata, progress, message,
    attempt, max_attempts, priority, worker_id, lease_until_ms, run_at_ms,
    cancel_requested_at_ms, parent_id, root_id, correlation_id,
    created_at_ms, updated_at_ms, completed_at_ms)
SELECT id, 'noop', 'default', CASE WHEN fin THEN 'succeeded' ELSE 'queued' END,
       '{}', NULL, NULL, '{}', CASE WHEN fin THEN 1.0 END, NULL,
       fin, 3, 0, CASE WHEN fin THEN '` + sqliteBacklogFinishedWorker + `' END, NULL, ms,
       NULL, NULL, id, NULL,
       ms, CASE WHEN fin THEN ms + 20 ELSE ms END, CASE WHEN fin THEN ms + 20 END
FROM (SELECT ` + sqliteULID() + ` AS id, ms, fin FROM r)`
}

// fillSQLiteBacklog creates a cairnq database at path (Open migrates it)
// and fills it: finished rows first, the queued ones newest, up to now.
// Then it does what a store running on that file would have done: its
// periodic PRAGMA optimize (statistics), and a truncating checkpoint.
func fillSQLiteBacklog(ctx context.Context, path string, sh backlogShape) error {
	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		return err
	}
	if err := c.Close(); err != nil {
		return err
	}
	conn, err := sqlite3.Open(path)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.Exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL"); err != nil {
		return err
	}
	st, _, err := conn.Prepare(sqliteFillSQL())
	if err != nil {
		return err
	}
	defer st.Close()
	total := sh.finished + sh.queued
	start := time.Now().UnixMilli() - int64(total)
	seed := rand.Int64N(1 << 40)
	for lo := 0; lo < total; lo += sqliteFillChunk {
		hi := min(lo+sqliteFillChunk, total)
		if err := st.BindInt64(1, int64(lo)); err != nil {
			return err
		}
		_ = st.BindInt64(2, int64(hi))
		_ = st.BindInt64(3, int64(sh.finished))
		_ = st.BindInt64(4, start)
		_ = st.BindInt64(5, seed)
		if err := st.Exec(); err != nil {
			return fmt.Errorf("fill rows %d-%d: %w", lo, hi, err)
		}
	}
	return conn.Exec("PRAGMA optimize; PRAGMA wal_checkpoint(TRUNCATE)")
}

// copyFile copies src (and its WAL, if any) to dst, durably.
func copyFile(src, dst string) error {
	for _, suffix := range []string{"", "-wal"} {
		in, err := os.Open(src + suffix)
		if errors.Is(err, fs.ErrNotExist) && suffix != "" {
			continue
		}
		if err != nil {
			return err
		}
		out, err := os.Create(dst + suffix)
		if err == nil {
			_, err = io.Copy(out, in)
			if err == nil {
				// Written through to the disk now, or the drain's first
				// checkpoint fsync would pay for the whole copy (seconds
				// for a 5 GB file), which no running system pays.
				err = out.Sync()
			}
			if cerr := out.Close(); err == nil {
				err = cerr
			}
		}
		in.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkBacklogFill writes the templates BenchmarkBacklog drains, when
// CAIRNQ_BENCH_BACKLOG_DIR does not hold them yet, and reports their size.
func BenchmarkBacklogFill(b *testing.B) {
	var lock benchLock
	defer lock.release()
	lock.take(b, syscall.LOCK_SH)
	dir := backlogDir(b)
	for _, sh := range backlogShapes(b) {
		b.Run(sh.String(), func(b *testing.B) {
			path := backlogTemplate(b, dir, sh)
			st, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(st.Size())/(1<<20), "file-MiB")
			for _, line := range claimPlan(b, path) {
				b.Log(line)
			}
		})
	}
}

// BenchmarkBacklog drains each shape's template: every iteration a fresh
// copy, timed from the moment backlogWarm backlog tasks ran until
// backlogDrain more did. It reports the rate, the fresh tasks' pickup
// (p50, p95, pooled over the iterations), the peak RSS of this process
// in the window (VmHWM, reset as it opens), and the time Open took on the
// copy.
func BenchmarkBacklog(b *testing.B) {
	var lock benchLock
	defer lock.release()
	lock.take(b, syscall.LOCK_SH)
	dir := backlogDir(b)
	for _, sh := range backlogShapes(b) {
		template := backlogTemplate(b, dir, sh)
		b.Run(sh.String(), func(b *testing.B) {
			drain := min(backlogDrain, sh.queued-backlogWarm)
			var total, cpu, open time.Duration
			var picks []time.Duration
			var peak int64
			// Every iteration's copy first, holding the lock shared; then
			// every timed drain in one exclusive hold.
			b.StopTimer()
			lock.take(b, syscall.LOCK_SH)
			copies := make([]string, b.N)
			for i := range copies {
				copies[i] = filepath.Join(b.TempDir(), "tasks.db")
				if err := copyFile(template, copies[i]); err != nil {
					b.Fatal(err)
				}
			}
			lock.take(b, syscall.LOCK_EX)
			b.StartTimer()
			for _, path := range copies {
				r := drainSQLiteBacklog(b, path, drain)
				for _, suffix := range []string{"", "-wal", "-shm"} {
					os.Remove(path + suffix)
				}
				total, cpu, open = total+r.elapsed, cpu+r.cpu, open+r.open
				picks = append(picks, r.pickups...)
				peak = max(peak, r.peakRSS)
			}
			lock.take(b, syscall.LOCK_SH)
			b.ReportMetric(float64(drain*b.N)/total.Seconds(), "tasks/s")
			reportCPU(b, cpu, drain*b.N)
			slices.Sort(picks)
			if len(picks) > 0 {
				b.ReportMetric(float64(picks[len(picks)/2].Microseconds())/1000, "pickup-p50-ms")
				b.ReportMetric(float64(picks[(len(picks)*95+99)/100-1].Microseconds())/1000, "pickup-p95-ms")
			}
			b.ReportMetric(float64(len(picks)), "pickups")
			b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
			b.ReportMetric(open.Seconds()*1000/float64(b.N), "open-ms")
		})
	}
}

type sqliteBacklogRun struct {
	elapsed, cpu, open time.Duration
	pickups            []time.Duration
	peakRSS            int64
}

// drainSQLiteBacklog opens a client on the copy at path and times the
// drain.
func drainSQLiteBacklog(b *testing.B, path string, drain int) sqliteBacklogRun {
	b.StopTimer()
	defer b.StartTimer()
	ctx := context.Background()
	t0 := time.Now()
	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		b.Fatal(err)
	}
	open := time.Since(t0)
	defer c.Close()
	// The fresh tasks come through the worker's own client, as in an
	// application embedding both (a second client on the file would
	// measure its wait for the write lock, which the busy worker's
	// writer holds nearly all the time, more than the claim).
	sub := c

	var ran atomic.Int64
	opened, done := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	submitted := map[int]time.Time{}
	var pickups []time.Duration
	w := newWorker(b, c, &cairnq.WorkerOptions{Concurrency: 64})
	w.Handle("noop", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var f struct{ I int } // the backlog's payload is {}, the trickle's {"i": i}
		if json.Unmarshal(tc.Payload(), &f) == nil && f.I > 0 {
			now := time.Now()
			mu.Lock()
			if t, ok := submitted[f.I]; ok {
				pickups = append(pickups, now.Sub(t))
				delete(submitted, f.I)
			}
			mu.Unlock()
			return nil, nil
		}
		switch ran.Add(1) {
		case backlogWarm:
			close(opened)
		case int64(backlogWarm + drain):
			close(done)
		}
		return nil, nil
	}, nil)
	runCtx, cancel := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(runCtx) }()
	defer func() {
		cancel()
		<-runDone
	}()
	<-opened
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	b.StartTimer()
	start, cpu0 := time.Now(), processCPU()
	trickleDone := make(chan error, 1)
	go func() {
		for i := 1; ; i++ {
			select {
			case <-done:
				trickleDone <- nil
				return
			case <-time.After(backlogGap/2 + time.Duration(rand.Int64N(int64(backlogGap)+1))):
			}
			mu.Lock()
			submitted[i] = time.Now()
			mu.Unlock()
			if _, err := sub.Submit(ctx, "noop", map[string]int{"i": i}, &cairnq.SubmitOptions{Priority: 1}); err != nil {
				trickleDone <- err
				return
			}
		}
	}()
	<-done
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	b.StopTimer()
	if err := <-trickleDone; err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		left := len(submitted)
		mu.Unlock()
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d fresh tasks did not start within 5s of the window's end", left)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return sqliteBacklogRun{elapsed: elapsed, cpu: cpu, open: open, pickups: pickups, peakRSS: vmHWM()}
}

// claimPlan is SQLite's EXPLAIN QUERY PLAN of the worker's statements
// (the claim for one queue and one name) on the file at path, and the
// file's statistics for cairnq_tasks.
func claimPlan(b *testing.B, path string) []string {
	conn, err := sqlite3.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	var out []string
	collect := func(sql string, cols int) {
		st, _, err := conn.Prepare(sql)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		for st.Step() {
			var f []string
			for i := range cols {
				f = append(f, st.ColumnText(i))
			}
			out = append(out, strings.Join(f, " | "))
		}
		if err := st.Err(); err != nil {
			b.Fatal(err)
		}
	}
	set := protocol.Statements(protocol.SQLite)
	for _, name := range []string{"claim", "complete_many", "recover_leases", "claimable_probe"} {
		out = append(out, name+":")
		collect("EXPLAIN QUERY PLAN "+set.Get(name).Specialize(floorClaimArgs()).SQL, 4)
	}
	collect("SELECT idx, stat FROM sqlite_stat1 WHERE tbl = 'cairnq_tasks'", 2)
	return out
}

// vmHWM is this process's peak RSS in bytes since it was last reset.
func vmHWM() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10
		}
	}
	return 0
}

// TestBacklogFillRows compares the backlog fill's rows with the rows
// Submit writes and a worker's no-op completion leaves, column by column.
func TestBacklogFillRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	real := filepath.Join(dir, "real.db")
	c, err := cairnq.Open(ctx, real, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.Submit(ctx, "noop", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 1})
	w.Handle("noop", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return nil, nil }, nil)
	stop := startWorker(t, w)
	if task := waitTask(t, c, first.ID); task.Status != cairnq.StatusSucceeded {
		t.Fatalf("the first task ended %s", task.Status)
	}
	stop()
	if _, err := c.Submit(ctx, "noop", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	filled := filepath.Join(dir, "filled.db")
	if err := fillSQLiteBacklog(ctx, filled, backlogShape{queued: 3, finished: 2}); err != nil {
		t.Fatal(err)
	}
	want, got := sqliteRowsByStatus(t, real), sqliteRowsByStatus(t, filled)
	if len(got["queued"]) != 3 || len(got["succeeded"]) != 2 || len(want["queued"]) != 1 || len(want["succeeded"]) != 1 {
		t.Fatalf("filled %d queued and %d succeeded, want 3 and 2; Submit and the worker left %d and %d",
			len(got["queued"]), len(got["succeeded"]), len(want["queued"]), len(want["succeeded"]))
	}
	vary := map[string]bool{"id": true, "root_id": true, "run_at_ms": true, "created_at_ms": true, "updated_at_ms": true, "completed_at_ms": true, "worker_id": true}
	for status, rows := range got {
		for _, g := range rows {
			wr := want[status][0]
			for col, wv := range wr {
				gv := g[col]
				switch {
				case (wv == nil) != (gv == nil):
					t.Errorf("%s: %s = %#v, want %#v", status, col, gv, wv)
				case vary[col]:
					if fmt.Sprintf("%T", wv) != fmt.Sprintf("%T", gv) {
						t.Errorf("%s: %s = %#v, want the type of %#v", status, col, gv, wv)
					}
				case wv != gv:
					t.Errorf("%s: %s = %#v, want %#v", status, col, gv, wv)
				}
			}
			if id, _ := g["id"].(string); len(id) != 31 || !strings.HasPrefix(id, "task_") || g["root_id"] != id {
				t.Errorf("%s: id %v, root_id %v", status, g["id"], g["root_id"])
			}
		}
	}
}

// sqliteRowsByStatus reads every task row of the file at path as column
// values (with their SQLite storage classes), grouped by status.
func sqliteRowsByStatus(t *testing.T, path string) map[string][]map[string]any {
	t.Helper()
	conn, err := sqlite3.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, _, err := conn.Prepare("SELECT * FROM cairnq_tasks")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := map[string][]map[string]any{}
	for st.Step() {
		row := map[string]any{}
		for i := range st.ColumnCount() {
			var v any
			switch st.ColumnType(i) {
			case sqlite3.INTEGER:
				v = st.ColumnInt64(i)
			case sqlite3.FLOAT:
				v = st.ColumnFloat(i)
			case sqlite3.TEXT:
				v = st.ColumnText(i)
			case sqlite3.BLOB:
				v = string(st.ColumnBlob(i, nil))
			}
			row[st.ColumnName(i)] = v
		}
		s, _ := row["status"].(string)
		out[s] = append(out[s], row)
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
