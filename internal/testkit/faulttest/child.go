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
	outPath := os.Getenv(envOut)
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

	if role == roleSubmitter {
		// Submits until killed; an id is written down only once Submit
		// returned it.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var wg sync.WaitGroup
		pad := strings.Repeat("p", 200)
		for g := range submitters {
			wg.Go(func() {
				for n := 0; ctx.Err() == nil; n++ {
					task, err := c.Submit(ctx, Job, map[string]any{"g": g, "n": n, "pad": pad}, nil)
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

	id := os.Getenv(envID)
	if role == roleWorkflow {
		runWorkflowChild(t, c, id, record, note, func() { waitFile(os.Getenv(envStop)) })
		return
	}
	if role == roleLimited {
		runLimitedChild(t, c, id, note, func() { waitFile(os.Getenv(envStop)) })
		return
	}
	opts := &cairnq.WorkerOptions{
		ID: id, Concurrency: workerConc, PollInterval: 20 * time.Millisecond,
		OnError: func(err error, phase cairnq.ErrorPhase, taskID string) {
			detail := ""
			if b.ErrDetail != nil {
				detail = b.ErrDetail(err)
			}
			note(fmt.Sprintf("%s: phase %s, task %q: %v%s", id, phase, taskID, err, detail))
		},
	}
	// The victim's lease is the shortest allowed, so its tasks come back
	// soon after the kill. The survivors keep the default: under load a
	// short lease can lapse by itself, and a second run of a survivor's
	// task is then a real failure of this test, not a fault it injected.
	victim := role == roleVictim
	if victim {
		opts.LeaseDuration = cairnq.MinLeaseDuration
		opts.HeartbeatInterval = 100 * time.Millisecond
	}
	w := NewWorker(t, c, opts)
	var started, held atomic.Int32
	if err := w.Handle(Job, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		record(fmt.Sprintf("run %s %d", tc.ID(), tc.Attempt()))
		if victim && started.Add(1) > victimRuns && held.Add(1) <= victimHeld {
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
		waitFile(os.Getenv(envGo))
	}
	stop := StartWorker(t, w)
	if victim {
		untilKilled()
		t.Fatal("not killed: the parent is gone")
	}
	waitFile(os.Getenv(envStop))
	stop()
}
