package examples_test

// The README's Postgres examples. Their bodies are what the README shows
// (the root package's TestReadme compares them); TestReadmeExamples runs
// them on the test server, since an Example with an Output comment would
// fail wherever no Postgres answers.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/conformance/pgserver"
)

// The README's Postgres section: cairnq on the application's own pgx pool.
func Example_postgres() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	c, err := cairnq.OpenPostgres(ctx, cairnqpgx.New(pool, nil), nil) // migrates on first use
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close() // leaves the application's pool open
	t, err := c.Submit(ctx, "render", map[string]int{"page": 1}, &cairnq.SubmitOptions{Queue: "gpu"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.Queue, t.Status)
}

// The README's Transactions section: a task submitted in the
// application's transaction, and settled in one with the handler's writes.
func Example_transactions() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	c, err := cairnq.OpenPostgres(ctx, cairnqpgx.New(pool, nil), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS orders (id bigint PRIMARY KEY, shipped bool NOT NULL DEFAULT false)`); err != nil {
		log.Fatal(err)
	}

	// The order and its task commit together: a rolled-back order has no task.
	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx) // a no-op once committed
	if _, err := tx.Exec(ctx, `INSERT INTO orders (id) VALUES (1) ON CONFLICT DO NOTHING`); err != nil {
		log.Fatal(err)
	}
	t, err := cairnqpgx.SubmitTx(ctx, c, tx, "ship", map[string]int{"order": 1}, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}

	// The handler's writes and the task's success commit together (or neither).
	w, err := cairnq.NewWorker(c, nil)
	if err != nil {
		log.Fatal(err)
	}
	err = w.Handle("ship", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var p struct{ Order int }
		if err := tc.Decode(&p); err != nil {
			return nil, cairnq.Permanent(err)
		}
		return nil, cairnqpgx.SucceedIn(ctx, tc, func(ctx context.Context, tx pgx.Tx) (any, error) {
			_, err := tx.Exec(ctx, `UPDATE orders SET shipped = true WHERE id = $1`, p.Order)
			return map[string]bool{"shipped": true}, err // the task's result
		})
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(runCtx) }()

	done, err := c.Wait(ctx, t.ID, &cairnq.WaitOptions{Timeout: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	var shipped bool
	if err := pool.QueryRow(ctx, `SELECT shipped FROM orders WHERE id = 1`).Scan(&shipped); err != nil {
		log.Fatal(err)
	}
	fmt.Println(done.Status, shipped)

	stop()
	if err := <-stopped; err != nil {
		log.Fatal(err)
	}
}

// The README's Postgres examples run on a fresh database each and print
// what they should. (On failure they log.Fatal, which fails the test
// binary as a whole.)
func TestReadmeExamples(t *testing.T) {
	for _, ex := range []struct {
		name string
		run  func()
		want string
	}{
		{"postgres", Example_postgres, "gpu queued\n"},
		{"transactions", Example_transactions, "succeeded true\n"},
	} {
		t.Run(ex.name, func(t *testing.T) {
			t.Setenv("DATABASE_URL", pgserver.DSN(t))
			if got := captureStdout(t, ex.run); got != ex.want {
				t.Errorf("Example_%s printed %q, want %q", ex.name, got, ex.want)
			}
		})
	}
}

// captureStdout runs fn with os.Stdout going to a pipe and returns what
// it wrote there, as go test does for an Example.
func captureStdout(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	read := make(chan string, 1)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, r)
		read <- b.String()
	}()
	orig := os.Stdout
	os.Stdout = w
	defer func() { os.Stdout = orig }()
	fn()
	os.Stdout = orig
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return <-read
}
