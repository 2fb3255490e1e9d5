package faulttest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// KillWorker kills one of three worker processes sharing a database with
// SIGKILL while it runs and settles tasks and holds a few it started. The
// other two finish everything: every task the test submitted succeeds,
// and the only tasks that ran twice are ones the killed worker had in
// flight, which its expired lease released. It skips with -short.
func KillWorker(t *testing.T, b Backend) {
	SkipInChild(t)
	if testing.Short() {
		t.Skip("starts three processes; skipped with -short")
	}
	t.Parallel()
	const n = 400
	ctx := context.Background()
	start := time.Now()
	dsn := b.NewDB(t)
	dir := t.TempDir()
	goPath, stopPath := filepath.Join(dir, "go"), filepath.Join(dir, "stop")
	c := b.Open(t, dsn)
	// Every task is acknowledged before a worker starts.
	acked := SubmitAll(t, n, func(i int) (*cairnq.Task, error) {
		return c.Submit(ctx, Job, map[string]int{"i": i}, nil)
	})

	procs := newProcs(t, b, dir, envDSN+"="+dsn, envGo+"="+goPath, envStop+"="+stopPath)
	victim := procs.spawn("victim", roleVictim, envID+"=fault-victim")
	survivors := []*proc{
		procs.spawn("survivor1", roleSurvivor, envID+"=fault-survivor-1"),
		procs.spawn("survivor2", roleSurvivor, envID+"=fault-survivor-2"),
	}
	all := append([]*proc{victim}, survivors...)
	procs.await("the victim to hold its tasks", all, func() (bool, error) {
		held, err := countLines(victim.out, "hold ")
		return held == victimHeld, err
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
		if notes, err := os.ReadFile(s.out + ".errors"); err == nil {
			t.Logf("%s survived:\n%s", s.name, notes)
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

// SubmitAll submits n tasks from a few goroutines and returns the
// acknowledged ids, each with its index: a backlog that is all committed
// before the fault comes, so the checks after it know what must be there.
func SubmitAll(t *testing.T, n int, submit func(i int) (*cairnq.Task, error)) map[string]int {
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
	ran, problems := readWorkerRuns(t, outs)
	var counts []string
	for id := range outs {
		counts = append(counts, fmt.Sprintf("%s=%d", id, ran.perWorker[id]))
	}
	sort.Strings(counts)
	t.Logf("executions per worker: %s", strings.Join(counts, " "))
	if len(ran.held) != victimHeld {
		t.Errorf("the victim held %d tasks, want %d", len(ran.held), victimHeld)
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
		problems = append(problems, taskProblemsAfterKill(task, i, ran, victimID)...)
		if len(ran.runs[task.ID]) > 1 {
			rerun++
		}
	}
	for id := range ran.runs {
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

// workerRuns is what the workers of a worker-kill test wrote down.
type workerRuns struct {
	runs      map[string][]string     // task id -> the workers that ran it
	attempts  map[string]map[int]bool // task id -> the attempts that ran
	held      map[string]bool         // the tasks the victim held
	perWorker map[string]int          // worker id -> its executions
}

// readWorkerRuns reads the output files of a worker-kill test (outs:
// worker id -> output file). It returns what they hold, and a problem for
// each attempt that ran twice.
func readWorkerRuns(t *testing.T, outs map[string]string) (ran workerRuns, problems []string) {
	t.Helper()
	ran = workerRuns{
		runs:      map[string][]string{},
		attempts:  map[string]map[int]bool{},
		held:      map[string]bool{},
		perWorker: map[string]int{},
	}
	for workerID, path := range outs {
		lines, err := readLines(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range lines {
			var id string
			var attempt int
			_, runErr := fmt.Sscanf(line, "run %s %d", &id, &attempt)
			switch {
			case strings.HasPrefix(line, "hold "):
				ran.held[strings.TrimPrefix(line, "hold ")] = true
			case runErr == nil:
				ran.runs[id] = append(ran.runs[id], workerID)
				ran.perWorker[workerID]++
				// A run again needs a claim again, which counts an attempt:
				// one attempt running twice is a claim the database lost.
				if ran.attempts[id] == nil {
					ran.attempts[id] = map[int]bool{}
				}
				if ran.attempts[id][attempt] {
					problems = append(problems, fmt.Sprintf("%s: attempt %d ran twice (again on %s)", id, attempt, workerID))
				}
				ran.attempts[id][attempt] = true
			default:
				t.Errorf("%s: malformed line %q", workerID, line)
			}
		}
	}
	return ran, problems
}

// taskProblemsAfterKill checks one acknowledged task, submitted with
// index i, against what the workers ran, and returns what is wrong with
// it.
func taskProblemsAfterKill(task *cairnq.Task, i int, ran workerRuns, victimID string) []string {
	var problems []string
	want := fmt.Sprintf(`{"i":%d}`, i)
	if task.Status != cairnq.StatusSucceeded || !SameJSON(task.Result, want) {
		problems = append(problems, fmt.Sprintf("%s: %s with result %s, want succeeded with %s", task.ID, task.Status, task.Result, want))
	}
	by := ran.runs[task.ID]
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
	if ran.held[task.ID] && len(by) < 2 {
		problems = append(problems, fmt.Sprintf("%s: held by the killed worker, and never ran again", task.ID))
	}
	// The attempt that settled it is the last one that ran.
	last := 0
	for a := range ran.attempts[task.ID] {
		last = max(last, a)
	}
	if task.Attempt != last {
		problems = append(problems, fmt.Sprintf("%s: settled on attempt %d, but the last attempt that ran is %d", task.ID, task.Attempt, last))
	}
	return problems
}

// KillSubmitter kills a process with SIGKILL while 32 of its goroutines
// submit, so the kill lands in the middle of the writes its client
// sends. Every id the process wrote down after Submit returned is in the
// database; rows it committed without writing down are whole tasks too,
// at most one per goroutine; and a worker afterwards runs each of them
// exactly once. It skips with -short.
func KillSubmitter(t *testing.T, b Backend) {
	SkipInChild(t)
	if testing.Short() {
		t.Skip("starts a process; skipped with -short")
	}
	t.Parallel()
	start := time.Now()
	ctx := context.Background()
	dsn := b.NewDB(t)
	dir := t.TempDir()
	c := b.Open(t, dsn) // migrated before the child opens it

	subDSN := dsn
	if b.SubmitterDSN != nil {
		subDSN = b.SubmitterDSN(dsn)
	}
	procs := newProcs(t, b, dir, envDSN+"="+subDSN)
	sub := procs.spawn("submitter", roleSubmitter)
	procs.await("acknowledged submits", []*proc{sub}, func() (bool, error) {
		k, err := countLines(sub.out, "task_")
		return k >= 300, err
	})
	procs.kill(sub)
	t.Logf("submitter killed after %v", time.Since(start).Round(time.Millisecond))
	if notes, err := os.ReadFile(sub.out + ".errors"); err == nil {
		t.Errorf("the submitter's submits failed:\n%s", notes)
	}
	if b.AfterSubmitterKill != nil {
		b.AfterSubmitterKill(t, dsn)
	}

	// The database takes new writes, then everything runs once.
	for i := range 10 {
		if _, err := c.Submit(ctx, Job, map[string]any{"after": i}, nil); err != nil {
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
	lines, err := readLines(outPath)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := c.List(ctx, &cairnq.ListOptions{Limit: len(lines) + submitters + extra + 100})
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
		if task.Status != cairnq.StatusQueued || task.Name != Job {
			t.Errorf("acknowledged task %s: %s %s, want a queued %s", id, task.Status, task.Name, Job)
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged tasks lost", missing, len(lines))
	}
	unacked := len(rows) - len(acked) - extra
	t.Logf("%d submits acknowledged, %d rows committed without an acknowledgement", len(acked), unacked)
	if unacked < 0 || unacked > submitters {
		t.Errorf("%d rows beyond the acknowledged %d and the %d submitted since; want 0 to %d (one submit in flight per goroutine)",
			unacked, len(acked), extra, submitters)
	}

	var mu sync.Mutex
	ran := map[string]int{}
	w := NewWorker(t, c, &cairnq.WorkerOptions{Concurrency: 8})
	if err := w.Handle(Job, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		mu.Lock()
		ran[tc.ID()]++
		mu.Unlock()
		return nil, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	stop := StartWorker(t, w)
	Wait(t, "every task to succeed", func() (bool, error) {
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
