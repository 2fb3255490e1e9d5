// Command etl-workflow runs an extract-transform-load job as a workflow:
// one step plans the partitions, adds one extract step per partition
// (fan-out) and a load step that waits for all of them (fan-in); the load
// step reads each extract's result and a report step reads the load's.
//
// Each step is an ordinary task any worker serving its name runs; the
// workflow advances in the transaction of each step's settlement, with no
// leader. The program submits the workflow, runs a worker until it ends,
// prints each step, and checks that every partition was extracted once
// and loaded once.
//
// It runs on a SQLite file in a temporary directory, or on Postgres when
// DATABASE_URL is set:
//
//	go run ./examples/etl-workflow
//	DATABASE_URL=postgres://user:pass@localhost:5432/app?sslmode=disable go run ./examples/etl-workflow
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
)

// queue keeps this example's tasks apart from the other examples'.
const queue = "etl-workflow"

// Partition names one slice of the source to extract.
type Partition struct {
	Region string `json:"region"`
	Day    string `json:"day"`
}

// Extracted is what one extract step hands on.
type Extracted struct {
	Region string `json:"region"`
	Rows   int    `json:"rows"`
}

// Loaded is what the load step hands on.
type Loaded struct {
	Partitions int `json:"partitions"`
	Rows       int `json:"rows"`
}

// The steps' task names, bound to their payload and result types.
var (
	plan    = cairnq.Define[string, []Partition]("etl.plan")
	extract = cairnq.Define[Partition, Extracted]("etl.extract")
	load    = cairnq.Define[[]string, Loaded]("etl.load")
	report  = cairnq.Define[struct{}, string]("etl.report")
)

// source stands in for the system the job reads: the rows of each region.
var source = map[string]int{"eu-west": 1200, "us-east": 3400, "ap-south": 560, "sa-east": 90}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "etl-workflow: FAILED:", err)
		os.Exit(1)
	}
	fmt.Println("etl-workflow: ok")
}

// open opens a client on DATABASE_URL's Postgres database, or on a fresh
// SQLite file when it is unset.
func open(ctx context.Context) (*cairnq.Client, func(), error) {
	if dsn := os.Getenv("DATABASE_URL"); dsn != "" {
		ex, err := cairnqpgx.Open(ctx, dsn, nil)
		if err != nil {
			return nil, nil, err
		}
		c, err := cairnq.OpenPostgres(ctx, ex, &cairnq.PostgresOptions{CloseExecutor: true})
		if err != nil {
			ex.Close()
			return nil, nil, err
		}
		return c, func() { c.Close() }, nil
	}
	dir, err := os.MkdirTemp("", "etl-workflow-")
	if err != nil {
		return nil, nil, err
	}
	c, err := cairnq.Open(ctx, filepath.Join(dir, "tasks.db"), nil)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return c, func() { c.Close(); os.RemoveAll(dir) }, nil
}

func run(ctx context.Context) error {
	c, closeClient, err := open(ctx)
	if err != nil {
		return err
	}
	defer closeClient()

	var mu sync.Mutex
	extracted := map[string]int{} // extract runs per region
	w, err := cairnq.NewWorker(c, &cairnq.WorkerOptions{Queues: []string{queue}, Concurrency: 4})
	if err != nil {
		return err
	}
	onQueue := &cairnq.SubmitOptions{Queue: queue}

	// plan lists the partitions and adds a step per partition, then one
	// that waits for them all. What it adds is written when it succeeds.
	err = plan.Handle(w, func(ctx context.Context, tc *cairnq.TaskContext, day string) ([]Partition, error) {
		var parts []Partition
		var names []string
		for _, region := range []string{"eu-west", "us-east", "ap-south", "sa-east"} {
			p := Partition{Region: region, Day: day}
			parts = append(parts, p)
			names = append(names, "extract-"+region)
			if err := tc.AddSteps(extract.Step("extract-"+region, p, onQueue)); err != nil {
				return nil, err
			}
		}
		// Added steps may wait for each other: load for every extract,
		// report for load.
		if err := tc.AddSteps(load.Step("load", names, onQueue, names...), report.Step("report", struct{}{}, onQueue, "load")); err != nil {
			return nil, err
		}
		return parts, nil
	}, nil)
	if err != nil {
		return err
	}
	err = extract.Handle(w, func(ctx context.Context, tc *cairnq.TaskContext, p Partition) (Extracted, error) {
		mu.Lock()
		extracted[p.Region]++
		mu.Unlock()
		return Extracted{Region: p.Region, Rows: source[p.Region]}, nil
	}, nil)
	if err != nil {
		return err
	}
	// load reads the result of every extract it waited for.
	err = load.Handle(w, func(ctx context.Context, tc *cairnq.TaskContext, steps []string) (Loaded, error) {
		var l Loaded
		for _, s := range steps {
			e, err := cairnq.StepResult[Extracted](ctx, tc, s)
			if err != nil {
				return Loaded{}, err
			}
			l.Partitions++
			l.Rows += e.Rows
		}
		return l, nil
	}, nil)
	if err != nil {
		return err
	}
	err = report.Handle(w, func(ctx context.Context, tc *cairnq.TaskContext, _ struct{}) (string, error) {
		l, err := cairnq.StepResult[Loaded](ctx, tc, "load")
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("loaded %d rows from %d partitions", l.Rows, l.Partitions), nil
	}, nil)
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(runCtx) }()

	// The workflow as submitted is one step; plan adds the rest. (A step
	// submitted up front cannot wait for an added one: what exists when
	// a step is added was decided without it.)
	rec, err := c.CallWorkflow(ctx, []cairnq.WorkflowStep{
		plan.Step("plan", "2026-12-04", onQueue),
	}, nil, &cairnq.WaitOptions{Timeout: time.Minute})
	if err != nil {
		return fmt.Errorf("the ETL workflow: %w", err)
	}
	wf, err := c.GetWorkflow(ctx, rec.ID)
	if err != nil {
		return err
	}
	fmt.Printf("workflow %s %s:\n", wf.ID, wf.Status)
	for _, s := range wf.Steps {
		fmt.Printf("  %-16s %-10s after %v\n", s.Step, s.State, s.After)
	}
	stop()
	if err := <-runErr; err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	for region := range source {
		if extracted[region] != 1 {
			return fmt.Errorf("region %s was extracted %d times, want once", region, extracted[region])
		}
	}
	t, err := c.GetByKey(ctx, cairnq.StepKey(rec.ID, "report"))
	if err != nil {
		return err
	}
	var line string
	if err := t.DecodeResult(&line); err != nil {
		return err
	}
	if want := "loaded 5250 rows from 4 partitions"; line != want {
		return fmt.Errorf("the report says %q, want %q", line, want)
	}
	fmt.Println("report:", line)
	return nil
}
