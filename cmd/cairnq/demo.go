package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

const demoHelp = `Submits --n sample tasks across two names and two queues to a fresh
SQLite file (some fail and retry, one always fails, one is canceled, one
name is delivered in batches), runs a worker on them in this process with
a live progress line, and prints the stats table and the throughput. The
file is replaced if it exists; the demo runs on SQLite only and ignores
$CAIRNQ_DB and $DATABASE_URL.`

// cmdDemo is the main job on the embedded default: it submits sample tasks
// to a fresh SQLite file, runs a worker on them in this process with a live
// progress line, and prints the stats table and the throughput.
func cmdDemo(ctx context.Context, e *env, args []string) error {
	out := e.out
	fs := e.flags()
	db := fs.String("db", "cairnq-demo.db", "SQLite `file` to create (replaced if it exists)")
	n := fs.Int("n", 300, "tasks to submit")
	conc := fs.Int("concurrency", 8, "handler calls run at once")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if *n < 2 || *conc < 1 {
		return e.usageError("--n must be >= 2 and --concurrency >= 1")
	}
	if isPostgres(*db) {
		return e.usageError("the demo runs on a SQLite file only")
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(*db + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	c, err := cairnq.Open(ctx, *db, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	abs, _ := filepath.Abs(*db)
	fmt.Fprintf(out, "cairnq demo: %d tasks on %s, concurrency %d\n", *n, abs, *conc)

	w, err := demoWorker(c, *conc)
	if err != nil {
		return err
	}
	ids, err := demoSubmit(ctx, c, *n)
	if err != nil {
		return err
	}

	start := time.Now()
	runCtx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(runCtx) }()

	err = watchProgress(ctx, c, out, isTerminal(out))
	elapsed := time.Since(start)
	stopWorker()
	if werr := <-runErr; err == nil {
		err = werr
	}
	if err != nil {
		return err
	}

	stats, err := c.Stats(ctx, "")
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	printStats(out, stats)
	fmt.Fprintf(out, "\n%d tasks settled in %v: %.0f tasks/s (concurrency %d)\n",
		len(ids), elapsed.Round(time.Millisecond), float64(len(ids))/elapsed.Seconds(), *conc)
	return nil
}

// demoWorker registers the demo's handlers: "render" fails on the first
// attempt of every tenth task and succeeds on the retry, "flaky" always
// fails, "embed" is delivered in batches of 16.
func demoWorker(c *cairnq.Client, conc int) (*cairnq.Worker, error) {
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{
		Queues:       []string{"default", "gpu"},
		Concurrency:  conc,
		RetryBackoff: 20 * time.Millisecond,
		PollInterval: 50 * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	type page struct{ N int }
	errs := []error{
		w.Handle("render", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			var p page
			if err := tc.Decode(&p); err != nil {
				return nil, err
			}
			if p.N%10 == 0 && tc.Attempt() == 1 {
				return nil, fmt.Errorf("page %d: renderer busy, try again", p.N)
			}
			return map[string]int{"page": p.N, "words": 100 + p.N%50}, nil
		}, nil),
		w.Handle("flaky", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			return nil, &cairnq.TaskError{Code: "bad_input", Message: "this task can never succeed"}
		}, nil),
		w.HandleBatch("embed", 16, func(ctx context.Context, tcs []*cairnq.TaskContext) (map[string]any, error) {
			out := make(map[string]any, len(tcs))
			for _, tc := range tcs {
				out[tc.ID()] = map[string]int{"dims": 8, "batch": len(tcs)}
			}
			return out, nil
		}, nil),
	}
	return w, errors.Join(errs...)
}

// demoSubmit submits n tasks across two names and two queues, plus one
// that always fails and one canceled before it could run.
func demoSubmit(ctx context.Context, c *cairnq.Client, n int) ([]string, error) {
	var ids []string
	for i := range n - 2 {
		name, queue := "render", "default"
		if i%3 == 0 {
			name, queue = "embed", "gpu"
		}
		t, err := c.Submit(ctx, name, map[string]int{"N": i}, &cairnq.SubmitOptions{Queue: queue})
		if err != nil {
			return nil, err
		}
		ids = append(ids, t.ID)
	}
	flaky, err := c.Submit(ctx, "flaky", nil, nil)
	if err != nil {
		return nil, err
	}
	late, err := c.Submit(ctx, "render", map[string]int{"N": -1}, &cairnq.SubmitOptions{Delay: time.Hour})
	if err != nil {
		return nil, err
	}
	if _, err := c.Cancel(ctx, late.ID); err != nil {
		return nil, err
	}
	return append(ids, flaky.ID, late.ID), nil
}

// watchProgress reports until no task is queued or running: one line
// rewritten in place on a terminal, a plain line a second otherwise.
func watchProgress(ctx context.Context, c *cairnq.Client, out io.Writer, tty bool) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastPlain := time.Now()
	for {
		stats, err := c.Stats(ctx, "")
		if err != nil {
			return err
		}
		var sum cairnq.StatusCounts
		for _, s := range stats {
			sum.Queued += s.Queued
			sum.Running += s.Running
			sum.Succeeded += s.Succeeded
			sum.Failed += s.Failed
			sum.Canceled += s.Canceled
		}
		line := fmt.Sprintf("queued %d  running %d  succeeded %d  failed %d  canceled %d",
			sum.Queued, sum.Running, sum.Succeeded, sum.Failed, sum.Canceled)
		done := sum.Queued == 0 && sum.Running == 0
		switch {
		case tty:
			fmt.Fprintf(out, "\r\033[K%s", line)
		case done || time.Since(lastPlain) >= time.Second:
			fmt.Fprintln(out, line)
			lastPlain = time.Now()
		}
		if done {
			if tty {
				fmt.Fprintln(out)
			}
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// isTerminal reports whether out is a character device (a terminal).
func isTerminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
