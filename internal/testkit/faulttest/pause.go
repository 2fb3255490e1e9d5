package faulttest

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// The fleet's pause across processes: worker processes of two queues,
// one of them paused and resumed by the test's own client.

const (
	// PausedQueue is the queue the pause suite pauses; OpenQueue the one
	// it leaves running beside it.
	PausedQueue = "fault.paused"
	OpenQueue   = "fault.open"
	// PauseJob is the task name both queues hold.
	PauseJob = "fault.pause_job"
	// rolePausable runs a worker of PauseJob on both queues until the
	// stop file exists.
	rolePausable = "pausable"
	// The worker's log lines for the fleet's pause and resume, as the
	// package documentation's "Logging" lists them.
	logPausedPrefix  = "cairnq: queue paused for the fleet"
	logResumedPrefix = "cairnq: queue resumed for the fleet"
)

// runPausableChild is the pausable role. Its output gets a line "ran
// QUEUE" per task and a line "paused QUEUE" or "resumed QUEUE" each time
// its worker logs that it saw the fleet's pause change.
func runPausableChild(t *testing.T, c *cairnq.Client, id string, record, note func(string), stop func()) {
	w := NewWorker(t, c, &cairnq.WorkerOptions{
		ID: id, Concurrency: 4, PollInterval: 20 * time.Millisecond, WorkflowSweep: cairnq.NoWorkflowSweep,
		Queues: []string{PausedQueue, OpenQueue},
		Logger: PauseLog(record),
		OnError: func(err error, phase cairnq.ErrorPhase, taskID string) {
			note(fmt.Sprintf("%s: phase %s, task %q: %v", id, phase, taskID, err))
		},
	})
	if err := w.Handle(PauseJob, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		record("ran " + tc.Queue())
		return nil, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	stopWorker := StartWorker(t, w)
	stop()
	stopWorker()
}

// PauseLog is a logger that gives record "paused QUEUE" and "resumed
// QUEUE" for a worker's lines saying it saw the fleet's pause of QUEUE
// come or go, and drops every other line.
func PauseLog(record func(string)) *slog.Logger { return slog.New(pauseLines{record}) }

// pauseLines is PauseLog's handler.
type pauseLines struct{ record func(string) }

func (h pauseLines) Enabled(context.Context, slog.Level) bool { return true }
func (h pauseLines) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h pauseLines) WithGroup(string) slog.Handler            { return h }

func (h pauseLines) Handle(_ context.Context, r slog.Record) error {
	var word string
	switch {
	case strings.HasPrefix(r.Message, logPausedPrefix):
		word = "paused"
	case strings.HasPrefix(r.Message, logResumedPrefix):
		word = "resumed"
	default:
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "queue" {
			h.record(word + " " + a.Value.String())
		}
		return true
	})
	return nil
}

// FleetPause runs two worker processes on PausedQueue and OpenQueue and
// pauses PausedQueue from the test's own client (no worker there): once
// each process has seen the pause, tasks submitted to both queues run on
// OpenQueue only, and every PausedQueue task stays queued until
// ResumeQueue, after which both processes see the resume and the tasks
// run. No process is told of the pause but through the database.
func FleetPause(t *testing.T, b Backend) {
	SkipInChild(t)
	if testing.Short() {
		t.Skip("starts two processes; skipped with -short")
	}
	ctx := context.Background()
	dsn := b.NewDB(t)
	dir := t.TempDir()
	stopPath := filepath.Join(dir, "stop")
	c := b.Open(t, dsn)
	procs := newProcs(t, b, dir, envDSN+"="+dsn, envStop+"="+stopPath)
	var alive []*proc
	for i := range 2 {
		name := fmt.Sprintf("pausable%d", i+1)
		alive = append(alive, procs.spawn(name, rolePausable, envID+"=fault-"+name))
	}
	submit := func(queue string, n int) {
		items := make([]cairnq.SubmitItem, n)
		for i := range items {
			items[i] = cairnq.SubmitItem{Name: PauseJob, Options: cairnq.SubmitOptions{Queue: queue}}
		}
		if _, err := c.SubmitMany(ctx, items); err != nil {
			t.Fatal(err)
		}
	}
	succeeded := func(queue string, n int) func() (bool, error) {
		return func() (bool, error) {
			st, err := c.Stats(ctx, queue)
			return st[queue].Succeeded == n, err
		}
	}
	everyChild := func(line string) func() (bool, error) {
		return func() (bool, error) {
			for _, p := range alive {
				if n, err := countLines(p.out, line); err != nil || n == 0 {
					return false, err
				}
			}
			return true, nil
		}
	}

	submit(PausedQueue, 10)
	procs.await("the first tasks of the queue to pause to run", alive, succeeded(PausedQueue, 10))
	if _, _, err := c.PauseQueue(ctx, PausedQueue, &cairnq.PauseOptions{Reason: "fault suite"}); err != nil {
		t.Fatal(err)
	}
	procs.await("every worker process to see the pause", alive, everyChild("paused "+PausedQueue))
	submit(PausedQueue, 50)
	submit(OpenQueue, 50)
	procs.await("the open queue's tasks to run beside the paused queue", alive, succeeded(OpenQueue, 50))
	st, err := c.Stats(ctx, PausedQueue)
	if err != nil {
		t.Fatal(err)
	}
	if got := st[PausedQueue]; got.Queued != 50 || got.Succeeded != 10 || got.Running != 0 {
		t.Fatalf("paused queue = %+v once the open queue's 50 tasks ran, want 50 queued and the 10 from before the pause succeeded", got)
	}
	if _, err := c.ResumeQueue(ctx, PausedQueue); err != nil {
		t.Fatal(err)
	}
	procs.await("every worker process to see the resume", alive, everyChild("resumed "+PausedQueue))
	procs.await("the paused queue's tasks to run once resumed", alive, succeeded(PausedQueue, 60))
	procs.stopAll(stopPath, alive)
}
