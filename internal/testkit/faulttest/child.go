package faulttest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// Child is the body of the suite's child processes: the binary's
// Backend.ChildTest calls it, and it does nothing unless the
// environment names a role. A child opens the shared database with b.Open
// and plays its role: a submitter submits until killed, writing down each
// id Submit returned; a victim runs tasks, then holds a few until killed;
// a survivor runs tasks from when the test tells it to until the test
// tells it to stop. A worker writes a line per run, and a line per task
// it holds; what a child survived goes to <out>.errors.
func Child(t *testing.T, b Backend) {
	role := os.Getenv(envRole)
	if role == "" {
		return // not a child: the fault tests start this
	}
	c := b.Open(t, os.Getenv(envDSN))
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	out := openChildOutput(t, os.Getenv(envOut))
	defer out.file.Close()
	ppid := os.Getppid()

	if role == roleSubmitter {
		runSubmitterChild(t, c, out, ppid) // ends with the kill
		return
	}
	id := os.Getenv(envID)
	if role == roleWorkflow {
		runWorkflowChild(t, c, id, out.record, out.note, func() { waitFile(t, ppid, os.Getenv(envStop)) })
		return
	}
	if role == roleDurable {
		runDurableChild(t, c, id, out.record, out.note, func() { waitFile(t, ppid, os.Getenv(envStop)) })
		return
	}
	if role == roleLimited {
		runLimitedChild(t, c, id, out.note, func() { waitFile(t, ppid, os.Getenv(envStop)) })
		return
	}
	if role == rolePausable {
		runPausableChild(t, c, id, out.record, out.note, func() { waitFile(t, ppid, os.Getenv(envStop)) })
		return
	}
	runWorkerChild(t, b, c, role == roleVictim, id, out, ppid)
}

// childOutput is a child's output file: record writes a line to it, note
// a line to the file beside it, <out>.errors. mu keeps each write one
// whole line.
type childOutput struct {
	t    *testing.T
	path string
	file *os.File
	mu   sync.Mutex
}

// openChildOutput opens the output file at path for appending.
func openChildOutput(t *testing.T, path string) *childOutput {
	t.Helper()
	file, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return &childOutput{t: t, path: path, file: file}
}

// record writes line to the output file.
func (o *childOutput) record(line string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, err := o.file.WriteString(line + "\n"); err != nil {
		o.t.Error(err)
	}
}

// note appends what the child survived to <out>.errors.
func (o *childOutput) note(line string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f, err := os.OpenFile(o.path+".errors", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err == nil {
		_, err = fmt.Fprintln(f, line)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		o.t.Error(err)
	}
}

// orphaned reports whether the parent test is gone, ppid being the
// parent the child started with: a child then quits.
func orphaned(ppid int) bool { return os.Getppid() != ppid }

// waitFile waits for the parent test to create the file at path. It fails
// if the parent is gone, or after two minutes.
func waitFile(t *testing.T, ppid int, path string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if orphaned(ppid) || time.Now().After(deadline) {
			t.Fatalf("no %s: the parent is gone", path)
		}
	}
}

// untilKilled waits for the parent test to kill the child. It returns
// only if the parent is gone, or after two minutes.
func untilKilled(ppid int) {
	for deadline := time.Now().Add(2 * time.Minute); !orphaned(ppid) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

// runSubmitterChild is the submitter role. It submits until killed; an id
// is written down only once Submit returned it.
func runSubmitterChild(t *testing.T, c *cairnq.Client, out *childOutput, ppid int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	pad := strings.Repeat("p", 200)
	for g := range submitters {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				task, err := c.Submit(ctx, Job, map[string]any{"g": g, "n": n, "pad": pad}, nil)
				if err != nil {
					out.note(fmt.Sprintf("submit g=%d n=%d: %v", g, n, err))
					continue
				}
				out.record(task.ID)
			}
		})
	}
	untilKilled(ppid)
	cancel()
	wg.Wait()
	t.Fatal("not killed: the parent is gone")
}

// runWorkerChild is the victim role, or the survivor role if victim is
// false.
func runWorkerChild(t *testing.T, b Backend, c *cairnq.Client, victim bool, id string, out *childOutput, ppid int) {
	opts := &cairnq.WorkerOptions{
		ID: id, Concurrency: workerConc, PollInterval: 20 * time.Millisecond,
		OnError: func(err error, phase cairnq.ErrorPhase, taskID string) {
			detail := ""
			if b.ErrDetail != nil {
				detail = b.ErrDetail(err)
			}
			out.note(fmt.Sprintf("%s: phase %s, task %q: %v%s", id, phase, taskID, err, detail))
		},
	}
	// The victim's lease is the shortest allowed, so its tasks come back
	// soon after the kill. The survivors keep the default: under load a
	// short lease can lapse by itself, and a second run of a survivor's
	// task is then a real failure of this test, not a fault it injected.
	if victim {
		opts.LeaseDuration = cairnq.MinLeaseDuration
		opts.HeartbeatInterval = 100 * time.Millisecond
	}
	w := NewWorker(t, c, opts)
	var started, held atomic.Int32
	if err := w.Handle(Job, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		out.record(fmt.Sprintf("run %s %d", tc.ID(), tc.Attempt()))
		if victim && started.Add(1) > victimRuns && held.Add(1) <= victimHeld {
			out.record("hold " + tc.ID())
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
		waitFile(t, ppid, os.Getenv(envGo))
	}
	stop := StartWorker(t, w)
	if victim {
		untilKilled(ppid)
		t.Fatal("not killed: the parent is gone")
	}
	waitFile(t, ppid, os.Getenv(envStop))
	stop()
}
