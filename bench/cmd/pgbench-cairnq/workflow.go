package main

// --bench workflow (issue 49): what running tasks as a workflow's steps
// costs beside running them as plain tasks, the same handlers. Wide: one
// workflow whose root step adds --workflow-n - 2 no-op steps and a join
// that waits for them all; its step rate (steps / time from submit to
// the record's end) over the rate of as many plain tasks (submitted with
// SubmitMany, timed to the last one's end); then GetWorkflow on it,
// timed. Diamonds: --workflow-diamonds workflows of five steps (a, then
// b, c and d, then e), submitted from as many goroutines as the worker's
// concurrency, over five times as many plain tasks. Within each run, on
// each backend, the plain burn-down and the workflow alternate, in fresh
// databases. With --cpuprofile, each workflow measurement is profiled.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sync/atomic"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"golang.org/x/sync/errgroup"
)

// workflowConfig is --bench workflow's.
type workflowConfig struct {
	n, diamonds, concurrency int
	backends                 []string
}

func workflowFlags(c *workflowConfig) func() error {
	backends := flag.String("workflow-backends", "postgres,sqlite", "workflow: backends, comma-separated (postgres, sqlite)")
	flag.IntVar(&c.n, "workflow-n", 10_000, "workflow: the wide workflow's steps (at most 10,000, a workflow's limit)")
	flag.IntVar(&c.diamonds, "workflow-diamonds", 200, "workflow: five-step diamonds")
	flag.IntVar(&c.concurrency, "workflow-concurrency", 8, "workflow: the worker's concurrency")
	return func() error {
		c.backends = splitList(*backends)
		for _, b := range c.backends {
			if b != "postgres" && b != "sqlite" {
				return fmt.Errorf("bad --workflow-backends entry %q (postgres, sqlite)", b)
			}
		}
		if c.n < 3 || c.n > 10_000 || c.diamonds < 1 || c.concurrency < 1 {
			return errors.New("--workflow-n must be 3 to 10000, --workflow-diamonds and --workflow-concurrency >= 1")
		}
		return nil
	}
}

// The workflow bench's task names: every step and plain task is a no-op
// but the wide workflow's root, which adds the others.
const (
	wfNoop = "bench.wf_noop"
	wfFan  = "bench.wf_fan"
)

func benchWorkflow(ctx context.Context, cfg *config) {
	wc := cfg.workflow
	fmt.Printf("workflow: a wide workflow of %d steps and %d diamonds of 5, each beside as many plain tasks; worker concurrency %d\n",
		wc.n, wc.diamonds, wc.concurrency)
	rates := map[string][]float64{} // by backend/shape/kind
	for run := 1; run <= cfg.runs && ctx.Err() == nil; run++ {
		for _, backend := range wc.backends {
			for _, shape := range []string{"wide", "diamonds"} {
				steps := wc.n
				if shape == "diamonds" {
					steps = 5 * wc.diamonds
				}
				for _, kind := range []string{"plain", "workflow"} {
					took, err := workflowOnce(ctx, cfg, backend, shape, kind)
					if err != nil {
						fmt.Printf("  run %d %s %s %s: %v\n", run, backend, shape, kind, err)
						continue
					}
					rate := float64(steps) / took.Seconds()
					fmt.Printf("  run %d %-8s %-8s %-8s %8.0f steps/s (%d in %v)\n", run, backend, shape, kind, rate, steps, took.Round(time.Millisecond))
					k := backend + "/" + shape + "/" + kind
					rates[k] = append(rates[k], rate)
				}
			}
		}
	}
	fmt.Println()
	for _, backend := range wc.backends {
		for _, shape := range []string{"wide", "diamonds"} {
			wf, plain := median(rates[backend+"/"+shape+"/workflow"]), median(rates[backend+"/"+shape+"/plain"])
			if wf == 0 || plain == 0 {
				continue
			}
			fmt.Printf("workflow %s/plain = %.2fx (%s; medians of %d runs: %.0f vs %.0f steps/s)\n",
				shape, wf/plain, backend, len(rates[backend+"/"+shape+"/workflow"]), wf, plain)
		}
	}
}

// workflowOnce runs one measurement in a fresh database and returns how
// long its steps (or its plain tasks) took from the first submit to the
// last one's end.
func workflowOnce(ctx context.Context, cfg *config, backend, shape, kind string) (time.Duration, error) {
	wc := cfg.workflow
	target, cleanup, err := freshTarget(ctx, cfg, backend, "wf_"+shape)
	if err != nil {
		return 0, err
	}
	defer cleanup()
	c, closeC, err := openOn(ctx, cfg, backend, target)
	if err != nil {
		return 0, err
	}
	defer closeC()
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Concurrency: wc.concurrency, Logger: quietLogger(),
		WorkflowSweep: 100 * time.Millisecond})
	if err != nil {
		return 0, err
	}
	var ran atomic.Int64
	_ = w.Handle(wfNoop, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		ran.Add(1)
		return nil, nil
	}, nil)
	_ = w.Handle(wfFan, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		leaves := make([]cairnq.WorkflowStep, 0, wc.n-1)
		names := make([]string, 0, wc.n-2)
		for i := range wc.n - 2 {
			name := fmt.Sprint("leaf-", i)
			names = append(names, name)
			leaves = append(leaves, cairnq.WorkflowStep{Step: name, Task: wfNoop})
		}
		leaves = append(leaves, cairnq.WorkflowStep{Step: "join", Task: wfNoop, After: names})
		return nil, tc.AddSteps(leaves...)
	}, nil)
	runCtx, stopRun := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(runCtx) }()
	defer func() { stopRun(); <-stopped }()
	settle()

	if cfg.cpuprofile != "" && kind == "workflow" {
		// With --cpuprofile, each workflow measurement is profiled, into
		// FILE.BACKEND.SHAPE (the last run's).
		f, err := os.Create(cfg.cpuprofile + "." + backend + "." + shape)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return 0, err
		}
		defer pprof.StopCPUProfile()
	}
	wait := &cairnq.WaitOptions{Timeout: time.Hour, PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond}
	start := time.Now()
	switch {
	case kind == "plain":
		n := wc.n
		if shape == "diamonds" {
			n = 5 * wc.diamonds
		}
		items := make([]cairnq.SubmitItem, n)
		for i := range items {
			items[i] = cairnq.SubmitItem{Name: wfNoop}
		}
		for from := 0; from < n; from += cairnq.MaxSubmitMany {
			if _, err := c.SubmitMany(ctx, items[from:min(from+cairnq.MaxSubmitMany, n)]); err != nil {
				return 0, err
			}
		}
		for ran.Load() < int64(n) {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			time.Sleep(time.Millisecond)
		}
	case shape == "wide":
		rec, err := c.SubmitWorkflow(ctx, []cairnq.WorkflowStep{{Step: "fan", Task: wfFan}}, nil)
		if err != nil {
			return 0, err
		}
		if _, err := c.Wait(ctx, rec.ID, wait); err != nil {
			return 0, err
		}
		took := time.Since(start)
		if err := timeGetWorkflow(ctx, c, rec.ID, backend, wc.n); err != nil {
			return 0, err
		}
		return took, nil
	default:
		diamond := []cairnq.WorkflowStep{
			{Step: "a", Task: wfNoop}, {Step: "b", Task: wfNoop, After: []string{"a"}},
			{Step: "c", Task: wfNoop, After: []string{"a"}}, {Step: "d", Task: wfNoop, After: []string{"a"}},
			{Step: "e", Task: wfNoop, After: []string{"b", "c", "d"}},
		}
		// Submitted from as many goroutines as the worker's
		// concurrency, as requests of an API would: the step rate, not
		// one submitter's round trips, is what is measured.
		ids := make([]string, wc.diamonds)
		var next atomic.Int64
		g, gctx := errgroup.WithContext(ctx)
		for range wc.concurrency {
			g.Go(func() error {
				for i := int(next.Add(1) - 1); i < len(ids); i = int(next.Add(1) - 1) {
					rec, err := c.SubmitWorkflow(gctx, diamond, nil)
					if err != nil {
						return err
					}
					ids[i] = rec.ID
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return 0, err
		}
		fmt.Printf("  %d diamonds submitted in %v, %d of their steps run by then\n",
			len(ids), time.Since(start).Round(time.Millisecond), ran.Load())
		for _, id := range ids {
			if _, err := c.Wait(ctx, id, wait); err != nil {
				return 0, err
			}
		}
	}
	return time.Since(start), nil
}

// timeGetWorkflow prints how long GetWorkflow takes on the wide workflow
// once it has ended: the first call (which reads and parses the
// definition) and the median of five (which find it in the process's
// cache once the first has read it).
func timeGetWorkflow(ctx context.Context, c *cairnq.Client, id, backend string, steps int) error {
	var took []float64
	for range 5 {
		start := time.Now()
		wf, err := c.GetWorkflow(ctx, id)
		if err != nil {
			return err
		}
		took = append(took, float64(time.Since(start).Microseconds())/1000)
		if len(wf.Steps) != steps {
			return fmt.Errorf("GetWorkflow read %d steps, want %d", len(wf.Steps), steps)
		}
	}
	fmt.Printf("  GetWorkflow of %d steps: %.1f ms first, %.1f ms median of 5 (%s)\n", steps, took[0], median(took), backend)
	return nil
}
