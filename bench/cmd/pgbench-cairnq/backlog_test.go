package main

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/bench/internal/pgadmin"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

func testServer(t *testing.T) *server {
	t.Helper()
	srv, err := connectServer(context.Background(), pgtest.AdminDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func freshDB(t *testing.T, srv *server, label string) *pgadmin.Database {
	t.Helper()
	db, err := srv.FreshDatabase(context.Background(), label)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Drop)
	return db
}

// rowsByStatus reads table's rows as JSON objects, keyed by the value of
// column status.
func rowsByStatus(t *testing.T, dsn, table, status string) map[string][]map[string]any {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT to_jsonb(t)::text FROM "+table+" AS t ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]map[string]any{}
	for _, s := range texts {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		k, _ := m[status].(string)
		out[k] = append(out[k], m)
	}
	return out
}

// sameShape fails unless got has want's columns, each NULL where want's
// is, of the same JSON type, and equal unless the column is in vary.
func sameShape(t *testing.T, what string, want, got map[string]any, vary map[string]bool) {
	t.Helper()
	if len(want) != len(got) {
		t.Errorf("%s: %d columns, want %d", what, len(got), len(want))
	}
	for col, w := range want {
		g, ok := got[col]
		switch {
		case !ok:
			t.Errorf("%s: no column %s", what, col)
		case (w == nil) != (g == nil):
			t.Errorf("%s: %s = %v, want %v", what, col, g, w)
		case vary[col]:
			wj, _ := json.Marshal(w)
			gj, _ := json.Marshal(g)
			if (wj[0] == '"') != (gj[0] == '"') {
				t.Errorf("%s: %s = %s, want the type of %s", what, col, gj, wj)
			}
		default:
			wj, _ := json.Marshal(w)
			gj, _ := json.Marshal(g)
			if string(wj) != string(gj) {
				t.Errorf("%s: %s = %s, want %s", what, col, gj, wj)
			}
		}
	}
}

var taskID = regexp.MustCompile(`^task_[0-9A-HJKMNP-TV-Z]{26}$`)

// TestBacklogRowsMatchCairnq compares the fill's rows with what Submit
// writes and what a worker's no-op completion leaves.
func TestBacklogRowsMatchCairnq(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testServer(t)
	cfg := &config{srv: srv, pool: 4}
	a, err := findAdapter("pgx")
	if err != nil {
		t.Fatal(err)
	}

	real := freshDB(t, srv, "shape_cq_real")
	c, closeC, err := openClient(ctx, cfg, a, real.DSN, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeC()
	first, err := c.Submit(ctx, noopName, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The queued row is submitted before the worker starts, due in an
	// hour (run_at_ms varies anyway): a claim the worker's stop canceled
	// can still land on the server after Run returns, and took a task
	// submitted after it (once in 60 runs under load).
	if _, err := c.Submit(ctx, noopName, nil, &cairnq.SubmitOptions{Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Concurrency: 1, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Handle(noopName, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return nil, nil }, nil)
	wctx, stop := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(wctx) }()
	for {
		task, err := c.Get(ctx, first.ID)
		if err != nil {
			t.Fatal(err)
		}
		if task.Status == cairnq.StatusSucceeded {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	if err := <-runDone; err != nil {
		t.Fatal(err)
	}

	filled := freshDB(t, srv, "shape_cq_fill")
	if err := fillCairnq(ctx, cfg, filled, backlogShape{queued: 3, finished: 2}); err != nil {
		t.Fatal(err)
	}
	want := rowsByStatus(t, real.DSN, "cairnq_tasks", "status")
	got := rowsByStatus(t, filled.DSN, "cairnq_tasks", "status")
	if len(got["queued"]) != 3 || len(got["succeeded"]) != 2 {
		t.Fatalf("filled %d queued and %d succeeded, want 3 and 2", len(got["queued"]), len(got["succeeded"]))
	}
	if len(want["queued"]) == 0 || len(want["succeeded"]) == 0 {
		t.Fatalf("the worker left %d queued and %d succeeded: %v", len(want["queued"]), len(want["succeeded"]), want)
	}
	vary := map[string]bool{"id": true, "root_id": true, "run_at_ms": true, "created_at_ms": true, "updated_at_ms": true, "completed_at_ms": true, "worker_id": true}
	for _, status := range []string{"queued", "succeeded"} {
		for _, g := range got[status] {
			sameShape(t, status, want[status][0], g, vary)
			if id, _ := g["id"].(string); !taskID.MatchString(id) || g["root_id"] != id {
				t.Errorf("%s: id %v, root_id %v", status, g["id"], g["root_id"])
			}
		}
	}
}

// TestBacklogRowsMatchRiver compares the fill's rows with what River's
// InsertMany writes and what its completer leaves.
func TestBacklogRowsMatchRiver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testServer(t)
	cfg := &config{srv: srv, pool: 4}

	real := freshDB(t, srv, "shape_river_real")
	if err := riverSetup(ctx, cfg, real, 2); err != nil {
		t.Fatal(err)
	}
	pool, err := riverPool(ctx, real.DSN, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// Run one of the two jobs to completion.
	if _, err := pool.Exec(ctx, "UPDATE river_job SET scheduled_at = now() + interval '1 hour' WHERE id = (SELECT max(id) FROM river_job)"); err != nil {
		t.Fatal(err)
	}
	w := &noopWorker{total: 1, done: make(chan struct{})}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: quietLogger(), Workers: workers,
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1}}, FetchCooldown: time.Millisecond, FetchPollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-w.done
	for {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := client.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE river_job SET scheduled_at = created_at WHERE state = 'available'"); err != nil {
		t.Fatal(err)
	}

	filled := freshDB(t, srv, "shape_river_fill")
	if err := fillRiver(ctx, cfg, filled, backlogShape{queued: 3, finished: 2}); err != nil {
		t.Fatal(err)
	}
	want := rowsByStatus(t, real.DSN, "river_job", "state")
	got := rowsByStatus(t, filled.DSN, "river_job", "state")
	if len(got["available"]) != 3 || len(got["completed"]) != 2 {
		t.Fatalf("filled %d available and %d completed, want 3 and 2", len(got["available"]), len(got["completed"]))
	}
	// priority differs on purpose: the backlog sits one below the
	// trickle's fresh jobs, which take River's default (and highest), 1.
	vary := map[string]bool{"id": true, "created_at": true, "scheduled_at": true, "attempted_at": true, "finalized_at": true, "attempted_by": true, "priority": true}
	for _, state := range []string{"available", "completed"} {
		for _, g := range got[state] {
			sameShape(t, state, want[state][0], g, vary)
		}
	}
}

// TestBacklogDrains runs the whole benchmark on small backlogs of both
// shapes: each run must drain its share and return.
func TestBacklogDrains(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	cfg := &config{srv: srv, pool: 8, concurrency: 8, runs: 1, timeout: time.Minute,
		riverFetchCooldown: time.Millisecond, riverFetchPoll: 10 * time.Millisecond}
	bc := &backlogConfig{shapes: []backlogShape{{queued: 400}, {queued: 300, finished: 1000}}, drain: 200, warm: 50, gap: time.Millisecond}
	rep := &report{cfg: cfg}
	benchBacklog(context.Background(), cfg, bc, rep)
	for _, f := range rep.fails {
		t.Errorf("%s: %v", f.what, f.err)
	}
}
