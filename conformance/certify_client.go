package conformance

// The checks run through a cairnq Client on the executor: closing the
// store leaves the application's pool alone (store_close_keeps_app_pool),
// concurrent submits each get their own row (concurrent_submits), and a
// worker runs tasks to their end (worker_run).

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/protocol"
)

// storeCloseKeepsAppPool: closing cairnq leaves the application's pool
// usable, whether or not the store owned the executor.
func (s *suite) storeCloseKeepsAppPool(r reporter) {
	e := s.setupOpen(r)
	owned := false // a store took the executor over and closes it
	var clients []*cairnq.Client
	r.test().Cleanup(func() {
		for _, c := range clients {
			c.Close()
		}
		if !owned {
			e.ex.Close()
		}
	})
	alive := func(when string) {
		r.Helper()
		if s.f.AppPoolAlive == nil {
			return
		}
		if err := s.f.AppPoolAlive(e.ctx, e.ex); err != nil {
			r.Errorf("after %s, the application's own pool no longer works: %v. Fix: Close (and Listen's stop) must release only what the executor itself opened (its listeners, a pool it made from a DSN), never a pool the application handed in", when, err)
		}
	}
	c, err := cairnq.OpenPostgres(e.ctx, e.ex, nil)
	if err != nil {
		r.Fatalf("cairnq.OpenPostgres failed: %v", err)
	}
	clients = append(clients, c)
	if _, err := c.Submit(e.ctx, "certify.close", nil, nil); err != nil {
		r.Fatalf("Submit failed: %v", err)
	}
	if err := c.Close(); err != nil {
		r.Errorf("closing a client on the executor failed: %v", err)
	}
	if _, err := e.ex.Query(e.ctx, "SELECT 1 AS x"); err != nil {
		r.Errorf("after a store on the executor closed, a statement on the executor failed: %v. Fix: Listen's stop must end only the subscription, never close the pool or the executor", err)
	}
	alive("a store on the executor closed")

	c, err = cairnq.OpenPostgres(e.ctx, e.ex, &cairnq.PostgresOptions{CloseExecutor: true})
	if err != nil {
		r.Fatalf("cairnq.OpenPostgres (CloseExecutor) failed: %v", err)
	}
	owned = true
	clients = append(clients, c)
	if err := c.Close(); err != nil {
		r.Errorf("closing a client that owns the executor failed: %v. Fix: Close of an executor over the application's pool has nothing of the pool to release and should return nil", err)
	}
	if s.f.AppPoolAlive == nil {
		r.Logf("Factory.AppPoolAlive is not set, so whether Executor.Close leaves the application's pool open was not checked")
		return
	}
	alive("a store that owned the executor closed it (Executor.Close)")
}

// concurrentSubmits submits from many goroutines at once, which the store
// groups into shared inserts (insert_many, text[] parameters) while one is
// in flight: each caller must get back its own task with every option it
// gave, and the database must hold exactly those tasks. Whether submits
// meet in one group depends on timing, and the store falls back to one
// insert per submit when the server refuses a group, so insert_many is
// also run directly.
func (s *suite) concurrentSubmits(r reporter) {
	e := s.setup(r)
	c := s.client(r, e)
	const n = 40
	type outcome struct {
		task *cairnq.Task
		err  error
	}
	opts := func(i int) *cairnq.SubmitOptions {
		o := &cairnq.SubmitOptions{Queue: fmt.Sprintf("certify-%d", i%3), Priority: i - n/2, MaxAttempts: 1 + i%5,
			Delay: time.Duration(i%2) * time.Hour, Metadata: map[string]any{"i": i}}
		if i%4 == 0 {
			o.ParentID, o.RootID, o.CorrelationID = "task_parent", "task_root", fmt.Sprintf("corr \"%d\"", i)
		}
		return o
	}
	payload := func(i int) map[string]any { return map[string]any{"i": i, "s": "naïve \"q\" \\ {,} NULL"} }
	out := make([]outcome, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			t, err := c.Submit(e.ctx, fmt.Sprintf("certify.concurrent-%d", i), payload(i), opts(i))
			out[i] = outcome{t, err}
		})
	}
	close(start)
	wg.Wait()
	seen := map[string]bool{}
	for i, o := range out {
		if o.err != nil {
			r.Fatalf("submit %d of %d concurrent ones failed: %v", i, n, o.err)
		}
		if seen[o.task.ID] {
			r.Fatalf("two concurrent submits got the same task %s: each caller must get its own row back", o.task.ID)
		}
		seen[o.task.ID] = true
		got, err := c.Get(e.ctx, o.task.ID)
		if err != nil {
			r.Fatalf("Get(%s): %v", o.task.ID, err)
		}
		want, root := opts(i), opts(i).RootID
		if root == "" {
			root = got.ID
		}
		var p map[string]any
		_ = json.Unmarshal(got.Payload, &p)
		if got.Name != fmt.Sprintf("certify.concurrent-%d", i) || got.Queue != want.Queue || got.Priority != want.Priority ||
			got.MaxAttempts != want.MaxAttempts || got.ParentID != want.ParentID || got.RootID != root ||
			got.CorrelationID != want.CorrelationID || p["s"] != payload(i)["s"] || p["i"] != float64(i) ||
			(got.RunAt.Sub(got.CreatedAt)-want.Delay).Abs() > time.Minute || got.Status != cairnq.StatusQueued ||
			o.task.Name != got.Name || o.task.Queue != got.Queue {
			r.Errorf("concurrent submit %d: Submit returned %+v, Get reads %+v; want every option it was given", i, o.task, got)
		}
	}
	if total := count(r, e.ctx, e.ex, "cairnq_tasks"); total != n {
		r.Errorf("the database holds %d tasks after %d concurrent submits; want exactly %d", total, n, n)
	}

	st := protocol.Statements(protocol.Postgres).Get("insert_many")
	args, err := st.Bind(protocol.Args{
		"each_id": `{"task_m1","task_m2"}`, "each_name": `{"certify.many","certify.many"}`,
		"each_queue": `{"certify","certify"}`, "each_payload": `{"{\"s\": \"a \\\"q\\\" b\"}","[]"}`,
		"each_metadata": `{"{}","{\"k\": 1}"}`, "each_max_attempts": `{"2","3"}`, "each_priority": `{"-1","5"}`,
		"each_delay_ms": `{"0","60000"}`, "each_parent_id": `{NULL,"task_m1"}`, "each_root_id": `{"task_m1","task_m1"}`,
		"each_correlation_id": `{NULL,"NULL"}`,
	})
	if err != nil {
		r.Fatalf("binding insert_many: %v", err)
	}
	rows, err := e.ex.Query(e.ctx, st.SQL, args...)
	if err != nil {
		r.Fatalf("insert_many (two rows, text[] parameters) failed: %v. Fix: bind string arguments as text; see params_bind", err)
	}
	if len(rows) != 2 {
		r.Fatalf("insert_many returned %d rows, want 2", len(rows))
	}
	for _, id := range []string{"task_m1", "task_m2"} {
		got, err := c.Get(e.ctx, id)
		if err != nil {
			r.Fatalf("Get(%s) after insert_many: %v", id, err)
		}
		var p any
		_ = json.Unmarshal(got.Payload, &p)
		ok := got.Name == "certify.many" && got.Queue == "certify" && got.RootID == "task_m1"
		if id == "task_m1" {
			ok = ok && got.Priority == -1 && got.MaxAttempts == 2 && got.ParentID == "" && got.CorrelationID == "" &&
				fmt.Sprint(p) == `map[s:a "q" b]`
		} else {
			ok = ok && got.Priority == 5 && got.MaxAttempts == 3 && got.ParentID == "task_m1" && got.CorrelationID == "NULL" &&
				string(got.Metadata) != "{}" && got.RunAt.Sub(got.CreatedAt) > 59*time.Second
		}
		if !ok {
			r.Errorf("insert_many wrote %+v (payload %v); want every element of the parallel arrays in its column", got, p)
		}
	}
}

// workerRun: a worker on the executor runs a handful of tasks to their
// end, one failing on purpose, and stops cleanly.
func (s *suite) workerRun(r reporter) {
	e := s.setup(r)
	c := s.client(r, e)
	var mu sync.Mutex
	var survived []string // what the worker reported through OnError
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{
		Queues: []string{"certify"}, Concurrency: 4, PollInterval: 50 * time.Millisecond,
		LeaseDuration: 10 * time.Second, ShutdownTimeout: 5 * time.Second,
		OnError: func(err error, phase cairnq.ErrorPhase, id string) {
			mu.Lock()
			defer mu.Unlock()
			survived = append(survived, fmt.Sprintf("%s error on task %q: %v", phase, id, err))
		},
	})
	if err != nil {
		r.Fatalf("NewWorker: %v", err)
	}
	err = w.Handle("certify.double", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var p struct{ N int }
		if err := tc.Decode(&p); err != nil {
			return nil, err
		}
		if p.N%4 == 3 {
			return nil, fmt.Errorf("certify: %d fails on purpose", p.N)
		}
		return map[string]int{"double": 2 * p.N}, nil
	}, nil)
	if err != nil {
		r.Fatalf("Handle: %v", err)
	}
	stopWorker := s.runWorker(e.ctx, w)
	stop := func() error { err, _ := stopWorker(); return err }
	defer func() {
		_ = stop() // a no-op once the check stopped it
		mu.Lock()
		defer mu.Unlock()
		for _, msg := range survived {
			r.Logf("the worker survived a %s", msg)
		}
	}()

	const n = 12
	ids := make([]string, n)
	for i := range n {
		t, err := c.Submit(e.ctx, "certify.double", map[string]int{"N": i}, &cairnq.SubmitOptions{Queue: "certify", MaxAttempts: 1})
		if err != nil {
			r.Fatalf("Submit: %v", err)
		}
		ids[i] = t.ID
	}
	for i, id := range ids {
		t, err := c.Wait(e.ctx, id, &cairnq.WaitOptions{Timeout: 20 * time.Second, PollInterval: 20 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond})
		if err != nil {
			r.Fatalf("waiting for task %d: %v. A worker on %s did not finish it. Fix the failing named checks first; the log shows what the worker survived", i, err, s.name)
		}
		if i%4 == 3 {
			if t.Status != cairnq.StatusFailed || t.Error == nil {
				r.Errorf("task %d, whose handler failed with one attempt allowed, ended %s with error %v; want failed with its envelope", i, t.Status, t.Error)
			}
			continue
		}
		var res struct{ Double int }
		if t.Status != cairnq.StatusSucceeded || t.DecodeResult(&res) != nil || res.Double != 2*i {
			r.Errorf("task %d ended %s with result %s; want succeeded with {\"double\": %d}", i, t.Status, t.Result, 2*i)
		}
	}
	if err := stop(); err != nil {
		r.Errorf("Worker.Run ended with %v; want nil after its context ended", err)
	}
}
