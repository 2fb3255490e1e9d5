// Command autoscale scales workers on a queue's depth, read from the
// metrics cairnq's console serves in Prometheus' text format: what a
// Kubernetes autoscaler (KEDA's prometheus trigger, or an HPA on an
// external metric) does with the same series, in one process you can run.
//
// It serves console.MetricsHandler, submits a backlog, then scrapes the
// metrics every 100 ms: it wants one worker per 25 queued tasks (at most
// 4) and starts or stops workers to match, and it raises an alert, as a
// Prometheus rule on cairnq_queue_oldest_due_seconds would, while the
// oldest due task has waited more than a second. It ends once the queue
// is empty and every worker stopped, and checks that every task ran once.
//
// It runs on a SQLite file in a temporary directory, or on Postgres when
// DATABASE_URL is set:
//
//	go run ./examples/autoscale
//	DATABASE_URL=postgres://user:pass@localhost:5432/app?sslmode=disable go run ./examples/autoscale
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/console"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

const (
	queue     = "autoscale"
	backlog   = 200
	perWorker = 25 // queued tasks one worker is wanted for
	most      = 4  // workers at most
	alertAge  = time.Second
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "autoscale: FAILED:", err)
		os.Exit(1)
	}
	fmt.Println("autoscale: ok")
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
	dir, err := os.MkdirTemp("", "autoscale-")
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

	// The metrics, as an application serves them for Prometheus to scrape.
	metrics := console.MetricsHandler(c, nil)
	defer metrics.(interface{ Close() error }).Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: metrics}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/metrics"

	for i := range backlog {
		if _, err := c.Submit(ctx, "resize", i, &cairnq.SubmitOptions{Queue: queue}); err != nil {
			return err
		}
	}
	var ran atomic.Int64
	s := &scaler{c: c, ran: &ran}
	defer s.scaleTo(ctx, 0)

	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	alerting := false
	for {
		queued, running, oldest, err := scrape(ctx, url)
		if err != nil {
			return err
		}
		want := min((queued+perWorker-1)/perWorker, most)
		if want > len(s.workers) {
			fmt.Printf("scaled up to %d workers at a depth of %d\n", want, queued)
		}
		if err := s.scaleTo(ctx, want); err != nil {
			return err
		}
		if firing := oldest > alertAge.Seconds(); firing != alerting {
			alerting = firing
			fmt.Printf("alert CairnqQueueBacklog firing=%v: the oldest due task has waited %.1fs\n", firing, oldest)
		}
		if queued == 0 && running == 0 && len(s.workers) == 0 {
			break
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	fmt.Println("scaled down to 0 workers: the queue is empty")
	stats, err := c.Stats(ctx, queue)
	if err != nil {
		return err
	}
	if got := stats[queue].Succeeded; got != backlog || ran.Load() != backlog {
		return fmt.Errorf("%d tasks succeeded in %d runs, want %d", got, ran.Load(), backlog)
	}
	return nil
}

// scrape reads the queue's depth, running tasks and oldest due age from
// the metrics, with Prometheus' own parser.
func scrape(ctx context.Context, url string) (queued, running int, oldest float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, 0, 0, fmt.Errorf("GET %s: %s", url, res.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		return 0, 0, 0, err
	}
	tasks, ok := families["cairnq_tasks"]
	if !ok {
		return 0, 0, 0, errors.New("no cairnq_tasks in the metrics")
	}
	for _, m := range tasks.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["queue"] != queue {
			continue
		}
		n := int(m.GetGauge().GetValue())
		switch labels["status"] {
		case "queued":
			queued += n
		case "running":
			running += n
		}
	}
	for _, m := range families["cairnq_queue_oldest_due_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "queue" && l.GetValue() == queue {
				oldest = m.GetGauge().GetValue()
			}
		}
	}
	return queued, running, oldest, nil
}

// scaler runs the workers the metrics ask for, each on its own
// goroutine, as the pods of a deployment would be.
type scaler struct {
	c       *cairnq.Client
	ran     *atomic.Int64
	workers []*running
}

type running struct {
	w    *cairnq.Worker
	done chan error
}

// scaleTo starts or stops workers until n run; a stopped worker finishes
// the tasks it holds first.
func (s *scaler) scaleTo(ctx context.Context, n int) error {
	for len(s.workers) < n {
		w, err := cairnq.NewWorker(s.c, &cairnq.WorkerOptions{Queues: []string{queue}, Concurrency: 2})
		if err != nil {
			return err
		}
		w.Handle("resize", func(context.Context, *cairnq.TaskContext) (any, error) {
			s.ran.Add(1)
			time.Sleep(5 * time.Millisecond) // the work
			return nil, nil
		}, nil)
		r := &running{w: w, done: make(chan error, 1)}
		go func() { r.done <- w.Run(context.WithoutCancel(ctx)) }()
		s.workers = append(s.workers, r)
	}
	for len(s.workers) > n {
		r := s.workers[len(s.workers)-1]
		s.workers = s.workers[:len(s.workers)-1]
		if err := r.w.Stop(ctx); err != nil {
			return err
		}
		if err := <-r.done; err != nil {
			return err
		}
	}
	return nil
}
