package faulttest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// The durable faults: worker processes running a handler of durable steps
// (issue 48), killed with SIGKILL at random points while they do. Each
// step's function writes a line to its process's output file before it
// returns, a side effect outside the database, so the test can count how
// often each step really ran against the records that committed.

const (
	// DurableTask is the task name of the durable suite's handler.
	DurableTask = "fault.durable"
	// roleDurable runs a worker of DurableTask until the stop file exists
	// or it is killed.
	roleDurable = "durable"
	// durableSteps is how many steps the handler runs, durableSleepAt
	// the step before which it sleeps durably.
	durableSteps, durableSleepAt = 10, 5
	// durableAttempts is every task's MaxAttempts: each kill of a process
	// running a task costs it an attempt.
	durableAttempts = 100
	// envDurableKillFor, a duration ("2m"), keeps DurableKill submitting
	// rounds of tasks and killing processes until it has passed: the long
	// soak, run by hand. Unset, one round runs.
	envDurableKillFor = "CAIRNQ_DURABLE_KILL_FOR"
)

// DurableOptions vary DurableKill's faults.
type DurableOptions struct {
	// Midway, if set, runs once when half the tasks have ended, with the
	// kills going on: a server restart.
	Midway func(t *testing.T)
}

// DurableKill runs 300 tasks of a ten-step durable handler, with a durable
// sleep among the steps, on three worker processes killed with SIGKILL at
// random points (every 50 to 250 ms), each replaced by a new one, until
// every task ended; with CAIRNQ_DURABLE_KILL_FOR set ("2m"), round after
// round of 300 until that long has passed: every task
// succeeds with every step recorded in order; each step's side effect
// happened for the attempt that recorded it, never on a later attempt
// (after its record), and more than once only where an attempt was killed
// or lost its lease while it ran. It skips with -short.
func DurableKill(t *testing.T, b Backend, o DurableOptions) {
	SkipInChild(t)
	if testing.Short() {
		t.Skip("starts several processes; skipped with -short")
	}
	t.Parallel()
	const n = 300 // per round
	ctx := context.Background()
	start := time.Now()
	soak, _ := time.ParseDuration(os.Getenv(envDurableKillFor))
	dsn := b.NewDB(t)
	dir := t.TempDir()
	stopPath := dir + "/stop"
	c := b.Open(t, dsn)
	f := &durableFleet{procs: newProcs(t, b, dir, envDSN+"="+dsn, envStop+"="+stopPath, envShortLease+"=1"),
		killed: map[string]bool{}, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 48))}
	f.alive = []*proc{f.spawn(), f.spawn(), f.spawn()}
	ended := func() (int, error) {
		st, err := c.Stats(ctx, "")
		s := st["default"]
		if s.Failed+s.Canceled > 0 {
			return 0, fmt.Errorf("tasks failed or were canceled: %+v", s)
		}
		return s.Succeeded, err
	}
	midway := o.Midway
	var tasks []*cairnq.Task
	for round := 0; round == 0 || time.Since(start) < soak; round++ {
		items := make([]cairnq.SubmitItem, n)
		for i := range items {
			items[i] = cairnq.SubmitItem{Name: DurableTask, Options: cairnq.SubmitOptions{MaxAttempts: durableAttempts}}
		}
		batch, err := c.SubmitMany(ctx, items)
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, batch...)
		for deadline := time.Now().Add(2 * Watchdog); ; {
			k, err := ended()
			if err != nil {
				f.procs.fatal("%v", err)
			}
			if k == len(tasks) {
				break
			}
			if time.Now().After(deadline) {
				f.procs.fatal("%d of %d tasks succeeded, not all after %v", k, len(tasks), 2*Watchdog)
			}
			if midway != nil && k >= n/2 {
				f.midway(t, midway, ended)
				midway = nil
			}
			f.killOne()
		}
	}
	t.Logf("%d tasks succeeded, %d kills, in %v", len(tasks), len(f.killed), time.Since(start).Round(time.Millisecond))
	f.procs.stopAll(stopPath, f.alive)
	checkDurable(t, c, tasks, readDurableLines(t, f.all), f.killed)
}

// durableFleet is DurableKill's worker processes: those alive, every one
// it started, and those it killed (by name).
type durableFleet struct {
	procs      *procs
	alive, all []*proc
	killed     map[string]bool
	rng        *rand.Rand
}

// spawn starts one more worker process.
func (f *durableFleet) spawn() *proc {
	name := fmt.Sprintf("d%d", len(f.all)+1)
	p := f.procs.spawn(name, roleDurable, envID+"=fault-"+name)
	f.all = append(f.all, p)
	return p
}

// killOne kills a random live process at a random point of the work and
// starts another in its place.
func (f *durableFleet) killOne() {
	time.Sleep(time.Duration(50+f.rng.IntN(200)) * time.Millisecond) // the random point
	i := f.rng.IntN(len(f.alive))
	f.procs.kill(f.alive[i])
	f.killed[f.alive[i].name] = true
	f.alive[i] = f.spawn()
}

// midway runs fault once every live process has opened its client (a
// child makes its output file once it has: one opening in the fault
// would fail its test, which is no subject of this one), and returns
// once the database answers again, so that new processes can open.
func (f *durableFleet) midway(t *testing.T, fault func(t *testing.T), ended func() (int, error)) {
	f.procs.await("the workers to open their clients", f.alive, func() (bool, error) {
		for _, p := range f.alive {
			if _, err := os.Stat(p.out); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
	fault(t)
	Wait(t, "the database to answer after the midway fault", func() (bool, error) {
		_, err := ended()
		return err == nil, nil
	})
}

// readDurableLines reads what the processes wrote, by task id and step
// ("id k").
func readDurableLines(t *testing.T, all []*proc) map[string][]durableLine {
	t.Helper()
	lines := map[string][]durableLine{}
	for _, p := range all {
		out, err := readLines(p.out)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range out {
			if dl, ok := parseDurableLine(l, p.name); ok {
				key := dl.task + " " + strconv.Itoa(dl.step)
				lines[key] = append(lines[key], dl)
			}
		}
	}
	return lines
}

// durableLine is a line a durable child wrote: kind "effect" (a step's
// function ran) or "fail" (its Once returned an error), for a task's
// step on an attempt, by the process proc.
type durableLine struct {
	kind, task string
	step       int
	attempt    int
	proc       string
}

func parseDurableLine(l, proc string) (durableLine, bool) {
	f := strings.Fields(l)
	if len(f) != 4 || (f[0] != "effect" && f[0] != "fail") {
		return durableLine{}, false
	}
	step, err1 := strconv.Atoi(f[2])
	attempt, err2 := strconv.Atoi(f[3])
	return durableLine{kind: f[0], task: f[1], step: step, attempt: attempt, proc: proc}, err1 == nil && err2 == nil
}

// checkDurable checks every task's record against the side effects the
// processes wrote down.
func checkDurable(t *testing.T, c *cairnq.Client, tasks []*cairnq.Task, lines map[string][]durableLine, killed map[string]bool) {
	t.Helper()
	extra := 0
	for _, task := range tasks {
		got, err := c.Get(context.Background(), task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != cairnq.StatusSucceeded || string(got.Result) != "45" {
			t.Errorf("task %s: %s with result %s, want succeeded with 45", task.ID, got.Status, got.Result)
			continue
		}
		rec, err := cairnq.DurableOf(got)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range rec.Steps {
			names = append(names, s.Name)
		}
		if want := durableStepNames(); !slices.Equal(names, want) {
			t.Errorf("task %s recorded %v, want %v", task.ID, names, want)
			continue
		}
		for k := range durableSteps {
			pos := k
			if k >= durableSleepAt {
				pos++ // the sleep's place
			}
			recorded := rec.Steps[pos].Attempt
			mine := 0
			for _, l := range lines[task.ID+" "+strconv.Itoa(k)] {
				switch {
				case l.kind == "fail":
				case l.attempt > recorded:
					t.Errorf("task %s step %d ran on attempt %d, after attempt %d recorded it (%s)", task.ID, k, l.attempt, recorded, l.proc)
				case l.attempt == recorded:
					mine++
				case !killed[l.proc] && !failedOn(lines[task.ID+" "+strconv.Itoa(k)], l):
					t.Errorf("task %s step %d ran again on attempt %d in %s, which was not killed and recorded no failure", task.ID, k, l.attempt, l.proc)
				default:
					extra++
				}
			}
			if mine != 1 {
				t.Errorf("task %s step %d: %d side effects on attempt %d, which recorded it; want 1", task.ID, k, mine, recorded)
			}
		}
	}
	t.Logf("%d side effects repeated by an attempt killed (or its lease lost) before its record committed", extra)
}

// failedOn reports whether lines hold a "fail" of effect's step on its
// attempt: its Once returned an error (a lost lease), so the record did
// not commit.
func failedOn(lines []durableLine, effect durableLine) bool {
	return slices.ContainsFunc(lines, func(l durableLine) bool {
		return l.kind == "fail" && l.attempt == effect.attempt && l.proc == effect.proc
	})
}

// durableStepNames are the names the handler records, in order.
func durableStepNames() []string {
	var names []string
	for k := range durableSteps {
		if k == durableSleepAt {
			names = append(names, "nap")
		}
		names = append(names, "s"+strconv.Itoa(k))
	}
	return names
}

// runDurableChild is the durable role: a worker whose handler runs the
// ten steps, writing "effect <task> <step> <attempt>" inside each step's
// function and "fail <task> <step> <attempt>" when Once returns an error.
func runDurableChild(t *testing.T, c *cairnq.Client, id string, record, note func(string), stop func()) {
	opts := &cairnq.WorkerOptions{
		ID: id, Concurrency: workerConc, PollInterval: 20 * time.Millisecond,
		LeaseDuration: cairnq.MinLeaseDuration, HeartbeatInterval: 100 * time.Millisecond,
		OnError: func(err error, phase cairnq.ErrorPhase, taskID string) {
			note(fmt.Sprintf("%s: phase %s, task %q: %v", id, phase, taskID, err))
		},
	}
	w := NewWorker(t, c, opts)
	if err := w.Handle(DurableTask, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		sum := 0
		for k := range durableSteps {
			if k == durableSleepAt {
				if err := cairnq.Sleep(ctx, tc, "nap", 20*time.Millisecond); err != nil {
					return nil, err
				}
			}
			v, err := cairnq.Once(ctx, tc, "s"+strconv.Itoa(k), func(ctx context.Context) (int, error) {
				record(fmt.Sprintf("effect %s %d %d", tc.ID(), k, tc.Attempt()))
				time.Sleep(time.Duration(2+rand.N(10)) * time.Millisecond) // the work
				return k, nil
			})
			if err != nil {
				record(fmt.Sprintf("fail %s %d %d", tc.ID(), k, tc.Attempt()))
				return nil, err
			}
			sum += v
		}
		return sum, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	stopWorker := StartWorker(t, w)
	stop()
	stopWorker()
}
