package conformance

// The global limit check (global_limit): a limited name's claims run as
// a transaction of the name's lock, the count of its running tasks
// (limit_running) and the claim, per tenant through limit_pick and
// claim_ids.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
)

// globalLimit: two workers of concurrency 4 on one name limited to 2 per
// tenant run 24 tasks of 3 tenants; no tenant ever has more than 2 calls
// at once, and every task succeeds.
func (s *suite) globalLimit(r reporter) {
	e := s.setup(r)
	c := s.client(r, e)
	var mu sync.Mutex
	running, most := map[string]int{}, map[string]int{}
	handler := func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var md struct{ Tenant string }
		if err := json.Unmarshal(tc.Metadata(), &md); err != nil {
			return nil, err
		}
		mu.Lock()
		running[md.Tenant]++
		most[md.Tenant] = max(most[md.Tenant], running[md.Tenant])
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		running[md.Tenant]--
		mu.Unlock()
		return nil, nil
	}
	runCtx, stopRun := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	defer func() {
		stopRun()
		wg.Wait()
	}()
	for i := range 2 {
		w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{
			ID: fmt.Sprintf("certify-limit-%d", i), Queues: []string{"certify"}, Concurrency: 4,
			PollInterval: 20 * time.Millisecond, LeaseDuration: 10 * time.Second, ShutdownTimeout: 5 * time.Second,
		})
		if err != nil {
			r.Fatalf("NewWorker: %v", err)
		}
		if err := w.Handle("certify.limited", handler, &cairnq.HandlerOptions{
			GlobalLimit: &cairnq.GlobalLimit{Max: 2, PerMetadataKey: "tenant"}}); err != nil {
			r.Fatalf("Handle: %v", err)
		}
		wg.Go(func() { _ = w.Run(runCtx) })
	}
	var items []cairnq.SubmitItem
	for i := range 24 {
		items = append(items, cairnq.SubmitItem{Name: "certify.limited", Options: cairnq.SubmitOptions{
			Queue: "certify", Metadata: map[string]string{"tenant": fmt.Sprintf("t%d", i%3)}}})
	}
	tasks, err := c.SubmitMany(e.ctx, items)
	if err != nil {
		r.Fatalf("SubmitMany: %v", err)
	}
	for _, t := range tasks {
		got, err := c.Wait(e.ctx, t.ID, &cairnq.WaitOptions{Timeout: 30 * time.Second, PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond})
		if err != nil || got.Status != cairnq.StatusSucceeded {
			r.Fatalf("a task under a global limit on %s: %v (%v). Fix the failing named checks first (tx_commits, worker_run)", s.name, got, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for tenant, m := range most {
		if m > 2 {
			r.Errorf("tenant %s had %d calls at once under a global limit of 2 per tenant: the limit's lock, count and claim must run in one transaction on one connection (see tx_is_one_connection)", tenant, m)
		}
	}
}
