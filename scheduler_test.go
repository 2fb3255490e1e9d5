package cairnq_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// The scheduler tests run on both backends against real databases and the
// real clock. What they assert is counted in the database (tasks per slot
// key), never how long something took; they wait on conditions, and on the
// clock only where slots have to pass.

// schedBackend opens clients on one database, as separate processes would.
type schedBackend struct {
	name string
	// newDB makes a fresh database and returns what open takes.
	newDB func(t *testing.T) string
}

var schedBackends = []schedBackend{
	{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "tasks.db") }},
	{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
}

// openSchedDB opens a client on db: a Postgres DSN or a SQLite path.
func openSchedDB(ctx context.Context, db string, logger *slog.Logger) (*cairnq.Client, error) {
	if strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://") || strings.Contains(db, "dbname=") {
		ex, err := cairnqpgx.Open(ctx, db, nil)
		if err != nil {
			return nil, err
		}
		c, err := cairnq.OpenPostgres(ctx, ex, &cairnq.PostgresOptions{CloseExecutor: true, Options: cairnq.Options{Logger: logger}})
		if err != nil {
			ex.Close()
		}
		return c, err
	}
	return cairnq.Open(ctx, db, &cairnq.SQLiteOptions{Options: cairnq.Options{Logger: logger}})
}

func openSched(t *testing.T, db string) *cairnq.Client {
	t.Helper()
	c, err := openSchedDB(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// runSched runs s until the returned stop is called, which waits for Run
// to return and fails the test if it returned an error.
func runSched(t *testing.T, s *cairnq.Scheduler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("Run did not return within 30s of its context ending")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// completeAll runs a worker on c that succeeds every task named name at
// once, so that a slot submitted twice would find its first task finished
// (and a reuse strategy would then insert another).
func completeAll(t *testing.T, c *cairnq.Client, names ...string) (stop func()) {
	t.Helper()
	w := newWorker(t, c, &cairnq.WorkerOptions{Concurrency: 4})
	for _, name := range names {
		if err := w.Handle(name, func(context.Context, *cairnq.TaskContext) (any, error) { return nil, nil }, nil); err != nil {
			t.Fatal(err)
		}
	}
	return startWorker(t, w)
}

// seconds returns the slots of "* * * * * *" in [from, to].
func seconds(from, to time.Time) []time.Time {
	var out []time.Time
	for s := from.Truncate(time.Second); !s.After(to); s = s.Add(time.Second) {
		if !s.Before(from) {
			out = append(out, s)
		}
	}
	return out
}

// slotTasks maps each slot of entry id in [from, to] that has a task to
// the task's id.
func slotTasks(t *testing.T, c *cairnq.Client, id string, from, to time.Time) map[time.Time]string {
	t.Helper()
	out := map[time.Time]string{}
	for _, s := range seconds(from, to) {
		task, err := c.GetByKey(context.Background(), cairnq.SlotKey(id, s))
		if errors.Is(err, cairnq.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out[s] = task.ID
	}
	return out
}

// namedTasks returns every task named name.
func namedTasks(t *testing.T, c *cairnq.Client, name string) []*cairnq.Task {
	t.Helper()
	tasks, err := c.List(context.Background(), &cairnq.ListOptions{Name: name, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	return tasks
}

// checkOnePerSlot checks that every task named name is the task of exactly
// one slot of entry id, and returns the slots, oldest first.
func checkOnePerSlot(t *testing.T, c *cairnq.Client, name, id string) []time.Time {
	t.Helper()
	tasks := namedTasks(t, c, name)
	if len(tasks) == 0 {
		t.Fatalf("no %s task", name)
	}
	from, to := tasks[0].CreatedAt, tasks[0].CreatedAt
	for _, task := range tasks {
		if task.CreatedAt.Before(from) {
			from = task.CreatedAt
		}
		if task.CreatedAt.After(to) {
			to = task.CreatedAt
		}
	}
	// Tasks are created near their slot; look well beyond either end.
	bySlot := slotTasks(t, c, id, from.Add(-5*time.Second), to.Add(5*time.Second))
	owner := map[string]time.Time{}
	for s, taskID := range bySlot {
		owner[taskID] = s
	}
	var orphans []string
	for _, task := range tasks {
		if _, ok := owner[task.ID]; !ok {
			orphans = append(orphans, fmt.Sprintf("%s (created %s)", task.ID, task.CreatedAt.Format("15:04:05.000")))
		}
	}
	if len(orphans) > 0 || len(owner) != len(tasks) {
		t.Errorf("%d %s tasks for %d slots; tasks no slot key points at (a slot submitted twice): %v",
			len(tasks), name, len(bySlot), orphans)
	}
	var slots []time.Time
	for s := range bySlot {
		slots = append(slots, s)
	}
	slices.SortFunc(slots, time.Time.Compare)
	return slots
}

// holes reports the holes in slots, one second apart when whole.
func holes(slots []time.Time) []string {
	var out []string
	for i := 1; i < len(slots); i++ {
		if d := slots[i].Sub(slots[i-1]); d != time.Second {
			out = append(out, fmt.Sprintf("%s..%s", slots[i-1].Format("15:04:05"), slots[i].Format("15:04:05")))
		}
	}
	return out
}

// The children of TestSchedulerThreeProcesses re-execute this test binary;
// these variables tell a child what to do.
const (
	schedEnvRole = "CAIRNQ_SCHED_ROLE" // "scheduler" in a child; unset in a normal run
	schedEnvDB   = "CAIRNQ_SCHED_DB"   // a SQLite path or a Postgres DSN
	schedEnvStop = "CAIRNQ_SCHED_STOP" // the child stops once this file exists
	schedEnvLog  = "CAIRNQ_SCHED_LOG"  // the child's JSON log

	schedMPName = "sched.tick"
	schedMPID   = "tick"
)

// TestSchedulerProcessHelper is a child of TestSchedulerThreeProcesses: a
// scheduler process with one entry firing every second, logging what it
// submits, until the stop file appears.
func TestSchedulerProcessHelper(t *testing.T) {
	if os.Getenv(schedEnvRole) != "scheduler" {
		return // not a child: TestSchedulerThreeProcesses starts this
	}
	logFile, err := os.Create(os.Getenv(schedEnvLog))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	logger := slog.New(slog.NewJSONHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx := context.Background()
	c, err := openSchedDB(ctx, os.Getenv(schedEnvDB), logger)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := cairnq.NewScheduler(c, nil)
	if _, err := s.Add("* * * * * *", schedMPName, map[string]string{"pid": fmt.Sprint(os.Getpid())}, &cairnq.ScheduleOptions{
		ID: schedMPID, Missed: cairnq.MissedCatchUp, CatchUp: cairnq.MaxCatchUp,
	}); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	for {
		if _, err := os.Stat(os.Getenv(schedEnvStop)); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned before the stop file: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Three scheduler processes run one entry firing every second for ten
// seconds, while a worker finishes each task at once: every slot gets
// exactly one task, and the slots have no hole.
func TestSchedulerThreeProcesses(t *testing.T) {
	if os.Getenv(schedEnvRole) != "" {
		t.Skip("running as a child")
	}
	if testing.Short() {
		t.Skip("starts three processes for ten seconds; skipped with -short")
	}
	for _, b := range schedBackends {
		t.Run(b.name, func(t *testing.T) {
			db := b.newDB(t)
			dir := t.TempDir()
			stopPath := filepath.Join(dir, "stop")
			type child struct {
				name, log string
				cmd       *exec.Cmd
				out       bytes.Buffer
				done      chan struct{}
				err       error
			}
			var children []*child
			t.Cleanup(func() {
				for _, ch := range children {
					select {
					case <-ch.done:
					default:
						ch.cmd.Process.Kill()
						<-ch.done
					}
				}
			})
			for i := range 3 {
				ch := &child{name: fmt.Sprintf("scheduler%d", i+1), done: make(chan struct{})}
				ch.log = filepath.Join(dir, ch.name+".log")
				ch.cmd = exec.Command(os.Args[0], "-test.run=^TestSchedulerProcessHelper$", "-test.count=1", "-test.v", "-test.timeout=3m")
				ch.cmd.Env = append(os.Environ(), schedEnvRole+"=scheduler", schedEnvDB+"="+db, schedEnvStop+"="+stopPath, schedEnvLog+"="+ch.log)
				ch.cmd.Stdout, ch.cmd.Stderr = &ch.out, &ch.out
				if err := ch.cmd.Start(); err != nil {
					t.Fatal(err)
				}
				children = append(children, ch)
				go func() {
					ch.err = ch.cmd.Wait()
					close(ch.done)
				}()
			}
			abort := func(format string, a ...any) {
				t.Helper()
				for _, ch := range children {
					ch.cmd.Process.Signal(syscall.SIGQUIT) // print every goroutine's stack
				}
				for _, ch := range children {
					select {
					case <-ch.done:
					case <-time.After(10 * time.Second):
						ch.cmd.Process.Kill()
						<-ch.done
					}
					t.Logf("%s (%v):\n%s", ch.name, ch.err, ch.out.String())
				}
				t.Fatalf(format, a...)
			}

			// The children race each other to create and migrate the
			// database; the parent opens it once one has.
			var c *cairnq.Client
			deadline := time.Now().Add(60 * time.Second)
			for c == nil {
				cl, err := openSchedDB(context.Background(), db, nil)
				if err == nil {
					c = cl
					t.Cleanup(func() { c.Close() })
					break
				}
				if time.Now().After(deadline) {
					abort("opening the database: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			stopWorker := completeAll(t, c, schedMPName)

			// Ten seconds of slots: wait until eleven tasks exist.
			deadline = time.Now().Add(90 * time.Second)
			for len(namedTasks(t, c, schedMPName)) < 11 {
				for _, ch := range children {
					select {
					case <-ch.done:
						abort("%s exited early", ch.name)
					default:
					}
				}
				if time.Now().After(deadline) {
					abort("fewer than 11 tasks after 90s")
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := os.WriteFile(stopPath, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, ch := range children {
				select {
				case <-ch.done:
				case <-time.After(30 * time.Second):
					abort("%s did not stop within 30s of the stop file", ch.name)
				}
				if ch.err != nil {
					t.Errorf("%s failed: %v\n%s", ch.name, ch.err, ch.out.String())
				}
			}
			stopWorker()

			slots := checkOnePerSlot(t, c, schedMPName, schedMPID)
			if len(slots) < 11 {
				t.Errorf("%d slots have a task, want at least 11", len(slots))
			}
			if h := holes(slots); len(h) > 0 {
				t.Errorf("slots missing between %v", h)
			}
			// Who submitted what, from each child's log: no slot twice.
			by := map[string][]string{}
			var counts []string
			for _, ch := range children {
				n := 0
				f, err := os.Open(ch.log)
				if err != nil {
					t.Fatal(err)
				}
				sc := bufio.NewScanner(f)
				for sc.Scan() {
					var rec struct{ Msg, Key string }
					if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "cairnq: periodic task submitted" {
						by[rec.Key] = append(by[rec.Key], ch.name)
						n++
					}
				}
				f.Close()
				counts = append(counts, fmt.Sprintf("%s=%d", ch.name, n))
			}
			for key, who := range by {
				if len(who) > 1 {
					t.Errorf("slot %s submitted by %v", key, who)
				}
			}
			// A child may not log a submit whose commit it did not hear
			// back from (stopped meanwhile), but may never log one the
			// database does not hold.
			held := map[string]bool{}
			for _, s := range slots {
				held[cairnq.SlotKey(schedMPID, s)] = true
			}
			for key := range by {
				if !held[key] {
					t.Errorf("a child logged slot %s, which has no task", key)
				}
			}
			t.Logf("%d slots from %s to %s; submitted by %s", len(slots),
				slots[0].Format("15:04:05"), slots[len(slots)-1].Format("15:04:05"), strings.Join(counts, " "))
		})
	}
}

// A scheduler stopped and started again, over and over within one slot,
// never submits a slot a second time, though its task has finished (as a
// restarted process would: a fresh client and scheduler each time).
func TestSchedulerRestartDoesNotRepeatASlot(t *testing.T) {
	const name, id = "sched.restart", "restart"
	for _, b := range schedBackends {
		t.Run(b.name, func(t *testing.T) {
			db := b.newDB(t)
			c := openSched(t, db)
			completeAll(t, c, name)
			first := map[time.Time]string{}
			for round := range 12 {
				rc := openSched(t, db)
				s := cairnq.NewScheduler(rc, nil)
				if _, err := s.Add("* * * * * *", name, nil, &cairnq.ScheduleOptions{ID: id, Missed: cairnq.MissedCatchUp, CatchUp: 100}); err != nil {
					t.Fatal(err)
				}
				started := time.Now().Truncate(time.Second)
				stop := runSched(t, s)
				// Until this round has evaluated: its slot, or a later one, has a task.
				waitFor(t, "the round's slot", func() bool {
					return len(slotTasks(t, c, id, started, time.Now().Add(time.Second))) > 0
				})
				if round < 4 {
					// Let the first rounds see their task finish, as a
					// reuse strategy would then insert another.
					waitFor(t, "the slot's task to finish", func() bool {
						for _, taskID := range slotTasks(t, c, id, started, time.Now().Add(time.Second)) {
							if task, err := c.Get(context.Background(), taskID); err != nil || !task.IsTerminal() {
								return false
							}
						}
						return true
					})
				}
				stop()
				rc.Close()
				if round == 0 {
					for s, taskID := range slotTasks(t, c, id, started.Add(-time.Second), time.Now().Add(time.Second)) {
						first[s] = taskID
					}
				}
			}
			slots := checkOnePerSlot(t, c, name, id)
			if h := holes(slots); len(h) > 0 {
				t.Errorf("slots missing between %v", h)
			}
			now := slotTasks(t, c, id, slots[0], slots[len(slots)-1])
			for s, taskID := range first {
				if now[s] != taskID {
					t.Errorf("slot %s: task %s, then %s", s.Format("15:04:05"), taskID, now[s])
				}
			}
			t.Logf("12 restarts over %d slots", len(slots))
		})
	}
}

// After every scheduler was down for several slots, each entry does what
// its policy says: skip submits none of the missed slots, run-once the
// newest, catch-up 3 the newest three; then all go on with every slot.
func TestSchedulerMissedSlotPolicies(t *testing.T) {
	type entry struct {
		id      string
		missed  cairnq.MissedPolicy
		catchUp int
		late    int // missed slots submitted
	}
	entries := []entry{
		{"skip", cairnq.MissedSkip, 0, 0},
		{"once", cairnq.MissedRunOnce, 0, 1},
		{"three", cairnq.MissedCatchUp, 3, 3},
	}
	name := func(e entry) string { return "sched.missed." + e.id }
	for _, b := range schedBackends {
		t.Run(b.name, func(t *testing.T) {
			db := b.newDB(t)
			c := openSched(t, db)
			completeAll(t, c, name(entries[0]), name(entries[1]), name(entries[2]))
			newSched := func() *cairnq.Scheduler {
				s := cairnq.NewScheduler(openSched(t, db), nil)
				for _, e := range entries {
					if _, err := s.Add("* * * * * *", name(e), nil, &cairnq.ScheduleOptions{ID: e.id, Missed: e.missed, CatchUp: e.catchUp}); err != nil {
						t.Fatal(err)
					}
				}
				return s
			}
			begin := time.Now().Add(-time.Second)
			newest := func(id string) time.Time {
				var last time.Time
				for s := range slotTasks(t, c, id, begin, time.Now().Add(time.Second)) {
					if s.After(last) {
						last = s
					}
				}
				return last
			}
			// History: two slots of every entry.
			stop := runSched(t, newSched())
			waitFor(t, "two slots of every entry", func() bool {
				for _, e := range entries {
					if len(slotTasks(t, c, e.id, begin, time.Now().Add(time.Second))) < 2 {
						return false
					}
				}
				return true
			})
			stop()
			lastBefore := map[string]time.Time{}
			var latest time.Time
			for _, e := range entries {
				lastBefore[e.id] = newest(e.id)
				if lastBefore[e.id].After(latest) {
					latest = lastBefore[e.id]
				}
			}
			// Every scheduler is down for six slots and more.
			for time.Now().Before(latest.Add(7 * time.Second)) {
				time.Sleep(10 * time.Millisecond)
			}
			restart := time.Now()
			stop = runSched(t, newSched())
			var back time.Time // when every entry had a slot after the gap
			waitFor(t, "every entry back", func() bool {
				for _, e := range entries {
					if !newest(e.id).After(lastBefore[e.id]) {
						return false
					}
				}
				back = time.Now()
				return true
			})
			waitFor(t, "three more slots", func() bool {
				for _, e := range entries {
					if newest(e.id).Before(back.Add(3 * time.Second).Truncate(time.Second)) {
						return false
					}
				}
				return true
			})
			stop()

			for _, e := range entries {
				slots := checkOnePerSlot(t, c, name(e), e.id)
				// One hole, the gap; after it one run of slots, whose first
				// is the newest slot due at the restart (on time, whatever
				// the policy) less the missed slots the policy submitted.
				h := holes(slots)
				if len(h) != 1 {
					t.Errorf("%s: holes %v, want exactly the gap", e.id, h)
					continue
				}
				var resumed time.Time
				for i := 1; i < len(slots); i++ {
					if slots[i].Sub(slots[i-1]) != time.Second {
						resumed = slots[i]
					}
				}
				onTime := resumed.Add(time.Duration(e.late) * time.Second)
				lo, hi := restart.Add(-50*time.Millisecond).Truncate(time.Second), back.Add(50*time.Millisecond).Truncate(time.Second)
				if onTime.Before(lo) || onTime.After(hi) {
					t.Errorf("%s: resumed at %s after %s: %d late slots counting from the on-time one at %s..%s, want %d",
						e.id, resumed.Format("15:04:05"), lastBefore[e.id].Format("15:04:05"),
						int(lo.Sub(resumed)/time.Second), lo.Format("15:04:05"), hi.Format("15:04:05"), e.late)
				}
			}
		})
	}
}

// Bad input is refused at Add as an *ArgumentError, and nothing is written.
func TestSchedulerAddRefusesBadInput(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		s := cairnq.NewScheduler(c, nil)
		long := strings.Repeat("x", 300)
		for _, tc := range []struct {
			spec, name string
			payload    any
			opts       *cairnq.ScheduleOptions
			arg        string
		}{
			{"61 * * * *", "n", nil, nil, "spec"},
			{"* * * *", "n", nil, nil, "spec"},
			{"", "n", nil, nil, "spec"},
			{"@every 500ms", "n", nil, nil, "spec"},
			{"@fortnightly", "n", nil, nil, "spec"},
			{"0 0 30 2 *", "n", nil, nil, "spec"},
			{"TZ=Mars/Olympus 0 9 * * *", "n", nil, nil, "spec"},
			{"TZ=UTC 0 9 * * *", "n", nil, &cairnq.ScheduleOptions{Location: time.UTC}, "spec"},
			{"@hourly", "", nil, nil, "name"},
			{"@hourly", "n", nil, &cairnq.ScheduleOptions{ID: long}, "id"},
			{"@hourly", long, nil, nil, "name"},
			{"@hourly", "n", nil, &cairnq.ScheduleOptions{Submit: &cairnq.SubmitOptions{Key: "k"}}, "key"},
			{"@hourly", "n", nil, &cairnq.ScheduleOptions{Submit: &cairnq.SubmitOptions{Conflict: cairnq.ConflictReuse}}, "conflict"},
			{"@hourly", "n", nil, &cairnq.ScheduleOptions{Submit: &cairnq.SubmitOptions{Priority: 1 << 40}}, "priority"},
			{"@hourly", "n", nil, &cairnq.ScheduleOptions{Missed: cairnq.MissedCatchUp}, "CatchUp"},
			{"@hourly", "n", nil, &cairnq.ScheduleOptions{Missed: cairnq.MissedCatchUp, CatchUp: cairnq.MaxCatchUp + 1}, "CatchUp"},
			{"@hourly", "n", nil, &cairnq.ScheduleOptions{Missed: cairnq.MissedRunOnce, CatchUp: 2}, "CatchUp"},
			{"@hourly", "n", nil, &cairnq.ScheduleOptions{Missed: cairnq.MissedPolicy(7)}, "Missed"},
			{"@hourly", "n", nil, &cairnq.ScheduleOptions{Grace: -time.Second}, "Grace"},
		} {
			_, err := s.Add(tc.spec, tc.name, tc.payload, tc.opts)
			var ae *cairnq.ArgumentError
			if !errors.As(err, &ae) || !errors.Is(err, cairnq.ErrInvalidArgument) || ae.Arg != tc.arg {
				t.Errorf("Add(%q, %q, %+v) = %v, want an *ArgumentError on %s", tc.spec, tc.name, tc.opts, err, tc.arg)
			}
		}
		// A payload JSON cannot hold is refused too, typed as such.
		var se *cairnq.SerializationError
		if _, err := s.Add("@hourly", "n", func() {}, nil); !errors.As(err, &se) {
			t.Errorf("Add with a func payload = %v, want a *SerializationError", err)
		}
		// An ID is one entry's; the default is the name and the spec.
		id, err := s.Add("0  9 * * *", "report", nil, nil)
		if err != nil || id != "report 0 9 * * *" {
			t.Fatalf("Add = %q, %v", id, err)
		}
		var ae *cairnq.ArgumentError
		if _, err := s.Add("0 9 * * *", "report", nil, nil); !errors.As(err, &ae) || ae.Arg != "id" {
			t.Errorf("a second entry with the same ID: %v, want an *ArgumentError on id", err)
		}
		if n := countTasks(t, c); n != 0 {
			t.Errorf("%d tasks written", n)
		}
		if err := s.Run(nil); !errors.As(err, &ae) { //nolint:staticcheck // a nil context is the point
			t.Errorf("Run(nil) = %v, want an *ArgumentError", err)
		}
	})
}

// Run refuses a second concurrent Run, returns nil when its context ends,
// and ErrClosed when the client is closed under it; an entry added while
// it runs starts at once.
func TestSchedulerRunLifecycle(t *testing.T) {
	onBothBackends(t, nil, func(t *testing.T, c *cairnq.Client) {
		s := cairnq.NewScheduler(c, nil)
		if _, err := s.Add("* * * * * *", "sched.before", nil, nil); err != nil {
			t.Fatal(err)
		}
		stop := runSched(t, s)
		waitFor(t, "the first entry's first task", func() bool { return len(namedTasks(t, c, "sched.before")) > 0 })
		if err := s.Run(context.Background()); !errors.Is(err, cairnq.ErrSchedulerRunning) {
			t.Errorf("a second Run = %v, want ErrSchedulerRunning", err)
		}
		id, err := s.Add("* * * * * *", "sched.live", nil, &cairnq.ScheduleOptions{ID: "live"})
		if err != nil || id != "live" {
			t.Fatalf("Add = %q, %v", id, err)
		}
		waitFor(t, "the added entry's first task", func() bool { return len(namedTasks(t, c, "sched.live")) > 0 })
		stop() // fails the test unless Run returned nil

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		n := len(namedTasks(t, c, "sched.live"))
		go func() { done <- s.Run(ctx) }()
		waitFor(t, "Run to submit again", func() bool { return len(namedTasks(t, c, "sched.live")) > n })
		c.Close()
		select {
		case err := <-done:
			if !errors.Is(err, cairnq.ErrClosed) {
				t.Errorf("Run after Close = %v, want ErrClosed", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return after the client closed")
		}
	})
}
