package main

// --bench durable-kill: what each system does with the runs a process
// was running when it is killed. Two child processes (this binary again,
// --durable-child) run a handler of ten steps of 10 ms each, every
// system with its defaults; the parent starts --durable-kill-n runs,
// kills one child with SIGKILL once a quarter of them have finished, and
// times how long the survivor takes to finish them all, up to
// --durable-kill-cap.
//
// cairnq: the survivor claims a dead process's task once its lease runs
// out (WorkerOptions.LeaseDuration, 30s by default) and resumes it after
// its recorded steps. DBOS Transact: a workflow dequeued by an executor
// is recovered when that executor starts again (or by its paid
// Conductor), so the survivor never finishes it. River: a running job of
// a dead process is rescued after RescueStuckJobsAfter (an hour by
// default), and its steps run again from the top.

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/bench/internal/pgadmin"
)

// The names the kill bench's processes share.
const (
	killTask     = "bench.durable_kill" // cairnq's task, DBOS's workflow name
	killQueue    = "bench"              // DBOS's queue
	killStepTime = 10 * time.Millisecond
)

// killConfig is --bench durable-kill's.
type killConfig struct {
	n        int
	cap      time.Duration
	systems  string
	child    string // internal: run as a child of this system
	childDB  string
	childID  string
	childCnc int
}

func killFlags(c *killConfig) {
	flag.IntVar(&c.n, "durable-kill-n", 1000, "durable-kill: runs started")
	flag.DurationVar(&c.cap, "durable-kill-cap", 150*time.Second, "durable-kill: how long to wait for the survivor after the kill")
	flag.StringVar(&c.systems, "durable-kill-systems", "cairnq,dbos,river", "durable-kill: systems, in order")
	flag.StringVar(&c.child, "durable-child", "", "internal: run as one process of the durable-kill bench (cairnq, dbos, river)")
	flag.StringVar(&c.childDB, "durable-child-db", "", "internal: the durable child's database")
	flag.StringVar(&c.childID, "durable-child-id", "", "internal: the durable child's executor id")
	flag.IntVar(&c.childCnc, "durable-child-concurrency", 64, "internal: the durable child's concurrency")
}

func benchDurableKill(ctx context.Context, cfg *config) {
	k := cfg.durableKill
	fmt.Printf("durable-kill: %d runs of 10 steps of %v on two processes (concurrency %d each), one killed with SIGKILL when a quarter have finished; every system with its defaults\n",
		k.n, killStepTime, cfg.concurrency)
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "durable-kill:", err)
		return
	}
	for _, sys := range splitList(k.systems) {
		line, err := durableKillOnce(ctx, cfg, self, sys)
		if err != nil {
			fmt.Printf("durable-kill %s: %v\n", sys, err)
			continue
		}
		fmt.Println(line)
	}
}

// durableKillOnce runs the kill on one system and says how it ended.
func durableKillOnce(ctx context.Context, cfg *config, self, sys string) (string, error) {
	k := cfg.durableKill
	db, err := cfg.srv.FreshDatabase(ctx, "kill_"+sys)
	if err != nil {
		return "", err
	}
	defer db.Drop()
	if err := killPrepare(ctx, cfg, sys, db); err != nil {
		return "", err
	}
	var children []*exec.Cmd
	defer func() {
		for _, c := range children {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}()
	for i := range 2 {
		cmd := exec.CommandContext(ctx, self, "--durable-child", sys, "--durable-child-db", db.DSN,
			"--durable-child-id", fmt.Sprint("executor-", i), "--durable-child-concurrency", strconv.Itoa(cfg.concurrency))
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		cmd.Stderr = os.Stderr
		if _, err := cmd.StdinPipe(); err != nil { // held open: the child runs until it closes
			return "", err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return "", err
		}
		if err := cmd.Start(); err != nil {
			return "", err
		}
		children = append(children, cmd)
		sc := bufio.NewScanner(out)
		if !sc.Scan() || sc.Text() != "READY" {
			return "", fmt.Errorf("%s child %d did not start", sys, i)
		}
	}
	if err := killStart(ctx, cfg, sys, db.DSN); err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	done := func() (int, error) {
		var n int
		err := conn.QueryRow(ctx, killDoneQuery[sys]).Scan(&n)
		return n, err
	}
	for started := time.Now(); ; time.Sleep(time.Millisecond) {
		n, err := done()
		if err != nil {
			return "", err
		}
		if n >= k.n/4 {
			break
		}
		if time.Since(started) > k.cap {
			return "", fmt.Errorf("%d of %d runs finished in %v, before any kill", n, k.n, k.cap)
		}
	}
	if err := children[0].Process.Signal(syscall.SIGKILL); err != nil {
		return "", err
	}
	killed := time.Now()
	atKill, _ := done()
	for {
		n, err := done()
		if err != nil {
			return "", err
		}
		if n >= k.n {
			return fmt.Sprintf("durable kill %s: the survivor finished all %d runs %v after the kill (%d had finished when it came)",
				sys, k.n, time.Since(killed).Round(10*time.Millisecond), atKill), nil
		}
		if time.Since(killed) > k.cap {
			return fmt.Sprintf("durable kill %s: %d of %d runs finished %v after the kill (%d when it came); the rest wait for %s",
				sys, n, k.n, k.cap, atKill, killWaitsFor[sys]), nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killDoneQuery counts each system's finished runs.
var killDoneQuery = map[string]string{
	"cairnq": `SELECT count(*) FROM cairnq_tasks WHERE status = 'succeeded'`,
	"dbos":   `SELECT count(*) FROM dbos.workflow_status WHERE status = 'SUCCESS'`,
	"river":  `SELECT count(*) FROM river_job WHERE state = 'completed'`,
}

// killWaitsFor says what a system's unfinished runs wait for.
var killWaitsFor = map[string]string{
	"cairnq": "their leases to run out",
	"dbos":   "their executor's restart (DBOS recovers a workflow on the executor that ran it, or through its Conductor)",
	"river":  "RescueStuckJobsAfter (an hour by default), then run again from the first step",
}

// killPrepare migrates db for sys before the children open it.
func killPrepare(ctx context.Context, cfg *config, sys string, db *pgadmin.Database) error {
	switch sys {
	case "cairnq":
		_, closeC, err := openKillClient(ctx, db.DSN)
		if err == nil {
			closeC()
		}
		return err
	case "river":
		return riverSetup(ctx, cfg, db, 0)
	case "dbos":
		return nil // the children's Launch migrates
	}
	return fmt.Errorf("unknown durable-kill system %q (cairnq, dbos, river)", sys)
}

// killStart starts the runs from the parent.
func killStart(ctx context.Context, cfg *config, sys, dsn string) error {
	n := cfg.durableKill.n
	switch sys {
	case "cairnq":
		c, closeC, err := openKillClient(ctx, dsn)
		if err != nil {
			return err
		}
		defer closeC()
		items := make([]cairnq.SubmitItem, n)
		for i := range items {
			items[i] = cairnq.SubmitItem{Name: killTask}
		}
		_, err = c.SubmitMany(ctx, items)
		return err
	case "dbos":
		client, err := dbos.NewClient(ctx, dbos.ClientConfig{DatabaseURL: dsn, AppName: "bench-durable-kill", Logger: quietLogger()})
		if err != nil {
			return err
		}
		defer dbos.Shutdown(client, 10*time.Second)
		for i := range n {
			if _, err := dbos.Enqueue[int](client, killQueue, killTask, i); err != nil {
				return err
			}
		}
		return nil
	case "river":
		pool, err := riverPool(ctx, dsn, 4)
		if err != nil {
			return err
		}
		defer pool.Close()
		client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: quietLogger()})
		if err != nil {
			return err
		}
		params := make([]river.InsertManyParams, n)
		for i := range params {
			params[i] = river.InsertManyParams{Args: durableArgs{}}
		}
		_, err = client.InsertMany(ctx, params)
		return err
	}
	return fmt.Errorf("unknown durable-kill system %q", sys)
}

// openKillClient opens a cairnq client on dsn through pgx.
func openKillClient(ctx context.Context, dsn string) (*cairnq.Client, func(), error) {
	ex, err := cairnqpgx.Open(ctx, dsn, nil)
	if err != nil {
		return nil, nil, err
	}
	c, err := cairnq.OpenPostgres(ctx, ex, &cairnq.PostgresOptions{Options: cairnq.Options{Logger: quietLogger()}, CloseExecutor: true})
	if err != nil {
		ex.Close()
		return nil, nil, err
	}
	return c, func() { c.Close() }, nil
}

// runDurableChild is a child of the kill bench: it runs sys's worker on
// its database, prints READY, and runs until killed or its stdin closes.
func runDurableChild(ctx context.Context, k *killConfig) error {
	steps := stepNames(10)
	step := func(context.Context) (int, error) { time.Sleep(killStepTime); return 0, nil }
	var stop func()
	switch k.child {
	case "cairnq":
		c, closeC, err := openKillClient(ctx, k.childDB)
		if err != nil {
			return err
		}
		w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Concurrency: k.childCnc, Logger: quietLogger()})
		if err != nil {
			return err
		}
		_ = w.Handle(killTask, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			for _, name := range steps {
				if _, err := cairnq.Once(ctx, tc, name, step); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}, nil)
		runCtx, cancel := context.WithCancel(ctx)
		stopped := make(chan error, 1)
		go func() { stopped <- w.Run(runCtx) }()
		stop = func() { cancel(); <-stopped; closeC() }
	case "dbos":
		dctx, err := dbos.NewContext(ctx, dbos.Config{AppName: "bench-durable-kill", DatabaseURL: k.childDB, ExecutorID: k.childID, Logger: quietLogger()})
		if err != nil {
			return err
		}
		if _, err := dbos.RegisterQueue(dctx, killQueue, dbos.WithWorkerConcurrency(k.childCnc)); err != nil {
			return err
		}
		dbos.RegisterWorkflow(dctx, func(ctx dbos.Context, in int) (int, error) {
			for _, name := range steps {
				if _, err := dbos.RunAsStep(ctx, step, dbos.WithStepName(name)); err != nil {
					return 0, err
				}
			}
			return in, nil
		}, dbos.WithWorkflowName(killTask))
		if err := dbos.Launch(dctx); err != nil {
			return err
		}
		stop = func() { dbos.Shutdown(dctx, 10*time.Second) }
	case "river":
		pool, err := riverPool(ctx, k.childDB, 8)
		if err != nil {
			return err
		}
		workers := river.NewWorkers()
		river.AddWorker(workers, &durableWorker{steps: steps, step: killStepTime})
		client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
			Logger: quietLogger(), Workers: workers,
			Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: k.childCnc}},
		})
		if err != nil {
			return err
		}
		if err := client.Start(ctx); err != nil {
			return err
		}
		stop = func() { _ = client.Stop(context.Background()); pool.Close() }
	default:
		return fmt.Errorf("unknown --durable-child %q", k.child)
	}
	fmt.Println("READY")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until stdin closes
	stop()
	return nil
}
