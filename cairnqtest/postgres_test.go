package cairnqtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/cairnqtest"
	"github.com/cairnq/cairnq-go/executor"
	"github.com/jackc/pgx/v5"
)

// Parallel tests on one executor each see only their own schema, and
// each schema is gone once its test ended.
func TestPostgresClientsIsolate(t *testing.T) {
	ex := pgExecutor(t)
	ctx := testCtx(t)
	schemas := make(chan string, 4)
	t.Run("group", func(t *testing.T) {
		for i := range 4 {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				scoped, schema := cairnqtest.PostgresSchema(t, ex)
				schemas <- schema
				c, err := cairnq.OpenPostgres(ctx, scoped, &cairnq.PostgresOptions{Schema: schema})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				for j := range i + 1 {
					if _, err := c.Submit(ctx, "job", j, &cairnq.SubmitOptions{Key: "k" + fmt.Sprint(j)}); err != nil {
						t.Fatal(err)
					}
				}
				w := cairnqtest.NewWorker(t, c, nil)
				if err := w.Handle("job", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) { return i, nil }, nil); err != nil {
					t.Fatal(err)
				}
				if got := cairnqtest.Drain(ctx, t, w); len(got) != i+1 {
					t.Fatalf("schema %s drained %d tasks, want %d", schema, len(got), i+1)
				}
				cairnqtest.RequireSubmitted(ctx, t, c, "job", &cairnqtest.Match{Key: "k0", Payload: 0})
				rows, err := ex.Query(ctx, "SELECT count(*) AS n FROM "+schema+".cairnq_tasks")
				if err != nil {
					t.Fatal(err)
				}
				if n, _, _ := executor.Int64(rows[0]["n"]); n != int64(i+1) {
					t.Errorf("schema %s holds %d tasks, want %d", schema, n, i+1)
				}
			})
		}
	})
	close(schemas)
	var names []string
	for s := range schemas {
		if !strings.HasPrefix(s, "cairnqtest_") {
			t.Errorf("schema %q", s)
		}
		names = append(names, s)
	}
	rows, err := ex.Query(ctx, "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'cairnqtest%'")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 4 || len(rows) != 0 {
		t.Fatalf("schemas %v made, %v left after the tests", names, rows)
	}
	// The application's own connections were left as they were.
	rows, err = ex.Query(ctx, "SELECT current_schema() AS s")
	if err != nil {
		t.Fatal(err)
	}
	if s, _, _ := executor.Text(rows[0]["s"]); s != "public" {
		t.Errorf("the pool's schema is now %q", s)
	}
}

// The adapter's typed helpers find the driver's transaction through the
// client's schema, and a transaction the test opens reaches it with SET
// LOCAL search_path.
func TestPostgresClientSharesTransactions(t *testing.T) {
	ex := pgExecutor(t)
	ctx := testCtx(t)
	scoped, schema := cairnqtest.PostgresSchema(t, ex)
	c, err := cairnq.OpenPostgres(ctx, scoped, &cairnq.PostgresOptions{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := scoped.Exec(ctx, "CREATE TABLE invoices (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}

	tx, err := ex.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if _, err := cairnqpgx.SubmitTx(ctx, c, tx, "invoice", 7, nil); err != nil {
		t.Fatal(err)
	}
	cairnqtest.RequireNotSubmitted(ctx, t, c, "invoice", nil) // not committed yet
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	cairnqtest.RequireSubmitted(ctx, t, c, "invoice", &cairnqtest.Match{Payload: 7})

	w := cairnqtest.NewWorker(t, c, nil)
	if err := w.Handle("invoice", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var id int
		if err := tc.Decode(&id); err != nil {
			return nil, err
		}
		return nil, cairnqpgx.SucceedIn(ctx, tc, func(ctx context.Context, tx pgx.Tx) (any, error) {
			_, err := tx.Exec(ctx, "INSERT INTO invoices (id) VALUES ($1)", id)
			return "stored", err
		})
	}, nil); err != nil {
		t.Fatal(err)
	}
	task := cairnqtest.Work(ctx, t, w)
	if task.Status != cairnq.StatusSucceeded || string(task.Result) != `"stored"` {
		t.Fatalf("task %+v", task)
	}
	rows, err := ex.Query(ctx, "SELECT id FROM "+schema+".invoices")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("invoices: %v", rows)
	}
}

func TestPostgresClientOptions(t *testing.T) {
	ex := pgExecutor(t)
	ctx := testCtx(t)
	// Schema is chosen for the test; the executor is never closed by it.
	c := cairnqtest.NewPostgresClient(t, ex, &cairnq.PostgresOptions{Schema: "public", CloseExecutor: true})
	if _, err := c.Submit(ctx, "x", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.Query(ctx, "SELECT 1"); err != nil {
		t.Fatalf("the executor was closed: %v", err)
	}
	rows, err := ex.Query(ctx, "SELECT 1 FROM pg_tables WHERE schemaname = 'public' AND tablename = 'cairnq_tasks'")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 0 {
		t.Error("the client was installed in public")
	}
	record(t, func(tb cairnqtest.TB) { cairnqtest.NewPostgresClient(tb, nil, nil) }).
		mustFail(t, "cairnqtest: PostgresSchema: the executor is nil")
}
