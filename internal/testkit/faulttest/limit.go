package faulttest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// The global limit across processes: worker processes of one name under
// a GlobalLimit, the running tasks sampled continuously meanwhile.

const (
	// LimitedJob is the task name the limit suite's workers run.
	LimitedJob = "fault.limited"
	// roleLimited runs a worker of LimitedJob under the limit the
	// environment gives, until the stop file exists.
	roleLimited = "limited"
	// envLimit is the limit, as JSON: {"Max": 5, "PerMetadataKey": ""};
	// absent, the worker has no limit.
	envLimit = "CAIRNQ_FAULT_LIMIT"
	// limitedConc is each limited worker's concurrency.
	limitedConc = 16
	// limitedWork is how long a limited task's handler runs.
	limitedWork = 10 * time.Millisecond
)

// runLimitedChild is the limited role.
func runLimitedChild(t *testing.T, c *cairnq.Client, id string, note func(string), stop func()) {
	var opts *cairnq.HandlerOptions
	if s := os.Getenv(envLimit); s != "" {
		var l cairnq.GlobalLimit
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("%s: %v", envLimit, err)
		}
		opts = &cairnq.HandlerOptions{GlobalLimit: &l}
	}
	w := NewWorker(t, c, &cairnq.WorkerOptions{
		ID: id, Concurrency: limitedConc, PollInterval: 20 * time.Millisecond, WorkflowSweep: cairnq.NoWorkflowSweep,
		OnError: func(err error, phase cairnq.ErrorPhase, taskID string) {
			note(fmt.Sprintf("%s: phase %s, task %q: %v", id, phase, taskID, err))
		},
	})
	if err := w.Handle(LimitedJob, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		time.Sleep(limitedWork)
		return nil, nil
	}, opts); err != nil {
		t.Fatal(err)
	}
	stopWorker := StartWorker(t, w)
	stop()
	stopWorker()
}

// LimitRun is what GlobalLimitProcesses measured.
type LimitRun struct {
	// Samples counts the reads of the running tasks; MaxRunning is the
	// most running at once in any of them, per tenant ("" without one).
	Samples    int
	MaxRunning map[string]int
	// Elapsed is from the workers' start to the last task's end.
	Elapsed time.Duration
	Tasks   int
}

// Rate is the tasks per second the run finished.
func (r LimitRun) Rate() float64 { return float64(r.Tasks) / r.Elapsed.Seconds() }

// GlobalLimitProcesses runs n tasks of LimitedJob (spread over tenants,
// the metadata member "tenant", when there are any) on three worker
// processes of concurrency 16 under limit (nil: none), sampling the
// running tasks per tenant until every task has succeeded.
func GlobalLimitProcesses(t *testing.T, b Backend, n int, tenants []string, limit *cairnq.GlobalLimit) LimitRun {
	t.Helper()
	ctx := context.Background()
	dsn := b.NewDB(t)
	dir := t.TempDir()
	stopPath := filepath.Join(dir, "stop")
	c := b.Open(t, dsn)
	items := make([]cairnq.SubmitItem, n)
	for i := range items {
		items[i] = cairnq.SubmitItem{Name: LimitedJob}
		if len(tenants) > 0 {
			items[i].Options.Metadata = map[string]string{"tenant": tenants[i%len(tenants)]}
		}
	}
	if _, err := c.SubmitMany(ctx, items); err != nil {
		t.Fatal(err)
	}
	env := []string{envDSN + "=" + dsn, envStop + "=" + stopPath}
	if limit != nil {
		l, _ := json.Marshal(limit)
		env = append(env, envLimit+"="+string(l))
	}
	procs := newProcs(t, b, dir, env...)
	start := time.Now()
	var alive []*proc
	for i := range 3 {
		name := fmt.Sprintf("limited%d", i+1)
		alive = append(alive, procs.spawn(name, roleLimited, envID+"=fault-"+name))
	}
	run := LimitRun{MaxRunning: map[string]int{}, Tasks: n}
	procs.await("every limited task to succeed", alive, func() (bool, error) {
		running, err := c.List(ctx, &cairnq.ListOptions{Status: cairnq.StatusRunning, Name: LimitedJob, Limit: 3 * limitedConc})
		if err != nil {
			return false, err
		}
		run.Samples++
		per := map[string]int{}
		for _, task := range running {
			var md struct{ Tenant string }
			_ = json.Unmarshal(task.Metadata, &md)
			per[md.Tenant]++
		}
		for tenant, k := range per {
			run.MaxRunning[tenant] = max(run.MaxRunning[tenant], k)
		}
		st, err := c.Stats(ctx, cairnq.DefaultQueue)
		s := st[cairnq.DefaultQueue]
		if s.Failed+s.Canceled > 0 {
			return false, fmt.Errorf("limited tasks failed or were canceled: %+v", s)
		}
		return s.Succeeded == n, err
	})
	run.Elapsed = time.Since(start)
	procs.stopAll(stopPath, alive)
	return run
}

// GlobalLimit runs GlobalLimitProcesses three times on fresh databases:
// without a limit, under a limit of 5, and under a limit of 2 per tenant
// of four. The running tasks sampled never pass the limit (and come near
// it: the workers had the concurrency to pass it), and the throughputs are
// logged side by side. It skips with -short.
func GlobalLimit(t *testing.T, b Backend) {
	SkipInChild(t)
	if testing.Short() {
		t.Skip("starts three processes per run; skipped with -short")
	}
	const n = 400
	free := GlobalLimitProcesses(t, b, n, nil, nil)
	total := GlobalLimitProcesses(t, b, n, nil, &cairnq.GlobalLimit{Max: 5})
	tenants := []string{"acme", "globex", "initech", "umbrella"}
	per := GlobalLimitProcesses(t, b, n, tenants, &cairnq.GlobalLimit{Max: 2, PerMetadataKey: "tenant"})

	// At most the limit; and more than one at once, or the limit was
	// never tested (the samples may miss the moments at exactly 5).
	if m := total.MaxRunning[""]; m > 5 || m < 2 {
		t.Errorf("under a limit of 5, at most %d ran at once in %d samples; want 2 to 5", m, total.Samples)
	}
	reached := 0
	for _, tenant := range tenants {
		m := per.MaxRunning[tenant]
		if m > 2 {
			t.Errorf("under a limit of 2 per tenant, tenant %s had %d running at once", tenant, m)
		}
		if m == 2 {
			reached++
		}
	}
	if reached == 0 {
		t.Logf("no tenant was seen at its limit of 2 in %d samples: %v", per.Samples, per.MaxRunning)
	}
	if free.MaxRunning[""] <= 5 {
		t.Logf("without a limit at most %d ran at once: the limit's check above may not have been tested", free.MaxRunning[""])
	}
	t.Logf("%d tasks of %v on 3 processes of concurrency %d: no limit %.0f tasks/s (at most %d at once); limit 5 %.0f tasks/s (%.2fx); 2 per tenant of 4 %.0f tasks/s (%.2fx), at most %v",
		n, limitedWork, limitedConc, free.Rate(), free.MaxRunning[""], total.Rate(), total.Rate()/free.Rate(),
		per.Rate(), per.Rate()/free.Rate(), per.MaxRunning)
}
