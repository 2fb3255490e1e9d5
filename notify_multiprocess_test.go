package cairnq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// Cross-process wakeups on SQLite: a change committed by one process ends
// the idle sleep of another's worker or waiter through the watch of the
// database's WAL, not at their next poll. The tests re-execute this test
// binary as the other process; these variables tell it what to be.
const (
	nxEnvRole = "CAIRNQ_NX_ROLE" // "submit", "work-one" or "worker"; unset in a normal run
	nxEnvDB   = "CAIRNQ_NX_DB"
	nxEnvID   = "CAIRNQ_NX_ID" // the task "work-one" waits for

	nxTaskName = "nx.job"
	// nxPoll is the parent's poll interval: far longer than any test
	// waits, so that only the watch can explain a wakeup.
	nxPoll = time.Minute
	// nxDeadline bounds the wait for a wakeup, well under nxPoll; it only
	// keeps a broken watch from hanging the run (starting a child process
	// under load takes seconds).
	nxDeadline = 20 * time.Second
)

// TestCrossProcessChild is the other process of the tests and benchmarks
// below.
func TestCrossProcessChild(t *testing.T) {
	role := os.Getenv(nxEnvRole)
	if role == "" {
		return // not a child: the cross-process wakeup tests start this
	}
	ctx := context.Background()
	c, err := cairnq.Open(ctx, os.Getenv(nxEnvDB), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	switch role {
	case "submit":
		if _, err := c.Submit(ctx, nxTaskName, map[string]any{"from": "child"}, nil); err != nil {
			t.Fatal(err)
		}
	case "work-one", "worker":
		w, err := cairnq.NewWorker(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The handler reports when it started, for the benchmark.
		w.Handle(nxTaskName, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			return map[string]any{"started_ns": time.Now().UnixNano()}, nil
		}, nil)
		runCtx, cancel := context.WithCancel(ctx)
		ran := make(chan error, 1)
		go func() { ran <- w.Run(runCtx) }()
		if role == "work-one" {
			if _, err := c.Wait(ctx, os.Getenv(nxEnvID), nil); err != nil {
				t.Error(err)
			}
		} else {
			io.Copy(io.Discard, os.Stdin) // until the parent closes it
		}
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	default:
		t.Fatalf("unknown role %q", role)
	}
}

// nxChild starts the child in role on the database at path. Its stdin
// closes, and it is waited for, when the test ends.
func nxChild(t testing.TB, path, role string, env ...string) (done <-chan error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrossProcessChild$", "-test.count=1", "-test.v", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), nxEnvRole+"="+role, nxEnvDB+"="+path)
	cmd.Env = append(cmd.Env, env...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		if err != nil {
			err = fmt.Errorf("child %s: %w\n%s", role, err, out.String())
		}
		ch <- err
		close(exited)
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			<-exited
		}
	})
	return ch
}

// A submit by another process starts in this process's idle worker,
// whose poll would not come for a minute.
func TestCrossProcessSubmitWakesIdleWorker(t *testing.T) {
	if os.Getenv(nxEnvRole) != "" {
		t.Skip("child")
	}
	if testing.Short() {
		t.Skip("starts a process")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	path := filepath.Join(t.TempDir(), "tasks.db")
	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{PollInterval: nxPoll})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan string, 2)
	w.Handle(nxTaskName, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		started <- string(tc.Task().Payload)
		return nil, nil
	}, nil)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()

	// A task of this process first: once it ran, the worker is idle,
	// sleeping on its minute-long poll.
	if _, err := c.Call(ctx, nxTaskName, map[string]any{"from": "parent"}, nil); err != nil {
		t.Fatal(err)
	}
	<-started
	idleSince := time.Now()
	if err := <-nxChild(t, path, "submit"); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-started:
		if !strings.Contains(p, "child") {
			t.Fatalf("started %s", p)
		}
		t.Logf("the other process's task started %v after the worker went idle (poll: %v)", time.Since(idleSince).Round(time.Millisecond), nxPoll)
	case <-time.After(nxDeadline):
		t.Fatalf("the other process's task did not start within %v of its submit; the worker polls every %v", nxDeadline, nxPoll)
	}
}

// A Wait in this process returns when another process's worker finishes
// the task, though it would not poll again for a minute.
func TestCrossProcessCompletionEndsWait(t *testing.T) {
	if os.Getenv(nxEnvRole) != "" {
		t.Skip("child")
	}
	if testing.Short() {
		t.Skip("starts a process")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tasks.db")
	c, err := cairnq.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	task, err := c.Submit(ctx, nxTaskName, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		task *cairnq.Task
		err  error
		at   time.Time
	}
	waited := make(chan result, 1)
	go func() {
		got, err := c.Wait(ctx, task.ID, &cairnq.WaitOptions{Timeout: 10 * nxPoll, PollInterval: nxPoll, MaxPollInterval: nxPoll})
		waited <- result{got, err, time.Now()}
	}()
	child := nxChild(t, path, "work-one", nxEnvID+"="+task.ID)
	var childErr error
	select {
	case childErr = <-child:
	case <-time.After(nxDeadline):
		t.Fatal("the other process did not finish the task")
	}
	if childErr != nil {
		t.Fatal(childErr)
	}
	childDone := time.Now()
	select {
	case r := <-waited:
		if r.err != nil || r.task.Status != cairnq.StatusSucceeded {
			t.Fatalf("wait: %+v %v", r.task, r.err)
		}
		t.Logf("Wait returned %v before the other process exited", childDone.Sub(r.at).Round(time.Millisecond))
	case <-time.After(nxDeadline):
		t.Fatalf("Wait did not return within %v of the other process finishing the task; it polls every %v", nxDeadline, nxPoll)
	}
}

// BenchmarkCrossProcessWakeup measures, with a worker in another process,
// how long a task takes from Submit to its handler starting, and a Call's
// round trip, with the WAL watch (notify=on) and without it
// (notify=off: CAIRNQ_SQLITE_NOTIFY=0 in both processes, so the worker
// and the waiter find the change at their poll, the default 500ms and
// 100ms growing to 500ms). Every operation starts with the worker idle.
// Run it as go test -run '^$' -bench CrossProcess -benchtime 200x.
func BenchmarkCrossProcessWakeup(b *testing.B) {
	for _, notify := range []string{"on", "off"} {
		b.Run("notify="+notify, func(b *testing.B) {
			env := ""
			if notify == "off" {
				env = "0"
			}
			b.Setenv("CAIRNQ_SQLITE_NOTIFY", env)
			ctx := context.Background()
			path := filepath.Join(b.TempDir(), "tasks.db")
			c, err := cairnq.Open(ctx, path, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			nxChild(b, path, "worker", "CAIRNQ_SQLITE_NOTIFY="+env)
			// The worker is up once it ran one.
			if _, err := c.Call(ctx, nxTaskName, nil, &cairnq.CallOptions{WaitOptions: cairnq.WaitOptions{Timeout: time.Minute}}); err != nil {
				b.Fatal(err)
			}
			b.Run("submit-to-start", func(b *testing.B) {
				var lat []time.Duration
				for b.Loop() {
					t0 := time.Now()
					task, err := c.Submit(ctx, nxTaskName, nil, nil)
					if err != nil {
						b.Fatal(err)
					}
					done, err := c.Wait(ctx, task.ID, nil)
					if err != nil {
						b.Fatal(err)
					}
					var r struct {
						StartedNS int64 `json:"started_ns"`
					}
					if err := json.Unmarshal(done.Result, &r); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Unix(0, r.StartedNS).Sub(t0))
				}
				reportPercentiles(b, lat)
			})
			b.Run("call", func(b *testing.B) {
				var lat []time.Duration
				for b.Loop() {
					t0 := time.Now()
					if _, err := c.Call(ctx, nxTaskName, nil, nil); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
				}
				reportPercentiles(b, lat)
			})
		})
	}
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	if os.Getenv("NX_DUMP") != "" {
		b.Log(lat)
	}
	at := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.95), "p95-ms")
	b.ReportMetric(0, "ns/op")
}
