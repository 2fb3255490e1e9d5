package cairnq_test

// Fault tests on the embedded SQLite default: a worker process killed
// with SIGKILL in the middle of its work, a submitting process killed the
// same way in the middle of its group commits, poisoned values among good
// ones, and a handler that never returns. Each checks that nothing
// acknowledged is lost, that nothing runs twice beyond what an expired
// lease allows, and that no process panics or hangs. The Postgres
// versions, and a server crash, are in conformance/fault_test.go.
//
// The process tests re-execute this test binary as their child processes,
// as multiprocess_test.go does; environment variables tell a child what
// to be.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/ncruces/go-sqlite3"
)

const (
	faultEnvRole = "CAIRNQ_FAULT_ROLE" // "victim", "survivor" or "submitter"; unset in a normal run
	faultEnvDB   = "CAIRNQ_FAULT_DB"   // the shared database file
	faultEnvOut  = "CAIRNQ_FAULT_OUT"  // the child's own output file
	faultEnvGo   = "CAIRNQ_FAULT_GO"   // a survivor starts its worker once this file exists
	faultEnvStop = "CAIRNQ_FAULT_STOP" // a survivor exits once this file exists
	faultEnvID   = "CAIRNQ_FAULT_ID"   // a worker's id

	faultJob = "fault.job" // what the worker processes run

	// The victim runs faultVictimRuns tasks normally, then holds each of
	// the next faultVictimHeld until it is killed: those are certainly in
	// flight when the kill comes, while its other slots keep claiming and
	// settling.
	faultVictimRuns = 30
	faultVictimHeld = 4
	faultWorkerConc = 8
	// The submitter's goroutines; each has at most one submit in flight.
	faultSubmitters = 32
)

// faultWatchdog bounds every wait of these tests. It detects a hang; it
// is not a claim about speed.
const faultWatchdog = 60 * time.Second

// faultProcs owns a test's child processes: each is killed, if still
// running, when the test ends.
type faultProcs struct {
	t        *testing.T
	dir      string
	env      []string
	children []*mpChild
}

func newFaultProcs(t *testing.T, dir string, env ...string) *faultProcs {
	p := &faultProcs{t: t, dir: dir, env: env}
	t.Cleanup(func() {
		for _, c := range p.children {
			if !c.exited() {
				c.cmd.Process.Kill()
				<-c.done
			}
		}
	})
	return p
}

// spawn starts this test binary as a child in role.
func (p *faultProcs) spawn(name, role string, env ...string) *mpChild {
	p.t.Helper()
	c := &mpChild{name: name, out: filepath.Join(p.dir, name+".out"), done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestFaultChild$", "-test.count=1", "-test.v", "-test.timeout=3m")
	c.cmd.Env = append(os.Environ(), faultEnvRole+"="+role, faultEnvOut+"="+c.out)
	c.cmd.Env = append(append(c.cmd.Env, p.env...), env...)
	c.cmd.Stdout = &c.log
	c.cmd.Stderr = &c.log
	if err := c.cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", name, err)
	}
	p.children = append(p.children, c)
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	return c
}

// kill sends SIGKILL to c and waits for it to be gone.
func (p *faultProcs) kill(c *mpChild) {
	p.t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil && !c.exited() {
		p.t.Fatalf("kill %s: %v", c.name, err)
	}
	<-c.done
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		p.t.Fatalf("%s was not killed by SIGKILL but ended with %v; output:\n%s", c.name, c.err, c.log.String())
	}
}

// fatal ends the test, first making every running child print its
// goroutines (SIGQUIT) and showing what each printed.
func (p *faultProcs) fatal(format string, a ...any) {
	p.t.Helper()
	for _, c := range p.children {
		if !c.exited() {
			c.cmd.Process.Signal(syscall.SIGQUIT)
		}
	}
	grace := time.After(10 * time.Second)
	for _, c := range p.children {
		select {
		case <-c.done:
		case <-grace:
			c.cmd.Process.Kill()
			<-c.done
		}
		p.t.Logf("%s (%v) output:\n%s", c.name, c.err, c.log.String())
	}
	p.t.Fatalf(format, a...)
}

// await polls cond until it holds, checking meanwhile that none of alive
// has exited; past the watchdog it fails the test.
func (p *faultProcs) await(what string, alive []*mpChild, cond func() (bool, error)) {
	p.t.Helper()
	deadline := time.Now().Add(faultWatchdog)
	for {
		ok, err := cond()
		if err != nil {
			p.fatal("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		for _, c := range alive {
			if c.exited() {
				p.fatal("waiting for %s: %s exited: %v", what, c.name, c.err)
			}
		}
		if time.Now().After(deadline) {
			p.fatal("%s: not after %v", what, faultWatchdog)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// faultLines returns the complete lines of a child's output file (a line
// a killed child was writing may be cut short; it is left out).
func faultLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(b), "\n")
	return lines[:len(lines)-1], nil
}

// countLines counts the lines of path that start with prefix.
func countLines(path, prefix string) (int, error) {
	lines, err := faultLines(path)
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n, err
}

// TestFaultKillWorkerSQLite kills one of three worker processes sharing a
// database file with SIGKILL while it runs and settles tasks and holds a
// few it started. The other two finish everything: every task the test
// submitted succeeds, and the only tasks that ran twice are ones the
// killed worker had in flight, which its expired lease released.
func TestFaultKillWorkerSQLite(t *testing.T) {
	if os.Getenv(faultEnvRole) != "" {
		t.Skip("running as a fault child")
	}
	if testing.Short() {
		t.Skip("starts three processes; skipped with -short")
	}
	t.Parallel()
	const n = 400
	ctx := context.Background()
	start := time.Now()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "tasks.db")
	goPath, stopPath := filepath.Join(dir, "go"), filepath.Join(dir, "stop")

	c, err := cairnq.Open(ctx, dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// Every task is acknowledged before a worker starts.
	acked := faultSubmitAll(t, n, func(i int) (*cairnq.Task, error) {
		return c.Submit(ctx, faultJob, map[string]int{"i": i}, nil)
	})

	procs := newFaultProcs(t, dir, faultEnvDB+"="+dbPath, faultEnvGo+"="+goPath, faultEnvStop+"="+stopPath)
	victim := procs.spawn("victim", "victim", faultEnvID+"=fault-victim")
	survivors := []*mpChild{
		procs.spawn("survivor1", "survivor", faultEnvID+"=fault-survivor-1"),
		procs.spawn("survivor2", "survivor", faultEnvID+"=fault-survivor-2"),
	}
	all := append([]*mpChild{victim}, survivors...)
	procs.await("the victim to hold its tasks", all, func() (bool, error) {
		held, err := countLines(victim.out, "hold ")
		return held == faultVictimHeld, err
	})
	if err := os.WriteFile(goPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Kill once the survivors are busy too, or nothing is left to claim.
	procs.await("the survivors to run tasks", all, func() (bool, error) {
		ran := 0
		for _, s := range survivors {
			k, err := countLines(s.out, "run ")
			if err != nil {
				return false, err
			}
			ran += k
		}
		if ran >= 20 {
			return true, nil
		}
		st, err := c.Stats(ctx, cairnq.DefaultQueue)
		return st[cairnq.DefaultQueue].Queued == 0, err
	})
	procs.kill(victim)
	t.Logf("victim killed after %v", time.Since(start).Round(time.Millisecond))

	procs.await("every task to succeed", survivors, func() (bool, error) {
		st, err := c.Stats(ctx, cairnq.DefaultQueue)
		s := st[cairnq.DefaultQueue]
		if s.Failed+s.Canceled > 0 {
			return false, fmt.Errorf("tasks failed or were canceled: %+v", s)
		}
		return s.Succeeded == n, err
	})
	t.Logf("all succeeded after %v", time.Since(start).Round(time.Millisecond))
	if err := os.WriteFile(stopPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	procs.await("the survivors to exit", nil, func() (bool, error) {
		return survivors[0].exited() && survivors[1].exited(), nil
	})
	for _, s := range survivors {
		if s.err != nil {
			t.Errorf("%s failed: %v\n%s", s.name, s.err, s.log.String())
		}
		if b, err := os.ReadFile(s.out + ".errors"); err == nil {
			t.Logf("%s survived:\n%s", s.name, b)
		}
	}

	tasks, err := c.List(ctx, &cairnq.ListOptions{Limit: 2 * n})
	if err != nil {
		t.Fatal(err)
	}
	checkAfterWorkerKill(t, acked, tasks, map[string]string{
		"fault-victim": victim.out, "fault-survivor-1": survivors[0].out, "fault-survivor-2": survivors[1].out,
	}, "fault-victim")
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}

// faultSubmitAll submits n tasks from a few goroutines and returns the
// acknowledged ids, each with its index.
func faultSubmitAll(t *testing.T, n int, submit func(i int) (*cairnq.Task, error)) map[string]int {
	t.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < n; i += 8 {
				task, err := submit(i)
				if err != nil {
					t.Errorf("submit %d: %v", i, err)
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
	acked := make(map[string]int, n)
	for i, id := range ids {
		acked[id] = i
	}
	return acked
}

// checkAfterWorkerKill checks the tasks a worker-kill test left: every
// acknowledged task succeeded with its own result; every execution the
// workers recorded (outs: worker id -> output file) is of an acknowledged
// task; a task ran more than once only when the killed worker ran it
// first (its lease expired: the kill, or a heartbeat it missed), never
// twice on a survivor, and never twice on one attempt (a claim the
// database lost); every task the victim held ran again; and the last
// attempt that ran is the one that settled the task.
func checkAfterWorkerKill(t *testing.T, acked map[string]int, tasks []*cairnq.Task, outs map[string]string, victimID string) {
	t.Helper()
	runs := map[string][]string{}         // task id -> the workers that ran it
	attempts := map[string]map[int]bool{} // task id -> the attempts that ran
	held := map[string]bool{}
	perWorker := map[string]int{}
	var problems []string
	for workerID, path := range outs {
		lines, err := faultLines(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range lines {
			var id string
			var attempt int
			_, runErr := fmt.Sscanf(line, "run %s %d", &id, &attempt)
			switch {
			case strings.HasPrefix(line, "hold "):
				held[strings.TrimPrefix(line, "hold ")] = true
			case runErr == nil:
				runs[id] = append(runs[id], workerID)
				perWorker[workerID]++
				// A run again needs a claim again, which counts an attempt:
				// one attempt running twice is a claim the database lost.
				if attempts[id] == nil {
					attempts[id] = map[int]bool{}
				}
				if attempts[id][attempt] {
					problems = append(problems, fmt.Sprintf("%s: attempt %d ran twice (again on %s)", id, attempt, workerID))
				}
				attempts[id][attempt] = true
			default:
				t.Errorf("%s: malformed line %q", workerID, line)
			}
		}
	}
	var counts []string
	for id := range outs {
		counts = append(counts, fmt.Sprintf("%s=%d", id, perWorker[id]))
	}
	sort.Strings(counts)
	t.Logf("executions per worker: %s", strings.Join(counts, " "))
	if len(held) != faultVictimHeld {
		t.Errorf("the victim held %d tasks, want %d", len(held), faultVictimHeld)
	}

	if len(tasks) != len(acked) {
		t.Errorf("the database holds %d tasks, want the %d submitted", len(tasks), len(acked))
	}
	rerun := 0
	for _, task := range tasks {
		i, ok := acked[task.ID]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: never submitted", task.ID))
			continue
		}
		want := fmt.Sprintf(`{"i":%d}`, i)
		if task.Status != cairnq.StatusSucceeded || !sameJSON(task.Result, want) {
			problems = append(problems, fmt.Sprintf("%s: %s with result %s, want succeeded with %s", task.ID, task.Status, task.Result, want))
		}
		by := runs[task.ID]
		victimRuns, survivorRuns, lastSurvivor := 0, 0, ""
		for _, w := range by {
			if w == victimID {
				victimRuns++
			} else {
				survivorRuns++
				lastSurvivor = w
			}
		}
		switch {
		case len(by) == 0:
			problems = append(problems, fmt.Sprintf("%s: no worker recorded running it", task.ID))
		case survivorRuns > 1:
			problems = append(problems, fmt.Sprintf("%s: ran %d times on surviving workers (%s)", task.ID, survivorRuns, strings.Join(by, ",")))
		case len(by) > 1 && victimRuns == 0:
			problems = append(problems, fmt.Sprintf("%s: ran %d times, none on the killed worker", task.ID, len(by)))
		}
		if len(by) > 1 {
			rerun++
		}
		// The settling worker is the survivor that ran it, if one did.
		switch {
		case survivorRuns == 1 && task.WorkerID != lastSurvivor:
			problems = append(problems, fmt.Sprintf("%s: settled by %q, but %s ran it", task.ID, task.WorkerID, lastSurvivor))
		case survivorRuns == 0 && task.WorkerID != victimID:
			problems = append(problems, fmt.Sprintf("%s: settled by %q, but only %s ran it", task.ID, task.WorkerID, victimID))
		}
		// A held task was in flight at the kill: it ran again (normally on
		// a survivor; on the victim itself if its lease lapsed before the
		// kill and it claimed the task back).
		if held[task.ID] && len(by) < 2 {
			problems = append(problems, fmt.Sprintf("%s: held by the killed worker, and never ran again", task.ID))
		}
		// The attempt that settled it is the last one that ran.
		last := 0
		for a := range attempts[task.ID] {
			last = max(last, a)
		}
		if task.Attempt != last {
			problems = append(problems, fmt.Sprintf("%s: settled on attempt %d, but the last attempt that ran is %d", task.ID, task.Attempt, last))
		}
	}
	for id := range runs {
		if _, ok := acked[id]; !ok {
			problems = append(problems, fmt.Sprintf("%s: ran but was never submitted", id))
		}
	}
	sort.Strings(problems)
	if len(problems) > 20 {
		problems = append(problems[:20], fmt.Sprintf("... %d problems in all", len(problems)))
	}
	if len(problems) > 0 {
		t.Errorf("after the kill:\n%s", strings.Join(problems, "\n"))
	}
	t.Logf("%d tasks ran twice: the killed worker's, released by its expired lease", rerun)
}

// TestFaultKillSubmitterSQLite kills a process with SIGKILL while 32 of
// its goroutines submit, so the kill lands in the middle of the group
// commits its writer runs. Every id the process wrote down after Submit
// returned is in the database; rows it committed without writing down are
// whole tasks too, at most one per goroutine; and a worker afterwards
// runs each of them exactly once.
func TestFaultKillSubmitterSQLite(t *testing.T) {
	if os.Getenv(faultEnvRole) != "" {
		t.Skip("running as a fault child")
	}
	if testing.Short() {
		t.Skip("starts a process; skipped with -short")
	}
	t.Parallel()
	start := time.Now()
	ctx := context.Background()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "tasks.db")
	c, err := cairnq.Open(ctx, dbPath, nil) // migrated before the child opens it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	procs := newFaultProcs(t, dir, faultEnvDB+"="+dbPath)
	sub := procs.spawn("submitter", "submitter")
	procs.await("acknowledged submits", []*mpChild{sub}, func() (bool, error) {
		k, err := countLines(sub.out, "task_")
		return k >= 300, err
	})
	procs.kill(sub)
	t.Logf("submitter killed after %v", time.Since(start).Round(time.Millisecond))
	if b, err := os.ReadFile(sub.out + ".errors"); err == nil {
		t.Errorf("the submitter's submits failed:\n%s", b)
	}

	// The file is whole: the killed writer's transaction rolled back.
	var check string
	db, err := sqlite3.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.BusyTimeout(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	stmt, _, err := db.Prepare("PRAGMA integrity_check")
	if err != nil {
		t.Fatal(err)
	}
	if stmt.Step() {
		check = stmt.ColumnText(0)
	}
	if err := errors.Join(stmt.Err(), stmt.Close(), db.Close()); err != nil {
		t.Fatal(err)
	}
	if check != "ok" {
		t.Errorf("integrity_check after the kill: %s", check)
	}

	// The database takes new writes, then everything runs once.
	for i := range 10 {
		if _, err := c.Submit(ctx, faultJob, map[string]any{"after": i}, nil); err != nil {
			t.Fatalf("submit after the kill: %v", err)
		}
	}
	checkAfterSubmitterKill(t, c, sub.out, 10)
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}

// checkAfterSubmitterKill checks what a submitter-kill test left in c:
// every acknowledged id in outPath is a queued task, the rows nobody
// acknowledged are at most one per submitting goroutine, and a worker
// runs every task (those and extra, submitted since) exactly once.
func checkAfterSubmitterKill(t *testing.T, c *cairnq.Client, outPath string, extra int) {
	t.Helper()
	ctx := context.Background()
	lines, err := faultLines(outPath)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := c.List(ctx, &cairnq.ListOptions{Limit: len(lines) + faultSubmitters + extra + 100})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]*cairnq.Task{}
	for _, task := range tasks {
		rows[task.ID] = task
	}
	acked := map[string]bool{}
	missing := 0
	for _, id := range lines {
		if acked[id] {
			t.Errorf("%s acknowledged twice", id)
		}
		acked[id] = true
		task, ok := rows[id]
		if !ok {
			if missing++; missing <= 20 {
				t.Errorf("acknowledged task %s is not in the database", id)
			}
			continue
		}
		if task.Status != cairnq.StatusQueued || task.Name != faultJob {
			t.Errorf("acknowledged task %s: %s %s, want a queued %s", id, task.Status, task.Name, faultJob)
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged tasks lost", missing, len(lines))
	}
	unacked := len(rows) - len(acked) - extra
	t.Logf("%d submits acknowledged, %d rows committed without an acknowledgement", len(acked), unacked)
	if unacked < 0 || unacked > faultSubmitters {
		t.Errorf("%d rows beyond the acknowledged %d and the %d submitted since; want 0 to %d (one submit in flight per goroutine)",
			unacked, len(acked), extra, faultSubmitters)
	}

	var mu sync.Mutex
	ran := map[string]int{}
	w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 8})
	if err := w.Handle(faultJob, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		mu.Lock()
		ran[tc.ID()]++
		mu.Unlock()
		return nil, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	stop := startWorker(t, w)
	faultWait(t, "every task to succeed", func() (bool, error) {
		st, err := c.Stats(ctx, "")
		s := st[cairnq.DefaultQueue]
		return s.Succeeded == len(rows), err
	})
	stop()
	st, err := c.Stats(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := st[cairnq.DefaultQueue]; got != (cairnq.StatusCounts{Succeeded: len(rows)}) {
		t.Errorf("stats %+v, want %d succeeded", got, len(rows))
	}
	for id := range rows {
		if ran[id] != 1 {
			t.Errorf("%s ran %d times, want once", id, ran[id])
		}
	}
}

// faultWait polls cond until it holds, failing the test past the watchdog.
func faultWait(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(faultWatchdog)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v\n%s", what, faultWatchdog, allGoroutines())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sameJSON reports whether got encodes the same value as want (Postgres
// stores jsonb in its own layout).
func sameJSON(got json.RawMessage, want string) bool {
	var g, w any
	return json.Unmarshal(got, &g) == nil && json.Unmarshal([]byte(want), &w) == nil && reflect.DeepEqual(g, w)
}

func allGoroutines() string {
	buf := make([]byte, 4<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// TestFaultChild is the body of the fault tests' child processes. It does
// nothing unless CAIRNQ_FAULT_ROLE is set.
func TestFaultChild(t *testing.T) {
	role := os.Getenv(faultEnvRole)
	if role == "" {
		t.Skip("the child process of the fault tests")
	}
	c, err := cairnq.Open(context.Background(), os.Getenv(faultEnvDB), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	faultChild(t, c, role)
}

// faultChild plays role on c: "submitter", "victim" or "survivor".
func faultChild(t *testing.T, c *cairnq.Client, role string) {
	outPath := os.Getenv(faultEnvOut)
	out, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var mu sync.Mutex // one whole line per write
	record := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		if _, err := out.WriteString(line + "\n"); err != nil {
			t.Error(err)
		}
	}
	note := func(line string) { mpNote(t, outPath, line) }
	ppid := os.Getppid()
	// orphaned reports whether the parent test is gone: a child then quits.
	orphaned := func() bool { return os.Getppid() != ppid }
	waitFile := func(path string) {
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(path); err == nil {
				return
			}
			if orphaned() || time.Now().After(deadline) {
				t.Fatalf("no %s: the parent is gone", path)
			}
		}
	}

	if role == "submitter" {
		// Submits until killed; an id is written down only once Submit
		// returned it.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var wg sync.WaitGroup
		pad := strings.Repeat("p", 200)
		for g := range faultSubmitters {
			wg.Go(func() {
				for n := 0; ctx.Err() == nil; n++ {
					task, err := c.Submit(ctx, faultJob, map[string]any{"g": g, "n": n, "pad": pad}, nil)
					if err != nil {
						note(fmt.Sprintf("submit g=%d n=%d: %v", g, n, err))
						continue
					}
					record(task.ID)
				}
			})
		}
		for deadline := time.Now().Add(2 * time.Minute); !orphaned() && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		wg.Wait()
		t.Fatal("not killed: the parent is gone")
	}

	id := os.Getenv(faultEnvID)
	opts := &cairnq.WorkerOptions{
		ID: id, Concurrency: faultWorkerConc, PollInterval: 20 * time.Millisecond,
		OnError: func(err error, phase cairnq.ErrorPhase, taskID string) {
			note(fmt.Sprintf("%s: phase %s, task %q: %v%s", id, phase, taskID, err, mpErrDetail(err)))
		},
	}
	// The victim's lease is the shortest allowed, so its tasks come back
	// soon after the kill. The survivors keep the default: under load a
	// short lease can lapse by itself, and a second run of a survivor's
	// task is then a real failure of this test, not a fault it injected.
	victim := role == "victim"
	if victim {
		opts.LeaseDuration = cairnq.MinLeaseDuration
		opts.HeartbeatInterval = 100 * time.Millisecond
	}
	w := newWorker(t, c, opts)
	var started, held atomic.Int32
	if err := w.Handle(faultJob, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		record(fmt.Sprintf("run %s %d", tc.ID(), tc.Attempt()))
		if victim && started.Add(1) > faultVictimRuns && held.Add(1) <= faultVictimHeld {
			record("hold " + tc.ID())
			<-ctx.Done() // long work, until the kill
			return nil, ctx.Err()
		}
		var p struct {
			I int `json:"i"`
		}
		if err := tc.Decode(&p); err != nil {
			return nil, cairnq.Permanent(err)
		}
		time.Sleep(2 * time.Millisecond) // the work
		return p, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if !victim {
		waitFile(os.Getenv(faultEnvGo))
	}
	stop := startWorker(t, w)
	if victim {
		// Runs until killed.
		for deadline := time.Now().Add(2 * time.Minute); !orphaned() && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatal("not killed: the parent is gone")
	}
	waitFile(os.Getenv(faultEnvStop))
	stop()
}

// TestFaultPoisonedValuesSQLite submits good payloads from several
// goroutines with bad values among them; see testPoisonedValues.
func TestFaultPoisonedValuesSQLite(t *testing.T) {
	if os.Getenv(faultEnvRole) != "" {
		t.Skip("running as a fault child")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tasks.db")
	c, err := cairnq.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() }) // a no-op after the close the test checks
	good, bad := testPoisonedValues(t, c)
	// Everything committed is still there for a fresh client.
	c2, err := cairnq.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	st, err := c2.Stats(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := st[cairnq.DefaultQueue]; got != (cairnq.StatusCounts{Succeeded: good, Failed: bad}) {
		t.Errorf("reopened: %+v, want %d succeeded and %d failed", got, good, bad)
	}
}

// The poisoned values, refused by Submit.
func poisonedPayloads() map[string]any {
	return map[string]any{
		// Pre-encoded: encoding/json takes seconds over 40 MB under -race.
		"a 40 MB payload":         json.RawMessage(`{"blob":"` + strings.Repeat("x", 40<<20) + `"}`),
		"a NUL in a Go string":    map[string]string{"s": "a\x00b"},
		`a \u0000 in raw JSON`:    json.RawMessage(`{"s":"a\u0000b"}`),
		"NaN":                     map[string]float64{"x": math.NaN()},
		"a NUL in a nested value": []any{1, map[string]any{"deep": []string{"ok", "bad\x00"}}},
	}
}

// The poisoned results, chosen by a poison.result task's payload.
func poisonedResult(kind string) any {
	switch kind {
	case "nul":
		return map[string]string{"s": "x\x00y"}
	case "raw-nul":
		return json.RawMessage(`{"s":"\u0000"}`)
	case "nan":
		return math.NaN()
	}
	return nil
}

// The kinds of poisoned result. A result over the size limit goes through
// the same check as a payload over it; under -race each 40 MB value costs
// seconds of CPU, so one (the payload) is enough.
var poisonedResultKinds = []string{"nul", "raw-nul", "nan"}

// testPoisonedValues runs a worker on c while eight goroutines submit good
// payloads and others, in the middle of that stream, submit the poisoned
// payloads and good tasks whose handler returns a poisoned result. Each
// poisoned payload fails with a typed error and writes nothing; every
// good submit, before, beside and after them, succeeds, and so does its
// task; a poisoned result fails its task for good as
// unserializable_result. It closes c (which must neither fail nor panic)
// and returns how many tasks succeeded and failed.
func testPoisonedValues(t *testing.T, c *cairnq.Client) (succeeded, failed int) {
	t.Helper()
	ctx := context.Background()
	w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 8})
	if err := w.Handle("poison.good", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return tc.Payload(), nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("poison.result", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var kind string
		if err := tc.Decode(&kind); err != nil {
			return nil, cairnq.Permanent(err)
		}
		return poisonedResult(kind), nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	stop := startWorker(t, w)

	const goodGoroutines, perGoroutine = 8, 10
	var (
		mu        sync.Mutex
		goodIDs   = map[string]string{} // id -> payload
		resultIDs = map[string]string{} // id -> poisoned result kind
		progress  atomic.Int64          // good submits so far
		badDone   = make(chan struct{})
		wg        sync.WaitGroup
	)
	for g := range goodGoroutines {
		wg.Go(func() {
			// Each goroutine keeps going until the bad submits are over (up
			// to a cap, then it waits for them), so good ones run before,
			// beside and after them.
			after := 0 // good submits since the bad ones ended
			for n := 0; n < perGoroutine || after < 5; n++ {
				if n >= 2*perGoroutine && after == 0 {
					<-badDone
				}
				select {
				case <-badDone:
					after++
				default:
				}
				payload := fmt.Sprintf(`{"g":%d,"n":%d}`, g, n)
				task, err := c.Submit(ctx, "poison.good", json.RawMessage(payload), nil)
				if err != nil {
					t.Errorf("good submit g=%d n=%d: %v", g, n, err)
					return
				}
				progress.Add(1)
				mu.Lock()
				goodIDs[task.ID] = payload
				mu.Unlock()
			}
		})
	}
	var badWG sync.WaitGroup
	poisoned := poisonedPayloads()
	for what, payload := range poisoned {
		badWG.Go(func() {
			for progress.Load() < goodGoroutines*perGoroutine/4 {
				time.Sleep(time.Millisecond)
			}
			task, err := c.Submit(ctx, "poison.good", payload, nil)
			var se *cairnq.SerializationError
			switch {
			case err == nil:
				t.Errorf("submit of %s: succeeded (task %s), want a typed error", what, task.ID)
			case !errors.Is(err, cairnq.ErrInvalidArgument) && !errors.As(err, &se):
				t.Errorf("submit of %s: %v (%T), want ErrInvalidArgument or a *SerializationError", what, err, err)
			case task != nil:
				t.Errorf("submit of %s: error %v with a task", what, err)
			}
		})
	}
	for _, kind := range poisonedResultKinds {
		badWG.Go(func() {
			for progress.Load() < goodGoroutines*perGoroutine/4 {
				time.Sleep(time.Millisecond)
			}
			task, err := c.Submit(ctx, "poison.result", kind, &cairnq.SubmitOptions{MaxAttempts: 3})
			if err != nil {
				t.Errorf("submit of a %s-result task: %v", kind, err)
				return
			}
			mu.Lock()
			resultIDs[task.ID] = kind
			mu.Unlock()
		})
	}
	badWG.Wait()
	close(badDone)
	wg.Wait()
	if t.Failed() {
		stop()
		closeNoPanic(t, c)
		t.FailNow()
	}

	for id, kind := range resultIDs {
		task := waitTask(t, c, id)
		if task.Status != cairnq.StatusFailed || task.Error == nil || task.Error.Code != "unserializable_result" ||
			task.Error.Retryable || task.Attempt != 1 || task.Result != nil {
			t.Errorf("task returning a %s result: status %s attempt %d error %+v result %.80s, want failed for good on attempt 1 as unserializable_result",
				kind, task.Status, task.Attempt, task.Error, task.Result)
		}
	}
	for id, payload := range goodIDs {
		task := waitTask(t, c, id)
		if task.Status != cairnq.StatusSucceeded || !sameJSON(task.Result, payload) {
			t.Errorf("good task %s: %s with result %s, want succeeded with %s", id, task.Status, task.Result, payload)
		}
	}
	st, err := c.Stats(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	want := cairnq.StatusCounts{Succeeded: len(goodIDs), Failed: len(resultIDs)}
	if got := st[cairnq.DefaultQueue]; got != want || len(st) != 1 {
		t.Errorf("stats %+v, want only %+v: a poisoned submit wrote a row", st, want)
	}
	t.Logf("%d good submits around %d poisoned payloads and %d poisoned results", len(goodIDs), len(poisoned), len(resultIDs))

	stop()
	closeNoPanic(t, c)
	return len(goodIDs), len(resultIDs)
}

// closeNoPanic closes c, failing t if Close fails or panics.
func closeNoPanic(t *testing.T, c *cairnq.Client) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("Close panicked: %v", p)
		}
	}()
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestFaultHandlerIgnoresContext runs a handler that never returns and
// ignores its context. Run must still return once its context ends, after
// ShutdownTimeout and a short grace, with or without MaxRun, and the
// process must not panic when the handler finally returns; the task is not
// lost: once its lease lapses another worker runs it. With a MaxRun
// shorter than the test, the hung attempt is abandoned at MaxRun as a
// handler_timeout and the task's next attempt succeeds.
func TestFaultHandlerIgnoresContext(t *testing.T) {
	if os.Getenv(faultEnvRole) != "" {
		t.Skip("running as a fault child")
	}
	t.Parallel()
	for _, tc := range []struct {
		name   string
		maxRun time.Duration
	}{
		{"no MaxRun", 0},
		{"MaxRun past the shutdown", time.Hour},
		{"MaxRun hit first", 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testHandlerIgnoresContext(t, openTemp(t, nil), tc.maxRun)
		})
	}
}

// hungHandler is a handler that ignores its context: it returns only when
// the test releases it, then tries to settle its task itself too.
type hungHandler struct {
	release  chan struct{}
	started  chan string // each hung call's task id
	returned sync.WaitGroup
	late     atomic.Value // error: what the late Succeed returned
}

// errLateNoop stands for a nil error from the hung handler's Succeed.
var errLateNoop = errors.New("no error (a no-op)")

func (h *hungHandler) run(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
	h.returned.Add(1)
	defer h.returned.Done()
	h.started <- tc.ID()
	<-h.release // not ctx.Done()
	// The worker gave up on this call long ago: a write now must be
	// refused, not panic, and not touch the task.
	err := tc.Succeed(context.Background(), "late")
	if err == nil {
		err = errLateNoop
	}
	h.late.Store(err)
	return "late", nil
}

func testHandlerIgnoresContext(t *testing.T, c *cairnq.Client, maxRun time.Duration) {
	ctx := context.Background()
	h := &hungHandler{release: make(chan struct{}), started: make(chan string, 4)}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(h.release) }) }
	t.Cleanup(func() { // stop the hung goroutine even when the test fails
		release()
		h.returned.Wait()
	})
	hitFirst := maxRun > 0 && maxRun < time.Minute
	var mu sync.Mutex
	var reported []string
	w := newWorker(t, c, &cairnq.WorkerOptions{
		ID:          "hung-worker",
		Concurrency: 2,
		// A short lease: once Run is gone, another worker gets the task
		// soon after.
		LeaseDuration:   cairnq.MinLeaseDuration,
		ShutdownTimeout: 500 * time.Millisecond,
		MaxRun:          maxRun,
		RetryBackoff:    cairnq.NoRetryBackoff,
		OnError: func(err error, phase cairnq.ErrorPhase, taskID string) {
			mu.Lock()
			reported = append(reported, fmt.Sprintf("%s %s: %v", phase, taskID, err))
			mu.Unlock()
		},
	})
	if err := w.Handle("hang", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		if tc.Attempt() == 1 {
			return h.run(ctx, tc)
		}
		return "second", nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("ok", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return tc.Payload(), nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	hung, err := c.Submit(ctx, "hang", nil, &cairnq.SubmitOptions{MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	runDone := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				runDone <- fmt.Errorf("Run panicked: %v", p)
			}
		}()
		runDone <- w.Run(runCtx)
	}()
	select {
	case id := <-h.started:
		if id != hung.ID {
			t.Fatalf("hung handler got %s, want %s", id, hung.ID)
		}
	case <-time.After(faultWatchdog):
		cancel()
		t.Fatalf("the hung task never started\n%s", allGoroutines())
	}
	// The worker goes on with its other slot meanwhile.
	okTask, err := c.Submit(ctx, "ok", json.RawMessage(`{"ok":1}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := waitTask(t, c, okTask.ID); got.Status != cairnq.StatusSucceeded {
		t.Errorf("a task beside the hung one: %s, want succeeded", got.Status)
	}
	if hitFirst {
		// Abandoned at MaxRun, recorded as a retryable handler_timeout;
		// the second attempt, on the same worker, succeeds.
		got := waitTask(t, c, hung.ID)
		if got.Status != cairnq.StatusSucceeded || string(got.Result) != `"second"` || got.Attempt != 2 ||
			got.Error == nil || got.Error.Code != "handler_timeout" {
			t.Errorf("hung task after MaxRun: %s attempt %d result %s error %+v, want succeeded on attempt 2 after a handler_timeout",
				got.Status, got.Attempt, got.Result, got.Error)
		}
	}

	began := time.Now()
	cancel()
	select {
	case err := <-runDone:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(faultWatchdog):
		t.Fatalf("Run did not return %v after its context ended (ShutdownTimeout 500ms): hung\n%s", faultWatchdog, allGoroutines())
	}
	t.Logf("Run returned %v after its context ended", time.Since(began).Round(time.Millisecond))
	if leaked := workerGoroutines(w); leaked != "" {
		t.Errorf("worker goroutines outlived Run:\n%s", leaked)
	}

	if !hitFirst {
		// Not lost: the lease lapses and another worker runs it.
		w2 := newWorker(t, c, &cairnq.WorkerOptions{ID: "second-worker"})
		if err := w2.Handle("hang", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			return "second", nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		stop2 := startWorker(t, w2)
		got := waitTask(t, c, hung.ID)
		stop2()
		if got.Status != cairnq.StatusSucceeded || string(got.Result) != `"second"` || got.WorkerID != "second-worker" || got.Attempt != 2 {
			t.Errorf("hung task: %s attempt %d by %s with %s, want succeeded on attempt 2 by second-worker", got.Status, got.Attempt, got.WorkerID, got.Result)
		}
	}

	// Now the hung handler returns, and its own late settlement is refused.
	release()
	h.returned.Wait()
	// Refused (ErrLostLease), or a no-op where the worker settled the
	// attempt itself (the handler_timeout): either way nothing is written.
	if err, _ := h.late.Load().(error); err != errLateNoop && !errors.Is(err, cairnq.ErrLostLease) {
		t.Errorf("the abandoned handler's Succeed: %v, want ErrLostLease or a no-op", err)
	} else {
		t.Logf("the abandoned handler's Succeed: %v", err)
	}
	got, err := c.Get(ctx, hung.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != cairnq.StatusSucceeded || string(got.Result) != `"second"` {
		t.Errorf("after the abandoned handler returned: %s with %s, want still succeeded with \"second\"", got.Status, got.Result)
	}
	mu.Lock()
	t.Logf("worker reported: %q", reported)
	mu.Unlock()
}
