package conformance_test

// Fault tests on Postgres, through the pgx adapter: a worker process and a
// submitting process killed with SIGKILL in the middle of their work, a
// server crash and restart (on a private cluster) in the middle of a
// burn-down, and poisoned values among good ones. Each checks that
// nothing acknowledged is lost, that nothing runs twice beyond what an
// expired lease allows, and that no process panics or hangs. The SQLite
// versions are in the root package's fault_test.go; the checks here are
// the same.
//
// The process tests re-execute this test binary as their child processes;
// environment variables tell a child what to be.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
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
	"github.com/cairnq/cairnq-go/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

const (
	pgFaultEnvRole = "CAIRNQ_PGFAULT_ROLE" // "victim", "survivor" or "submitter"; unset in a normal run
	pgFaultEnvDSN  = "CAIRNQ_PGFAULT_DSN"  // the shared database
	pgFaultEnvOut  = "CAIRNQ_PGFAULT_OUT"  // the child's own output file
	pgFaultEnvGo   = "CAIRNQ_PGFAULT_GO"   // a survivor starts its worker once this file exists
	pgFaultEnvStop = "CAIRNQ_PGFAULT_STOP" // a survivor exits once this file exists
	pgFaultEnvID   = "CAIRNQ_PGFAULT_ID"   // a worker's id

	faultJob = "fault.job"

	// The victim runs faultVictimRuns tasks normally, then holds each of
	// the next faultVictimHeld until it is killed: those are certainly in
	// flight when the kill comes, while its other slots keep claiming and
	// settling.
	faultVictimRuns = 30
	faultVictimHeld = 4
	faultWorkerConc = 8
	// The submitter's goroutines; each has at most one submit in flight.
	faultSubmitters = 32

	// faultWatchdog bounds every wait. It detects a hang; it is not a
	// claim about speed.
	faultWatchdog = 60 * time.Second
)

// faultChild is one child process and everything it printed.
type faultChild struct {
	name string
	out  string // its output file
	cmd  *exec.Cmd
	log  bytes.Buffer // stdout and stderr; read only after done
	done chan struct{}
	err  error // Wait's result, set before done closes
}

func (c *faultChild) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// faultProcs owns a test's child processes: each is killed, if still
// running, when the test ends.
type faultProcs struct {
	t        *testing.T
	dir      string
	env      []string
	children []*faultChild
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
func (p *faultProcs) spawn(name, role string, env ...string) *faultChild {
	p.t.Helper()
	c := &faultChild{name: name, out: filepath.Join(p.dir, name+".out"), done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestFaultPostgresChild$", "-test.count=1", "-test.v", "-test.timeout=3m")
	c.cmd.Env = append(os.Environ(), pgFaultEnvRole+"="+role, pgFaultEnvOut+"="+c.out)
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
func (p *faultProcs) kill(c *faultChild) {
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
func (p *faultProcs) await(what string, alive []*faultChild, cond func() (bool, error)) {
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

// withAppName returns dsn with application_name set to name, so the
// sessions of a process using it can be told apart.
func withAppName(dsn, name string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("application_name", name)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " application_name=" + name // keyword/value form: the last one wins
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

// startFaultWorker runs w until the returned stop is called (or the test
// ends), failing the test if Run returns an error or panics.
func startFaultWorker(t testing.TB, w *cairnq.Worker) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("Run panicked: %v", p)
			}
		}()
		done <- w.Run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("worker Run: %v", err)
				}
			case <-time.After(faultWatchdog):
				t.Errorf("worker Run did not return %v after its context ended\n%s", faultWatchdog, allGoroutines())
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func newFaultWorker(t testing.TB, c *cairnq.Client, o *cairnq.WorkerOptions) *cairnq.Worker {
	t.Helper()
	if o.PollInterval == 0 {
		o.PollInterval = 20 * time.Millisecond
	}
	w, err := cairnq.NewWorker(c, o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func waitFaultTask(t testing.TB, c *cairnq.Client, id string) *cairnq.Task {
	t.Helper()
	task, err := c.Wait(context.Background(), id, &cairnq.WaitOptions{Timeout: faultWatchdog, PollInterval: 5 * time.Millisecond, MaxPollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return task
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

// TestFaultPostgresKillWorker kills one of three worker processes sharing
// a database with SIGKILL while it runs and settles tasks and holds a few
// it started. The other two finish everything: every task the test
// submitted succeeds, and the only tasks that ran twice are ones the
// killed worker had in flight, which its expired lease released.
func TestFaultPostgresKillWorker(t *testing.T) {
	if os.Getenv(pgFaultEnvRole) != "" {
		t.Skip("running as a fault child")
	}
	if testing.Short() {
		t.Skip("starts three processes; skipped with -short")
	}
	t.Parallel()
	const n = 400
	ctx := context.Background()
	start := time.Now()
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	goPath, stopPath := filepath.Join(dir, "go"), filepath.Join(dir, "stop")
	c := pgClient(t, dsn, "")
	acked := faultSubmitAll(t, n, func(i int) (*cairnq.Task, error) {
		return c.Submit(ctx, faultJob, map[string]int{"i": i}, nil)
	})

	procs := newFaultProcs(t, dir, pgFaultEnvDSN+"="+dsn, pgFaultEnvGo+"="+goPath, pgFaultEnvStop+"="+stopPath)
	victim := procs.spawn("victim", "victim", pgFaultEnvID+"=fault-victim")
	survivors := []*faultChild{
		procs.spawn("survivor1", "survivor", pgFaultEnvID+"=fault-survivor-1"),
		procs.spawn("survivor2", "survivor", pgFaultEnvID+"=fault-survivor-2"),
	}
	all := append([]*faultChild{victim}, survivors...)
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

// TestFaultPostgresKillSubmitter kills a process with SIGKILL while 32 of
// its goroutines submit, so the kill lands in the middle of the grouped
// inserts its client sends. Every id the process wrote down after Submit
// returned is in the database; rows it committed without writing down are
// whole tasks too, at most one per goroutine; and a worker afterwards
// runs each of them exactly once.
func TestFaultPostgresKillSubmitter(t *testing.T) {
	if os.Getenv(pgFaultEnvRole) != "" {
		t.Skip("running as a fault child")
	}
	if testing.Short() {
		t.Skip("starts a process; skipped with -short")
	}
	t.Parallel()
	start := time.Now()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	c := pgClient(t, dsn, "") // migrated before the child opens it

	procs := newFaultProcs(t, dir, pgFaultEnvDSN+"="+withAppName(dsn, "cairnq-fault-submitter"))
	sub := procs.spawn("submitter", "submitter")
	procs.await("acknowledged submits", []*faultChild{sub}, func() (bool, error) {
		k, err := countLines(sub.out, "task_")
		return k >= 300, err
	})
	procs.kill(sub)
	t.Logf("submitter killed after %v", time.Since(start).Round(time.Millisecond))
	if b, err := os.ReadFile(sub.out + ".errors"); err == nil {
		t.Errorf("the submitter's submits failed:\n%s", b)
	}
	// A statement the killed process sent may still run, and commit, until
	// its session finds the client gone: count rows only once its sessions
	// have ended.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	faultWait(t, "the killed submitter's sessions to end", func() (bool, error) {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'cairnq-fault-submitter'").Scan(&n)
		return n == 0, err
	})
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
	w := newFaultWorker(t, c, &cairnq.WorkerOptions{Concurrency: 8})
	if err := w.Handle(faultJob, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		mu.Lock()
		ran[tc.ID()]++
		mu.Unlock()
		return nil, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	stop := startFaultWorker(t, w)
	faultWait(t, "every task to succeed", func() (bool, error) {
		st, err := c.Stats(ctx, "")
		return st[cairnq.DefaultQueue].Succeeded == len(rows), err
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

// TestFaultPostgresChild is the body of the fault tests' child processes.
// It does nothing unless CAIRNQ_PGFAULT_ROLE is set.
func TestFaultPostgresChild(t *testing.T) {
	role := os.Getenv(pgFaultEnvRole)
	if role == "" {
		t.Skip("the child process of the fault tests")
	}
	c := pgClient(t, os.Getenv(pgFaultEnvDSN), "")
	outPath := os.Getenv(pgFaultEnvOut)
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
	// note appends what the child survived to <out>.errors.
	note := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(outPath+".errors", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			_, err = fmt.Fprintln(f, line)
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			t.Error(err)
		}
	}
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
	untilKilled := func() {
		for deadline := time.Now().Add(2 * time.Minute); !orphaned() && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
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
		untilKilled()
		cancel()
		wg.Wait()
		t.Fatal("not killed: the parent is gone")
	}

	id := os.Getenv(pgFaultEnvID)
	opts := &cairnq.WorkerOptions{
		ID: id, Concurrency: faultWorkerConc,
		OnError: func(err error, phase cairnq.ErrorPhase, taskID string) {
			note(fmt.Sprintf("%s: phase %s, task %q: %v", id, phase, taskID, err))
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
	w := newFaultWorker(t, c, opts)
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
		waitFile(os.Getenv(pgFaultEnvGo))
	}
	stop := startFaultWorker(t, w)
	if victim {
		untilKilled()
		t.Fatal("not killed: the parent is gone")
	}
	waitFile(os.Getenv(pgFaultEnvStop))
	stop()
}

// TestFaultPostgresRestart crashes the server (an immediate shutdown, then
// a start: crash recovery) while a worker in this process burns down a
// queue, with a few of its handlers held across the crash; then crashes
// it again just after the worker claimed a task for every slot. The worker
// carries on without being restarted: every task acknowledged before a
// crash, and every one submitted after, succeeds. A task runs again only
// across a crash (a run in flight when the server went down may have lost
// its lease meanwhile), and only on a new attempt: the same attempt
// running twice is a claim the crash took back after the worker had
// started its handler, which no lease expiry explains.
func TestFaultPostgresRestart(t *testing.T) {
	if os.Getenv(pgFaultEnvRole) != "" {
		t.Skip("running as a fault child")
	}
	if testing.Short() {
		t.Skip("makes a private cluster; skipped with -short")
	}
	t.Parallel()
	const (
		before, after = 300, 50 // tasks submitted before and after the first crash
		normalRuns    = 60      // runs before the handler starts holding
		heldRuns      = 3       // runs held across the first crash
		conc          = 8
		fresh         = "fault.fresh" // the second crash's tasks: one per slot
	)
	start := time.Now()
	ctx := context.Background()
	// The WAL writer flushes an asynchronous commit within its delay (200ms
	// by default); at 10s one stays unflushed until a synchronous commit
	// follows it, so the second crash surely finds any claim that commits
	// asynchronously still unwritten, as an unlucky crash would.
	cl := pgtest.NewCluster(t, "wal_writer_delay = 10s")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", cl.LogTail(40))
		}
	})
	c := pgClient(t, cl.DSN(), "")
	acked := faultSubmitAll(t, before, func(i int) (*cairnq.Task, error) {
		return c.Submit(ctx, faultJob, map[string]int{"i": i}, nil)
	})

	type run struct {
		id      string
		attempt int
		begun   int32 // crashes begun when the run started
		done    int32 // crashes the server had come back from by then
	}
	var (
		mu       sync.Mutex
		runs     []run
		errs     []string
		begun    atomic.Int32
		crashes  atomic.Int32 // done
		started  atomic.Int32
		holding  atomic.Int32
		held     = make(chan string, 64)
		release1 = make(chan struct{}) // ends the holds across the first crash
		release2 = make(chan struct{}) // and the second
		once1    sync.Once
		once2    sync.Once
	)
	release := func(n int) {
		if n == 1 {
			once1.Do(func() { close(release1) })
		} else {
			once2.Do(func() { close(release2) })
		}
	}
	record := func(tc *cairnq.TaskContext) {
		mu.Lock()
		runs = append(runs, run{tc.ID(), tc.Attempt(), begun.Load(), crashes.Load()})
		mu.Unlock()
	}
	hold := func(ctx context.Context, tc *cairnq.TaskContext, release <-chan struct{}) error {
		select {
		case held <- tc.ID():
		default: // more holds than the test waits for: a rerun
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done(): // the lease is lost
			return ctx.Err()
		}
	}
	w := newFaultWorker(t, c, &cairnq.WorkerOptions{
		ID: "restart-worker", Concurrency: conc,
		// Long enough that heartbeats (every second) keep every lease
		// through a short outage, short enough that a claim whose reply the
		// crash swallowed comes back soon.
		LeaseDuration:   3 * time.Second,
		ShutdownTimeout: 2 * time.Second,
		OnError: func(err error, phase cairnq.ErrorPhase, taskID string) {
			mu.Lock()
			errs = append(errs, fmt.Sprintf("%s %s: %v", phase, taskID, err))
			mu.Unlock()
		},
	})
	if err := w.Handle(faultJob, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		record(tc)
		if started.Add(1) > normalRuns && holding.Add(1) <= heldRuns {
			if err := hold(ctx, tc, release1); err != nil {
				return nil, err
			}
		}
		time.Sleep(2 * time.Millisecond) // the work
		return tc.Payload(), nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle(fresh, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		record(tc)
		if crashes.Load() < 2 {
			if err := hold(ctx, tc, release2); err != nil {
				return nil, err
			}
		}
		return tc.Payload(), nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	stop := startFaultWorker(t, w)
	t.Cleanup(func() { release(1); release(2) }) // before the worker stops, should the test fail first
	awaitHeld := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-held:
			case <-time.After(faultWatchdog):
				t.Fatalf("the held runs did not start\n%s", allGoroutines())
			}
		}
	}
	crash := func() {
		t.Helper()
		at := time.Now()
		begun.Add(1)
		rctx, cancel := context.WithTimeout(ctx, faultWatchdog)
		defer cancel()
		if err := cl.RestartImmediate(rctx); err != nil {
			t.Fatal(err)
		}
		crashes.Add(1)
		t.Logf("crash %d: the server was back after %v (test at %v)", crashes.Load(),
			time.Since(at).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	}
	// submit retries a submit the crash failed, under its key, which makes
	// the retry safe.
	retries := 0
	submit := func(name, key string, i int, delay time.Duration) {
		t.Helper()
		for {
			task, err := c.Submit(ctx, name, map[string]int{"i": i}, &cairnq.SubmitOptions{Key: key, Delay: delay})
			if err == nil {
				acked[task.ID] = i
				return
			}
			if retries++; retries > 100 {
				t.Fatalf("submit after a crash: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	drained := func(want int) {
		t.Helper()
		faultWait(t, "every task to succeed", func() (bool, error) {
			st, err := c.Stats(ctx, cairnq.DefaultQueue)
			if err != nil {
				return false, nil // a read on a connection the crash broke
			}
			s := st[cairnq.DefaultQueue]
			if s.Failed+s.Canceled > 0 {
				return false, fmt.Errorf("tasks failed or were canceled: %+v", s)
			}
			return s.Succeeded == want, nil
		})
	}

	// The first crash, in the middle of the burn-down.
	awaitHeld(heldRuns)
	crash()
	release(1)
	for i := range after {
		submit(faultJob, fmt.Sprintf("after-%d", i), before+i, 0)
	}
	drained(before + after)
	t.Logf("burn-down done after %v", time.Since(start).Round(time.Millisecond))

	// The second crash, right after the worker claimed a task for every
	// slot: no settlement commits between the claim and the crash, and
	// only a heartbeat could. The delay makes the claims come after every
	// submit committed.
	for i := range conc {
		submit(fresh, fmt.Sprintf("fresh-%d", i), before+after+i, 300*time.Millisecond)
	}
	awaitHeld(conc)
	crash()
	release(2)
	drained(before + after + conc)
	stop()
	t.Logf("all done after %v; %d submits retried after a crash", time.Since(start).Round(time.Millisecond), retries)

	tasks, err := c.List(ctx, &cairnq.ListOptions{Limit: 2 * len(acked)})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != len(acked) {
		t.Errorf("the database holds %d tasks, want %d", len(tasks), len(acked))
	}
	for _, task := range tasks {
		i, ok := acked[task.ID]
		want := fmt.Sprintf(`{"i":%d}`, i)
		if !ok || task.Status != cairnq.StatusSucceeded || !sameJSON(task.Result, want) {
			t.Errorf("task %s (submitted: %v): %s with %s, want succeeded with %s", task.ID, ok, task.Status, task.Result, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	byTask := map[string][]run{} // in the order the runs started
	for _, r := range runs {
		byTask[r.id] = append(byTask[r.id], r)
	}
	var lostClaims, problems []string
	twice := 0
	for id := range acked {
		rs := byTask[id]
		if len(rs) == 0 {
			problems = append(problems, id+": never ran")
		}
		if len(rs) > 1 {
			twice++
		}
		seen := map[int]bool{}
		for k, r := range rs {
			if seen[r.attempt] {
				lostClaims = append(lostClaims, fmt.Sprintf("%s: attempt %d ran again after crash %d", id, r.attempt, r.begun))
			}
			seen[r.attempt] = true
			// A crash lies between the runs: it was not over when the
			// previous run started, and had begun when this one started.
			if k > 0 && r.begun <= rs[k-1].done {
				problems = append(problems, fmt.Sprintf("%s: ran again (attempt %d) with no crash since its previous run", id, r.attempt))
			}
		}
	}
	sort.Strings(lostClaims)
	sort.Strings(problems)
	if len(lostClaims) > 0 {
		t.Errorf("%d runs repeated an attempt that had already run: a crash took back a claim after the worker had "+
			"started its handler (a claim must be durable before its handler starts):\n%s", len(lostClaims), strings.Join(lostClaims, "\n"))
	}
	if len(problems) > 0 {
		t.Errorf("%d problems:\n%s", len(problems), strings.Join(problems, "\n"))
	}
	t.Logf("%d tasks ran twice across a crash; the worker survived %d errors, the first: %.300q", twice, len(errs), append(errs, "")[0])
}

// TestFaultPostgresPoisonedValues submits good payloads from several
// goroutines with bad values among them; see testPoisonedValues.
func TestFaultPostgresPoisonedValues(t *testing.T) {
	if os.Getenv(pgFaultEnvRole) != "" {
		t.Skip("running as a fault child")
	}
	t.Parallel()
	dsn := pgtest.DSN(t)
	good, bad := testPoisonedValues(t, pgClient(t, dsn, ""))
	// Everything committed is there for a fresh client.
	st, err := pgClient(t, dsn, "").Stats(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := st[cairnq.DefaultQueue]; got != (cairnq.StatusCounts{Succeeded: good, Failed: bad}) {
		t.Errorf("fresh client: %+v, want %d succeeded and %d failed", got, good, bad)
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
	w := newFaultWorker(t, c, &cairnq.WorkerOptions{Concurrency: 8})
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
	stop := startFaultWorker(t, w)

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
		task := waitFaultTask(t, c, id)
		if task.Status != cairnq.StatusFailed || task.Error == nil || task.Error.Code != "unserializable_result" ||
			task.Error.Retryable || task.Attempt != 1 || task.Result != nil {
			t.Errorf("task returning a %s result: status %s attempt %d error %+v result %.80s, want failed for good on attempt 1 as unserializable_result",
				kind, task.Status, task.Attempt, task.Error, task.Result)
		}
	}
	for id, payload := range goodIDs {
		task := waitFaultTask(t, c, id)
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
