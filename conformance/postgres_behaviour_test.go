package conformance_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqlibpq "github.com/cairnq/cairnq-go/adapters/libpq"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/cairnqtype"
	"github.com/cairnq/cairnq-go/conformance"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/cairnq/cairnq-go/internal/engine"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// runEchoWorker runs a worker on c that answers "echo" with its payload.
// Its poll is a minute long, so within a test only a notification (or
// this process's own wakeups) can start a call.
func runEchoWorker(t *testing.T, c *cairnq.Client) {
	t.Helper()
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{PollInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle("echo", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return tc.Payload(), nil }, nil)
	runWorker(t, w)
}

// Two clients on separate pools share nothing in-process, so with both
// polls set to a minute only LISTEN/NOTIFY can carry the task to the
// worker and its result back to the caller within the wait's 20 seconds.
func TestPostgresListenWakesWorkerAndCaller(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	api := pgClient(t, dsn, "")
	workerSide := pgClient(t, dsn, "")
	runEchoWorker(t, workerSide)
	slow := cairnq.WaitOptions{Timeout: 20 * time.Second, PollInterval: time.Minute, MaxPollInterval: time.Minute}
	for i := range 3 {
		got, err := api.Call(context.Background(), "echo", map[string]int{"i": i}, &cairnq.CallOptions{WaitOptions: slow})
		if err != nil {
			t.Fatalf("call %d (woken by notification or not at all): %v", i, err)
		}
		if string(got.Result) != fmt.Sprintf(`{"i": %d}`, i) && string(got.Result) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Errorf("call %d result %s", i, got.Result)
		}
	}
}

// listenerPIDs lists the backends of dsn's database whose last statement
// was a LISTEN on channel ("" for any channel).
func listenerPIDs(t *testing.T, dsn, channel string) []int32 {
	t.Helper()
	ctx := context.Background()
	conn := adminConn(t, dsn)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'listen%' || $1 || '%' AND pid <> pg_backend_pid()", channel)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// waitListeners polls until dsn has at least n LISTEN backends on channel.
func waitListeners(t *testing.T, dsn, channel string, n int) []int32 {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		pids := listenerPIDs(t, dsn, channel)
		if len(pids) >= n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d listeners on %q, want %d", len(pids), channel, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// noListener hides an executor's Listener: a client on it only polls.
type noListener struct{ executor.Executor }

// A process listens to a channel only while something in it waits on that
// channel: a worker for cairnq_queued, a waiter for cairnq_done. A worker
// process never receives the notification every settled task sends.
func TestPostgresListensOnDemand(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	workerSide := pgClient(t, dsn, "")
	if pids := listenerPIDs(t, dsn, ""); len(pids) != 0 {
		t.Fatalf("a client nobody waits on listens: %v", pids)
	}
	runEchoWorker(t, workerSide)
	waitListeners(t, dsn, "cairnq_queued", 1)

	// A submitter that cannot listen, polling for the result: the worker
	// is woken by cairnq_queued and settles without ever needing cairnq_done.
	pex, err := cairnqpgx.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	poller, err := cairnq.OpenPostgres(ctx, noListener{pex}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { poller.Close(); pex.Close() })
	fast := cairnq.WaitOptions{Timeout: 20 * time.Second, PollInterval: 5 * time.Millisecond, MaxPollInterval: 5 * time.Millisecond}
	for range 3 {
		if _, err := poller.Call(ctx, "echo", nil, &cairnq.CallOptions{WaitOptions: fast}); err != nil {
			t.Fatal(err)
		}
	}
	if pids := listenerPIDs(t, dsn, "cairnq_done"); len(pids) != 0 {
		t.Fatalf("a worker-only process listens on cairnq_done: %v", pids)
	}

	// A caller that listens starts cairnq_done for its wait, and keeps it
	// a while after.
	caller := pgClient(t, dsn, "")
	slow := cairnq.WaitOptions{Timeout: 20 * time.Second, PollInterval: time.Minute, MaxPollInterval: time.Minute}
	if _, err := caller.Call(ctx, "echo", nil, &cairnq.CallOptions{WaitOptions: slow}); err != nil {
		t.Fatalf("call woken by cairnq_done or not at all: %v", err)
	}
	if pids := listenerPIDs(t, dsn, "cairnq_done"); len(pids) != 1 {
		t.Fatalf("listeners on cairnq_done after a call: %v, want one", pids)
	}
}

func TestPostgresListenerReconnectsAfterKill(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	api := pgClient(t, dsn, "")
	workerSide := pgClient(t, dsn, "")
	runEchoWorker(t, workerSide)

	// The worker listens for queued tasks while idle; a first call makes
	// the caller listen for settlements, and that listener lingers.
	waitListeners(t, dsn, "cairnq_queued", 1)
	slow := cairnq.WaitOptions{Timeout: 20 * time.Second, PollInterval: time.Minute, MaxPollInterval: time.Minute}
	if _, err := api.Call(context.Background(), "echo", nil, &cairnq.CallOptions{WaitOptions: slow}); err != nil {
		t.Fatalf("call before the listeners were killed: %v", err)
	}
	before := waitListeners(t, dsn, "", 2)
	deadline := time.Now().Add(15 * time.Second)
	adminExec(t, dsn, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'listen%' AND pid <> pg_backend_pid()")
	// Both listeners come back on new connections.
	for {
		after := listenerPIDs(t, dsn, "")
		fresh := 0
		for _, p := range after {
			seen := false
			for _, b := range before {
				seen = seen || p == b
			}
			if !seen {
				fresh++
			}
		}
		if fresh >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listeners did not come back: before %v, now %v", before, after)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := api.Call(context.Background(), "echo", nil, &cairnq.CallOptions{WaitOptions: slow}); err != nil {
		t.Fatalf("call after the listeners were killed: %v", err)
	}
}

func TestPostgresSucceedInCommitsOrRollsBackTogether(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	adminExec(t, dsn, "CREATE TABLE rendered (task_id text PRIMARY KEY, body text)")
	c := pgClient(t, dsn, "")
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	lost := make(chan error, 1)
	w.Handle("render", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var steal bool
		tc.Decode(&steal)
		if steal { // another worker recovered the task meanwhile
			adminExec(t, dsn, "UPDATE cairnq_tasks SET worker_id = 'thief' WHERE id = $1", tc.ID())
		}
		err := tc.SucceedIn(ctx, func(ctx context.Context, s executor.Session) (any, error) {
			if _, err := s.Query(ctx, "INSERT INTO rendered (task_id, body) VALUES ($1, 'pages')", tc.ID()); err != nil {
				return nil, err
			}
			return map[string]string{"stored": tc.ID()}, nil
		})
		if steal {
			lost <- err
		}
		return nil, err
	}, nil)
	runWorker(t, w)
	ctx := context.Background()
	ok, _ := c.Submit(ctx, "render", false, nil)
	stolen, _ := c.Submit(ctx, "render", true, nil)

	got, err := c.Wait(ctx, ok.ID, &cairnq.WaitOptions{Timeout: 20 * time.Second})
	if err != nil || got.Status != cairnq.StatusSucceeded || string(got.Result) == "" {
		t.Fatalf("SucceedIn: %v %+v", err, got)
	}
	if err := <-lost; !errors.Is(err, cairnq.ErrLostLease) {
		t.Errorf("SucceedIn after losing the lease: %v", err)
	}
	conn := adminConn(t, dsn)
	defer conn.Close(ctx)
	var ids []string
	rows, _ := conn.Query(ctx, "SELECT task_id FROM rendered ORDER BY task_id")
	ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(ids) != 1 || ids[0] != ok.ID {
		t.Errorf("rendered rows %v (%v), want only %s: a lost lease must roll the handler's rows back", ids, err, ok.ID)
	}
	if s, _ := c.Get(ctx, stolen.ID); s.Status != cairnq.StatusRunning || s.WorkerID != "thief" {
		t.Errorf("stolen task: %s by %s", s.Status, s.WorkerID)
	}
}

func TestPostgresSubmitInAppTransaction(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	c := pgClient(t, dsn, "")
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := c.SubmitTx(ctx, cairnqpgx.TxSession(tx, nil), "x", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, gone.ID); !errors.Is(err, cairnq.ErrNotFound) {
		t.Errorf("uncommitted task visible outside the transaction: %v", err)
	}
	tx.Rollback(ctx)
	if _, err := c.Get(ctx, gone.ID); !errors.Is(err, cairnq.ErrNotFound) {
		t.Errorf("task of a rolled-back transaction: %v", err)
	}

	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := c.SubmitTx(ctx, cairnqpgx.TxSession(tx, nil), "x", nil, &cairnq.SubmitOptions{Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := c.GetByKey(ctx, "k"); err != nil || got.ID != kept.ID {
		t.Errorf("committed keyed task: %v %v", got, err)
	}
}

func TestPostgresConcurrentMigrationAndKeyedSubmits(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	clients := make([]*cairnq.Client, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ex, err := cairnqpgx.Open(ctx, dsn, nil)
			if err != nil {
				errs[i] = err
				return
			}
			clients[i], errs[i] = cairnq.OpenPostgres(ctx, ex, &cairnq.PostgresOptions{CloseExecutor: true})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("cold start %d: %v", i, err)
		}
		t.Cleanup(func() { clients[i].Close() })
	}
	conn := adminConn(t, dsn)
	defer conn.Close(ctx)
	var n, distinct int
	if err := conn.QueryRow(ctx, "SELECT count(*), count(DISTINCT name) FROM cairnq_migrations").Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if n != 10 || distinct != 10 {
		t.Errorf("ledger: %d rows, %d names; want 10 each", n, distinct)
	}

	ids := make([]string, 20)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			task, err := clients[i%2].Submit(ctx, "x", map[string]int{"i": i}, &cairnq.SubmitOptions{Key: "same"})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = task.ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("20 concurrent keyed submits returned different tasks: %v", ids)
		}
	}
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM cairnq_tasks").Scan(&n); err != nil || n != 1 {
		t.Errorf("%d tasks after 20 keyed submits (%v), want 1", n, err)
	}
}

func TestPostgresSchemaOption(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx := context.Background()

	// The DSN path creates the schema and points every connection at it.
	a := pgClient(t, dsn, "tenant_a")
	if _, err := a.Submit(ctx, "x", nil, nil); err != nil {
		t.Fatal(err)
	}
	conn := adminConn(t, dsn)
	defer conn.Close(ctx)
	var where string
	if err := conn.QueryRow(ctx, "SELECT table_schema FROM information_schema.tables WHERE table_name = 'cairnq_tasks'").Scan(&where); err != nil || where != "tenant_a" {
		t.Fatalf("tables live in %q (%v), want tenant_a", where, err)
	}

	// An executor the application built only gets asserted: its pool
	// resolves to public, not tenant_a.
	appEx, err := cairnqpgx.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer appEx.Close()
	if _, err := cairnq.OpenPostgres(ctx, appEx, &cairnq.PostgresOptions{Schema: "tenant_a"}); !errors.Is(err, cairnq.ErrSchemaMismatch) {
		t.Errorf("injected executor resolving elsewhere: %v, want ErrSchemaMismatch", err)
	}
	// A process that lands in public without naming a schema would start a
	// second, invisible installation: refused.
	if _, err := cairnq.OpenPostgres(ctx, appEx, nil); !errors.Is(err, cairnq.ErrSchemaMismatch) {
		t.Errorf("split deployment: %v, want ErrSchemaMismatch", err)
	}
	// Naming the schema confirms a deliberate second installation.
	b := pgClient(t, dsn, "tenant_b")
	if stats, err := b.Stats(ctx, ""); err != nil || len(stats) != 0 {
		t.Errorf("tenant_b sees %v (%v), want its own empty installation", stats, err)
	}
	if _, err := cairnqpgx.Open(ctx, dsn, &cairnqpgx.Options{Schema: "bad; drop"}); err == nil {
		t.Error("an invalid schema name was accepted")
	}
}

func TestPostgresNewerProtocolRefused(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	pgClient(t, dsn, "")
	adminExec(t, dsn, "UPDATE cairnq_meta SET value = '2' WHERE key = 'protocol_version'")
	ex, err := cairnqpgx.Open(context.Background(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	_, err = cairnq.OpenPostgres(context.Background(), ex, nil)
	var pv *cairnq.ProtocolVersionMismatchError
	if !errors.As(err, &pv) || pv.Found != 2 {
		t.Errorf("protocol 2 database: %v", err)
	}
}

// Completions arriving together share one statement on Postgres; a task
// whose lease is gone fails only its own caller.
func TestPostgresGroupedCompletionsAreIndependent(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	c := pgClient(t, dsn, "")
	ctx := context.Background()
	st := conformance.StoreOf(c)
	for i := range 30 {
		if _, err := c.Submit(ctx, "x", map[string]int{"i": i}, nil); err != nil {
			t.Fatal(err)
		}
	}
	claimed, err := st.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w1", Limit: 30})
	if err != nil || len(claimed) != 30 {
		t.Fatalf("claim: %d %v", len(claimed), err)
	}
	stolen := claimed[7].ID
	adminExec(t, dsn, "UPDATE cairnq_tasks SET worker_id = 'thief' WHERE id = $1", stolen)
	canceled := claimed[3].ID
	if _, err := c.Cancel(ctx, canceled); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(claimed))
	refs := make([]cairnqtype.TaskRef, len(claimed))
	for i, task := range claimed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			refs[i], errs[i] = st.Complete(ctx, task.ID, "w1", map[string]int{"n": i})
		}()
	}
	wg.Wait()
	for i, task := range claimed {
		got, _ := c.Get(ctx, task.ID)
		switch task.ID {
		case stolen:
			if !errors.Is(errs[i], cairnq.ErrLostLease) || got.Status != cairnq.StatusRunning {
				t.Errorf("stolen task: %v, %s", errs[i], got.Status)
			}
		case canceled:
			if errs[i] != nil || got.Status != cairnq.StatusCanceled || got.Result != nil || refs[i] != (cairnqtype.TaskRef{ID: task.ID, Status: cairnqtype.StatusCanceled}) {
				t.Errorf("canceled task: %v, %s, %s, answered %+v", errs[i], got.Status, got.Result, refs[i])
			}
		default:
			var res struct{ N int }
			got.DecodeResult(&res)
			if errs[i] != nil || got.Status != cairnq.StatusSucceeded || res.N != i || !got.LeaseUntil.IsZero() {
				t.Errorf("task %d: %v, %s, %s", i, errs[i], got.Status, got.Result)
			}
			if refs[i] != (cairnqtype.TaskRef{ID: task.ID, Status: cairnqtype.StatusSucceeded}) {
				t.Errorf("task %d: Complete answered %+v", i, refs[i])
			}
		}
	}
	if _, err := st.Complete(ctx, claimed[0].ID, "w1", nil); !errors.Is(err, cairnq.ErrLostLease) {
		t.Errorf("second completion: %v", err)
	}
}

// The typed forms hand the handler its own driver's transaction.
func TestPostgresTypedSucceedInPerAdapter(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	adminExec(t, dsn, "CREATE TABLE outbox (task_id text PRIMARY KEY, driver text)")
	ctx := context.Background()
	pgxClient := pgClient(t, dsn, "")
	lpqEx, err := cairnqlibpq.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	lpqClient, err := cairnq.OpenPostgres(ctx, lpqEx, &cairnq.PostgresOptions{CloseExecutor: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lpqClient.Close() })

	wPgx, _ := cairnq.NewWorker(pgxClient, &cairnq.WorkerOptions{Queues: []string{"pgx"}, PollInterval: 20 * time.Millisecond})
	wPgx.Handle("write", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return nil, cairnqpgx.SucceedIn(ctx, tc, func(ctx context.Context, tx pgx.Tx) (any, error) {
			_, err := tx.Exec(ctx, "INSERT INTO outbox VALUES ($1, 'pgx')", tc.ID())
			return "pgx", err
		})
	}, nil)
	wLpq, _ := cairnq.NewWorker(lpqClient, &cairnq.WorkerOptions{Queues: []string{"libpq"}, PollInterval: 20 * time.Millisecond})
	wLpq.Handle("write", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		return nil, cairnqlibpq.SucceedIn(ctx, tc, func(ctx context.Context, tx *sql.Tx) (any, error) {
			_, err := tx.ExecContext(ctx, "INSERT INTO outbox VALUES ($1, 'libpq')", tc.ID())
			return "libpq", err
		})
	}, nil)
	runWorker(t, wPgx)
	runWorker(t, wLpq)
	for _, q := range []string{"pgx", "libpq"} {
		task, err := pgxClient.Submit(ctx, "write", nil, &cairnq.SubmitOptions{Queue: q})
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgxClient.Wait(ctx, task.ID, &cairnq.WaitOptions{Timeout: 20 * time.Second})
		var res string
		if err == nil {
			err = got.DecodeResult(&res)
		}
		if err != nil || got.Status != cairnq.StatusSucceeded || res != q {
			t.Errorf("%s: %v %+v", q, err, got)
		}
		var driver string
		conn, _ := pgx.Connect(ctx, dsn)
		err = conn.QueryRow(ctx, "SELECT driver FROM outbox WHERE task_id = $1", task.ID).Scan(&driver)
		conn.Close(ctx)
		if err != nil || driver != q {
			t.Errorf("%s: outbox row %q (%v)", q, driver, err)
		}
	}
}

// Claims commit asynchronously by setting synchronous_commit for their own
// transaction only: the application's connection keeps its setting, on
// the single-statement path and in a shared claim transaction alike.
func TestPostgresClaimsLeaveSessionSettingsAlone(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1 // every statement below runs on the same connection
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "SET synchronous_commit = remote_apply")
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c, err := cairnq.OpenPostgres(ctx, cairnqpgx.New(pool, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for i := range 3 {
		if _, err := c.Submit(ctx, []string{"a", "b", "a"}[i], nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	setting := func() string {
		var v string
		if err := pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	st := conformance.StoreOf(c)
	got, err := st.Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"default"}, Names: []string{"a"}, WorkerID: "w"})
	if err != nil || len(got) != 1 {
		t.Fatalf("single-statement claim: %d %v", len(got), err)
	}
	if v := setting(); v != "remote_apply" {
		t.Errorf("after a single-statement claim the connection's synchronous_commit is %q", v)
	}
	// The shared claim transaction of a worker with several names.
	claimed, err := st.Claims(ctx, engine.ClaimRequest{ClaimParams: cairnqtype.ClaimParams{Queues: []string{"default"}, WorkerID: "w"}, Calls: 2,
		Draws: []engine.Draw{{Names: []string{"a"}, Batch: 1, Calls: 1, Tasks: -1}, {Names: []string{"b"}, Batch: 1, Calls: 1, Tasks: -1}}})
	drawn := 0
	for _, ts := range claimed.Tasks {
		drawn += len(ts)
	}
	if err != nil || drawn != 2 {
		t.Fatalf("claim transaction: drew %d, %v", drawn, err)
	}
	if v := setting(); v != "remote_apply" {
		t.Errorf("after a claim transaction the connection's synchronous_commit is %q", v)
	}
}

// A Watch in one process sees another process's submits (filtered by
// queue) and settlements through LISTEN: the two clients share nothing
// in-process and the watch's poll is a minute long. After stop, nothing
// more is delivered.
func TestPostgresWatchSeesAnotherProcess(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	watcher := pgClient(t, dsn, "")
	other := pgClient(t, dsn, "")
	var mu sync.Mutex
	var got []cairnq.Signal
	stop := watcher.Watch(ctx, &cairnq.WatchOptions{Queues: []string{"watched"}, PollInterval: time.Minute}, func(s cairnq.Signal) {
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
	})
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	seen := func(want cairnq.Signal) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range got {
			if s == want {
				return true
			}
		}
		return false
	}
	waitFor := func(what string, want cairnq.Signal) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !seen(want) {
			if time.Now().After(deadline) {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("no %s signal (woken by notification or not at all); got %v", what, got)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	if _, err := other.Submit(ctx, "x", nil, &cairnq.SubmitOptions{Queue: "ignored"}); err != nil {
		t.Fatal(err)
	}
	task, err := other.Submit(ctx, "x", nil, &cairnq.SubmitOptions{Queue: "watched"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor("queued", cairnq.Signal{Reason: "queued", Queue: "watched"})
	claimed, err := conformance.StoreOf(other).Claim(ctx, cairnqtype.ClaimParams{Queues: []string{"watched"}, WorkerID: "w"})
	if err != nil || len(claimed) != 1 {
		t.Fatal(claimed, err)
	}
	if _, err := conformance.StoreOf(other).Complete(ctx, task.ID, "w", nil); err != nil {
		t.Fatal(err)
	}
	waitFor("done", cairnq.Signal{Reason: "done", TaskID: task.ID})
	stop()
	stopped = true
	mu.Lock()
	n := len(got)
	for _, s := range got {
		if s.Reason == "queued" && s.Queue != "watched" {
			t.Errorf("a queued signal for an unwatched queue got through: %v", s)
		}
		if s.Reason == "poll" {
			t.Errorf("a poll signal within the minute: %v", s)
		}
	}
	mu.Unlock()
	// stop has returned, so fn is never called again, whatever arrives.
	if _, err := other.Submit(ctx, "x", nil, &cairnq.SubmitOptions{Queue: "watched"}); err != nil {
		t.Fatal(err)
	}
	if _, err := watcher.Submit(ctx, "x", nil, &cairnq.SubmitOptions{Queue: "watched"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Errorf("signals after stop: %v", got[n:])
	}
}
