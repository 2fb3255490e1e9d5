// Command custom-adapter runs cairnq on an executor written from scratch in
// executor.go: database/sql over pgx's stdlib, in about a hundred lines. It
// submits one task, runs a worker that settles it together with an
// application row (TaskContext.SucceedIn over the adapter's transaction),
// and prints what committed. main_test.go certifies the executor with
// conformance.CertifyExecutor.
//
//	DATABASE_URL=postgres://user:pass@localhost:5432/app?sslmode=disable go run ./examples/custom-adapter
package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver

	cairnq "github.com/cairnq/cairnq-go"
	"github.com/cairnq/cairnq-go/executor"
)

func main() {
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		fmt.Fprintln(os.Stderr, "custom-adapter: DATABASE_URL is not set; point it at a Postgres database, e.g.\n"+
			"  DATABASE_URL=postgres://user:pass@localhost:5432/app?sslmode=disable go run ./examples/custom-adapter")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, dsn); err != nil {
		fmt.Fprintln(os.Stderr, "custom-adapter: FAILED:", err)
		os.Exit(1)
	}
	fmt.Println("custom-adapter: ok")
}

func run(ctx context.Context, dsn string) error {
	db, err := sql.Open("pgx", dsn) // the application's pool
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS custom_adapter_counts (
		task_id text PRIMARY KEY, words int NOT NULL)`); err != nil {
		return err
	}

	client, err := cairnq.OpenPostgres(ctx, New(db), nil)
	if err != nil {
		return err
	}
	defer client.Close()

	w, err := cairnq.NewWorker(client, &cairnq.WorkerOptions{
		Queues: []string{"custom-adapter"}, PollInterval: 50 * time.Millisecond, ShutdownTimeout: 5 * time.Second,
	})
	if err != nil {
		return err
	}
	err = w.Handle("words.count", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var p struct{ Text string }
		if err := tc.Decode(&p); err != nil {
			return nil, cairnq.Permanent(err)
		}
		n := len(strings.Fields(p.Text))
		// The row and the task's success commit in one transaction of the
		// adapter's (Executor.Tx), through the session it hands over.
		return nil, tc.SucceedIn(ctx, func(ctx context.Context, s executor.Session) (any, error) {
			if _, err := s.Query(ctx, "INSERT INTO custom_adapter_counts (task_id, words) VALUES ($1, $2)", tc.ID(), n); err != nil {
				return nil, err
			}
			return map[string]int{"words": n}, nil
		})
	}, nil)
	if err != nil {
		return err
	}
	runCtx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(runCtx) }()

	t, err := client.Call(ctx, "words.count", map[string]string{"text": "an executor is a small seam between cairnq and a driver"},
		&cairnq.CallOptions{SubmitOptions: cairnq.SubmitOptions{Queue: "custom-adapter"}, WaitOptions: cairnq.WaitOptions{Timeout: 30 * time.Second}})
	if err != nil {
		return err
	}
	stopWorker()
	if err := <-runErr; err != nil {
		return fmt.Errorf("worker: %w", err)
	}

	var words int
	if err := db.QueryRowContext(ctx, "SELECT words FROM custom_adapter_counts WHERE task_id = $1", t.ID).Scan(&words); err != nil {
		return fmt.Errorf("the row committed with %s: %w", t.ID, err)
	}
	var res struct{ Words int }
	if err := t.DecodeResult(&res); err != nil {
		return err
	}
	fmt.Printf("task %s %s on the custom executor with result %s; its row committed with it: words=%d\n", t.ID, t.Status, t.Result, words)
	if res.Words != 11 || words != 11 {
		return fmt.Errorf("counted %d words (row %d), want 11", res.Words, words)
	}
	return nil
}
