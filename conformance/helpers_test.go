package conformance_test

// The helpers the external tests of this package share: opening a client
// on the test server, running statements on a connection of the test's
// own, running a worker, waiting for a task, and a log buffer.

import (
	"context"
	"testing"
	"time"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/jackc/pgx/v5"
)

// pgClient opens a client through the pgx adapter on dsn, closed with the test.
func pgClient(t *testing.T, dsn string, schema string) *cairnq.Client {
	t.Helper()
	return pgClientWith(t, dsn, &cairnqpgx.Options{Schema: schema})
}

// pgClientWith is pgClient with the adapter's options o, whose Schema the
// client is opened on too.
func pgClientWith(t *testing.T, dsn string, o *cairnqpgx.Options) *cairnq.Client {
	t.Helper()
	ctx := context.Background()
	ex, err := cairnqpgx.Open(ctx, dsn, o)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cairnq.OpenPostgres(ctx, ex, &cairnq.PostgresOptions{Schema: o.Schema, CloseExecutor: true})
	if err != nil {
		ex.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// adminConn opens a connection to dsn of the test's own, outside every
// client's pool; the caller closes it.
func adminConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// adminExec runs one statement on a connection of its own.
func adminExec(t *testing.T, dsn, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn := adminConn(t, dsn)
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
}

// runWorker runs w until the test ends, failing the test if Run returns
// an error.
func runWorker(t *testing.T, w *cairnq.Worker) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
}

// pgWaitTask waits up to 20s for the task id to settle and returns it.
func pgWaitTask(t *testing.T, c *cairnq.Client, id string) *cairnq.Task {
	t.Helper()
	task, err := c.Wait(context.Background(), id, &cairnq.WaitOptions{Timeout: 20 * time.Second, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return task
}
