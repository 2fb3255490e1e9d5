package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
)

// The fleet's processes talk over the child's stdin and stdout, one word
// a line: the child prints "READY" once its client is open, starts its
// worker on "GO", prints "RESULT {json}" on "REPORT" (the submit-to-start
// times since the last report) and stops on "STOP" or when its stdin
// closes. It dies with the parent (Pdeathsig, see startFleet).

// fleetName is the task name (cairnq) and job kind (River) of the fleet.
const fleetName = "fleet_task"

// fleetPayload carries the submit time (UnixNano, taken just before the
// submit call) to the handler; zero in a backlog, which records none.
type fleetPayload struct {
	T int64 `json:"t"`
}

// fleetArgs is River's job args for the fleet.
type fleetArgs struct {
	T int64 `json:"t"`
}

func (fleetArgs) Kind() string { return fleetName }

type fleetRiverWorker struct {
	river.WorkerDefaults[fleetArgs]
	rec *startRecorder
}

func (w *fleetRiverWorker) Work(ctx context.Context, job *river.Job[fleetArgs]) error {
	w.rec.record(job.Args.T)
	return nil
}

// startRecorder collects the submit-to-start times of one child.
type startRecorder struct {
	mu  sync.Mutex
	lat []time.Duration
	ran atomic.Int64
}

func (r *startRecorder) record(submitted int64) {
	now := time.Now().UnixNano()
	r.ran.Add(1)
	if submitted == 0 {
		return
	}
	r.mu.Lock()
	r.lat = append(r.lat, time.Duration(now-submitted))
	r.mu.Unlock()
}

func (r *startRecorder) take() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.lat
	r.lat = nil
	return out
}

// childResult is what a child prints on REPORT.
type childResult struct {
	Ran       int64           `json:"ran"`
	Latencies []time.Duration `json:"latencies"`
}

// withAppName returns dsn with application_name set, in either DSN form,
// so that pg_stat_activity tells the fleet's connections apart.
func withAppName(dsn, name string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			q := u.Query()
			q.Set("application_name", name)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return strings.TrimSpace(dsn) + " application_name=" + name
}

// runFleetChild is one process of the fleet: a cairnq Client and Worker
// (pgx adapter) or a River client, at --concurrency.
func runFleetChild(ctx context.Context, cfg *config) error {
	dsn := withAppName(cfg.fleetDB, fleetWorkerApp)
	rec := &startRecorder{}
	var start func(context.Context) error
	var stop func()
	switch cfg.fleetChild {
	case "cairnq":
		ex, err := cairnqpgx.Open(ctx, dsn, &cairnqpgx.Options{MaxConns: int32(cfg.fleetPool)})
		if err != nil {
			return err
		}
		defer ex.Close()
		c, err := cairnq.OpenPostgres(ctx, ex, &cairnq.PostgresOptions{Options: cairnq.Options{Logger: quietLogger()}})
		if err != nil {
			return err
		}
		defer c.Close()
		w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Concurrency: cfg.fleetConc, Logger: quietLogger()})
		if err != nil {
			return err
		}
		if err := w.Handle(fleetName, func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
			var p fleetPayload
			_ = tc.Decode(&p)
			rec.record(p.T)
			return nil, nil
		}, nil); err != nil {
			return err
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		start = func(context.Context) error {
			go func() { done <- w.Run(runCtx) }()
			return nil
		}
		stop = func() {
			cancel()
			<-done
		}
	case "river":
		pool, err := riverPool(ctx, dsn, cfg.fleetPool)
		if err != nil {
			return err
		}
		defer pool.Close()
		workers := river.NewWorkers()
		river.AddWorker(workers, &fleetRiverWorker{rec: rec})
		client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
			Logger:            quietLogger(),
			Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.fleetConc}},
			Workers:           workers,
			FetchCooldown:     cfg.fleetRiverCooldown,
			FetchPollInterval: cfg.fleetRiverPoll,
		})
		if err != nil {
			return err
		}
		start = client.Start
		stop = func() {
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = client.Stop(sctx)
		}
	default:
		return fmt.Errorf("unknown fleet child %q", cfg.fleetChild)
	}
	started := false
	defer func() {
		if started {
			stop()
		}
	}()
	out := bufio.NewWriter(os.Stdout)
	say := func(line string) {
		fmt.Fprintln(out, line)
		out.Flush()
	}
	say("READY")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "GO":
			if err := start(ctx); err != nil {
				return err
			}
			started = true
		case "REPORT":
			b, _ := json.Marshal(childResult{Ran: rec.ran.Load(), Latencies: rec.take()})
			say("RESULT " + string(b))
		case "STOP":
			return nil
		}
	}
	return nil // the parent closed our stdin
}
