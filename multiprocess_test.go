package cairnq_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/ncruces/go-sqlite3"
)

// The multi-process test re-executes this test binary as its child
// processes; these variables tell a child what to be.
const (
	mpEnvRole = "CAIRNQ_MP_ROLE" // "worker" or "submitter"; unset in a normal run
	mpEnvDB   = "CAIRNQ_MP_DB"   // the shared database file
	mpEnvOut  = "CAIRNQ_MP_OUT"  // this child's own output file
	mpEnvStop = "CAIRNQ_MP_STOP" // a worker exits once this file exists
	mpEnvID   = "CAIRNQ_MP_ID"   // a worker's id
	mpEnvN    = "CAIRNQ_MP_N"    // how many tasks the submitter submits

	mpTaskName = "mp.job"
	mpTasks    = 2000
	mpWorkers  = 3
)

// mpChild is one child process and everything it printed.
type mpChild struct {
	name string
	out  string // its output file
	cmd  *exec.Cmd
	log  bytes.Buffer // stdout and stderr; read only after done
	done chan struct{}
	err  error // Wait's result, set before done closes
}

// exited reports whether the child has exited, without blocking.
func (c *mpChild) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// TestMultiProcess runs three worker processes and one submitter process on
// one database file, coordinating only through SQLite as in production, and
// checks that each of 2,000 tasks ran exactly once and succeeded on its
// first attempt.
func TestMultiProcess(t *testing.T) {
	if os.Getenv(mpEnvRole) != "" {
		t.Skip("running as a multi-process child")
	}
	if testing.Short() {
		t.Skip("starts four processes; skipped with -short")
	}
	start := time.Now()
	dir := t.TempDir() // before the kill cleanup below, so it is removed after
	dbPath := filepath.Join(dir, "tasks.db")
	stopPath := filepath.Join(dir, "stop")

	var children []*mpChild
	t.Cleanup(func() {
		for _, c := range children {
			if !c.exited() {
				c.cmd.Process.Kill()
				<-c.done
			}
		}
	})
	spawn := func(name, role string, env ...string) *mpChild {
		t.Helper()
		c := &mpChild{name: name, out: filepath.Join(dir, name+".out"), done: make(chan struct{})}
		c.cmd = exec.Command(os.Args[0], "-test.run=^TestMultiProcessHelper$", "-test.count=1", "-test.v", "-test.timeout=3m")
		c.cmd.Env = append(os.Environ(),
			mpEnvRole+"="+role, mpEnvDB+"="+dbPath, mpEnvOut+"="+c.out, mpEnvStop+"="+stopPath)
		c.cmd.Env = append(c.cmd.Env, env...)
		c.cmd.Stdout = &c.log // the same writer for both: one pipe, one copier
		c.cmd.Stderr = &c.log
		if err := c.cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		children = append(children, c)
		go func() {
			c.err = c.cmd.Wait()
			close(c.done)
		}()
		return c
	}
	// All four start together on a file that does not exist yet: whoever
	// opens first creates it, the rest race it through the migration.
	var workers []*mpChild
	for i := range mpWorkers {
		workers = append(workers, spawn(fmt.Sprintf("worker%d", i+1), "worker", mpEnvID+"="+fmt.Sprintf("mp-worker-%d", i+1)))
	}
	submitter := spawn("submitter", "submitter", mpEnvN+"="+strconv.Itoa(mpTasks))
	// stopAll ends every child still running, so their output can be read.
	// With dump it first asks them to quit, which makes each print every
	// goroutine's stack (the thing to read when something hangs).
	stopAll := func(dump bool) {
		for _, c := range children {
			if c.exited() {
				continue
			}
			if !dump || c.cmd.Process.Signal(syscall.SIGQUIT) != nil {
				c.cmd.Process.Kill()
			}
		}
		grace := time.After(10 * time.Second)
		for _, c := range children {
			select {
			case <-c.done:
			case <-grace:
				c.cmd.Process.Kill()
				<-c.done
			}
		}
	}
	// abort ends the test after a timeout or an early exit, showing what
	// every child that did not succeed printed.
	abort := func(dump bool, format string, a ...any) {
		t.Helper()
		stopAll(dump)
		for _, c := range children {
			if c.err != nil {
				t.Logf("%s (%v) output:\n%s", c.name, c.err, c.log.String())
			}
		}
		t.Fatalf(format, a...)
	}
	// checkWorkers aborts if a worker exited before being told to.
	checkWorkers := func() {
		t.Helper()
		for _, w := range workers {
			if w.exited() {
				abort(false, "%s exited before the stop file: %v", w.name, w.err)
			}
		}
	}

	// The submitter must finish on its own.
	submitDeadline := time.After(90 * time.Second)
	for waiting := true; waiting; {
		select {
		case <-submitter.done:
			waiting = false
		case <-submitDeadline:
			abort(true, "the submitter did not finish within 90s")
		case <-time.After(5 * time.Millisecond):
			checkWorkers()
		}
	}
	if submitter.err != nil {
		abort(false, "the submitter failed: %v", submitter.err)
	}
	submitted := readSubmitted(t, submitter.out)
	if len(submitted) != mpTasks {
		abort(false, "submitter recorded %d distinct task ids, want %d", len(submitted), mpTasks)
	}
	t.Logf("submitter done after %v", time.Since(start).Round(time.Millisecond))

	// Wait for the queue to drain, from the parent's own connection.
	ctx := context.Background()
	c, err := cairnq.Open(ctx, dbPath, nil)
	if err != nil {
		abort(false, "parent open: %v", err)
	}
	defer c.Close()
	drainDeadline := time.Now().Add(120 * time.Second)
	var last cairnq.StatusCounts
	for {
		stats, err := c.Stats(ctx, cairnq.DefaultQueue)
		if err != nil {
			abort(false, "stats: %v", err)
		}
		last = stats[cairnq.DefaultQueue]
		if last.Succeeded+last.Failed+last.Canceled >= mpTasks && last.Queued == 0 && last.Running == 0 {
			break
		}
		checkWorkers()
		if time.Now().After(drainDeadline) {
			abort(true, "queue not drained after 120s: %+v", last)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if last != (cairnq.StatusCounts{Succeeded: mpTasks}) {
		t.Errorf("final stats %+v, want %d succeeded and nothing else", last, mpTasks)
	}
	t.Logf("queue drained after %v", time.Since(start).Round(time.Millisecond))

	// Tell the workers to stop; each drains and exits 0.
	if err := os.WriteFile(stopPath, nil, 0o644); err != nil {
		abort(false, "%v", err)
	}
	exitDeadline := time.After(30 * time.Second)
	for _, w := range workers {
		select {
		case <-w.done:
		case <-exitDeadline:
			abort(true, "%s did not exit within 30s of the stop file", w.name)
		}
	}
	// A worker that failed after the stop file still recorded everything it
	// ran, so the checks below go on: they say what its failure cost.
	for _, w := range workers {
		if w.err != nil {
			t.Errorf("%s failed: %v", w.name, w.err)
			t.Logf("%s output:\n%s", w.name, w.log.String())
		}
	}

	// What the children survived: busy claims and retried submits are
	// not failures, but worth seeing.
	for _, ch := range children {
		b, err := os.ReadFile(ch.out + ".errors")
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		t.Logf("%s survived %d error(s), the first: %s", ch.name, len(lines), lines[0])
	}

	// Every execution the workers recorded: task id -> the processes that
	// ran it, and the worker id it ran under.
	ranBy := map[string][]string{}
	ranAs := map[string]string{}
	perProcess := map[string]int{}
	for _, w := range workers {
		f, err := os.Open(w.out)
		if errors.Is(err, os.ErrNotExist) {
			continue // this worker ran nothing
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			id, workerID, ok := strings.Cut(sc.Text(), " ")
			if !ok {
				t.Errorf("%s: malformed line %q", w.name, sc.Text())
				continue
			}
			ranBy[id] = append(ranBy[id], w.name)
			ranAs[id] = workerID
			perProcess[w.name]++
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	var counts []string
	busy := 0
	for _, w := range workers {
		counts = append(counts, fmt.Sprintf("%s=%d", w.name, perProcess[w.name]))
		if perProcess[w.name] > 0 {
			busy++
		}
	}
	t.Logf("executions per process: %s (total %d)", strings.Join(counts, " "), len(ranBy))

	var dups, missing, unknown []string
	for id, by := range ranBy {
		if len(by) != 1 {
			dups = append(dups, fmt.Sprintf("%s ran %d times (%s)", id, len(by), strings.Join(by, ",")))
		}
		if _, ok := submitted[id]; !ok {
			unknown = append(unknown, id)
		}
	}
	for id, n := range submitted {
		if _, ok := ranBy[id]; !ok {
			missing = append(missing, fmt.Sprintf("%s (i=%d)", id, n))
		}
	}
	sort.Strings(dups)
	sort.Strings(missing)
	sort.Strings(unknown)
	if len(ranBy) != mpTasks {
		t.Errorf("%d distinct tasks executed, want %d", len(ranBy), mpTasks)
	}
	if len(dups) > 0 {
		t.Errorf("%d tasks executed more than once:\n%s", len(dups), strings.Join(dups, "\n"))
	}
	if len(missing) > 0 {
		t.Errorf("%d submitted tasks never executed:\n%s", len(missing), strings.Join(missing, "\n"))
	}
	if len(unknown) > 0 {
		t.Errorf("%d executed tasks were never submitted:\n%s", len(unknown), strings.Join(unknown, "\n"))
	}
	if busy < 2 {
		t.Errorf("only %d worker process(es) ran tasks; want the work spread over more than one", busy)
	}

	// The database agrees: every row succeeded on its first attempt, by the
	// worker that recorded it, with the result its handler returned.
	tasks, err := c.List(ctx, &cairnq.ListOptions{Limit: 2 * mpTasks})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != mpTasks {
		t.Errorf("database holds %d tasks, want %d", len(tasks), mpTasks)
	}
	bad := 0
	for _, task := range tasks {
		n, ok := submitted[task.ID]
		want := fmt.Sprintf(`{"i":%d}`, n)
		if !ok || task.Status != cairnq.StatusSucceeded || task.Attempt != 1 || task.Name != mpTaskName ||
			string(task.Payload) != want || string(task.Result) != want || task.WorkerID != ranAs[task.ID] {
			if bad++; bad <= 20 {
				t.Errorf("task %s: status %s attempt %d name %s payload %s result %s worker %q (recorded %q)",
					task.ID, task.Status, task.Attempt, task.Name, task.Payload, task.Result, task.WorkerID, ranAs[task.ID])
			}
		}
	}
	if bad > 20 {
		t.Errorf("... %d bad tasks in all", bad)
	}
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}

// readSubmitted reads the submitter's output: "<task id> <n>" per task,
// then "done".
func readSubmitted(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) == 0 || lines[len(lines)-1] != "done" {
		t.Fatalf("submitter output does not end with done")
	}
	out := map[string]int{}
	for _, line := range lines[:len(lines)-1] {
		id, ns, ok := strings.Cut(line, " ")
		n, err := strconv.Atoi(ns)
		if !ok || err != nil {
			t.Fatalf("submitter output: malformed line %q", line)
		}
		if prev, dup := out[id]; dup {
			t.Errorf("submits %d and %d returned the same task %s", prev, n, id)
		}
		out[id] = n
	}
	return out
}

// TestMultiProcessHelper is the body of TestMultiProcess's child processes.
// It does nothing unless CAIRNQ_MP_ROLE is set.
func TestMultiProcessHelper(t *testing.T) {
	role := os.Getenv(mpEnvRole)
	if role == "" {
		return // not a child: TestMultiProcess starts this
	}
	dbPath, outPath := os.Getenv(mpEnvDB), os.Getenv(mpEnvOut)
	ctx := context.Background()
	c, err := cairnq.Open(ctx, dbPath, nil)
	if err != nil {
		t.Fatalf("open %s: %v", dbPath, err)
	}
	// A cleanup, not a defer: it must run after startWorker's, which stops
	// the worker even when the test fails early.
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	switch role {
	case "submitter":
		mpSubmit(t, c, outPath)
	case "worker":
		mpWork(t, c, outPath, os.Getenv(mpEnvStop), os.Getenv(mpEnvID))
	default:
		t.Fatalf("unknown role %q", role)
	}
}

func mpSubmit(t *testing.T, c *cairnq.Client, outPath string) {
	n, err := strconv.Atoi(os.Getenv(mpEnvN))
	if err != nil {
		t.Fatal(err)
	}
	// A few goroutines submit side by side, as an API process would; the
	// store batches their concurrent writes into shared transactions.
	const submitters = 8
	ids := make([]string, n)
	var wg sync.WaitGroup
	for g := range submitters {
		wg.Go(func() {
			for i := g; i < n; i += submitters {
				// The key makes a retry safe: it returns the task a write
				// that did land made, never a second one.
				var task *cairnq.Task
				var err error
				for try := 1; ; try++ {
					task, err = c.Submit(context.Background(), mpTaskName, map[string]int{"i": i},
						&cairnq.SubmitOptions{Key: fmt.Sprintf("mp-%d", i)})
					if !errors.Is(err, cairnq.ErrBusy) || try == 10 {
						break
					}
					mpNote(t, outPath, fmt.Sprintf("submit %d, try %d: %v%s", i, try, err, mpErrDetail(err)))
				}
				if err != nil {
					t.Errorf("submit %d: %v%s", i, err, mpErrDetail(err))
					return
				}
				ids[i] = task.ID
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	var out bytes.Buffer
	for i, id := range ids {
		fmt.Fprintf(&out, "%s %d\n", id, i)
	}
	out.WriteString("done\n")
	if err := os.WriteFile(outPath, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mpWork(t *testing.T, c *cairnq.Client, outPath, stopPath, id string) {
	f, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mu sync.Mutex                  // one line per write, whole
	returned := map[string]time.Time{} // task id -> when its handler returned; under mu
	w := newWorker(t, c, &cairnq.WorkerOptions{
		ID:          id,
		Concurrency: 8,
		// Everything the worker survives is written down for the parent
		// to log.
		OnError: func(err error, phase cairnq.ErrorPhase, taskID string) {
			detail := mpErrDetail(err)
			mu.Lock()
			at, ok := returned[taskID]
			mu.Unlock()
			if ok {
				detail += fmt.Sprintf(" [%v after its handler returned]", time.Since(at).Round(time.Millisecond))
			}
			msg := fmt.Sprintf("%s: worker error (phase %s, task %q) at %s: %v%s",
				id, phase, taskID, time.Now().Format("15:04:05.000"), err, detail)
			mpNote(t, outPath, msg)
			// A busy claim costs nothing: the worker polls again. Anything
			// else, above all a settlement lost to a busy database, is a
			// failure: that task runs again once its lease runs out.
			if phase != cairnq.PhaseClaim || !errors.Is(err, cairnq.ErrBusy) {
				t.Error(msg)
			}
		},
	})
	if err := w.Handle(mpTaskName, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var p struct{ I int }
		if err := tc.Decode(&p); err != nil {
			return nil, err
		}
		mu.Lock()
		_, err := fmt.Fprintf(f, "%s %s\n", tc.ID(), tc.WorkerID()) // cannot panic
		mu.Unlock()
		if err != nil {
			t.Errorf("record %s: %v", tc.ID(), err)
			return nil, err
		}
		mu.Lock()
		returned[tc.ID()] = time.Now()
		mu.Unlock()
		return map[string]int{"i": p.I}, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	stop := startWorker(t, w)
	// An orphan (the parent killed or gone) gives up eventually.
	deadline := time.Now().Add(150 * time.Second)
	for {
		if _, err := os.Stat(stopPath); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no stop file after 150s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop() // cancels Run and waits for it to drain
}

// mpNote appends an error a child survived to <out>.errors, which the
// parent logs. It is rare, so each note opens the file afresh.
func mpNote(t *testing.T, outPath, line string) {
	f, err := os.OpenFile(outPath+".errors", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, line); err != nil {
		t.Error(err)
	}
}

// mpErrDetail names the SQLite result code behind err, if any.
func mpErrDetail(err error) string {
	var xc sqlite3.ExtendedErrorCode
	if errors.As(err, &xc) {
		return fmt.Sprintf(" [sqlite result code %d]", xc)
	}
	return ""
}
