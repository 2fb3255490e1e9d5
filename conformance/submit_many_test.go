package conformance_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqlibpq "github.com/cairnq/cairnq-go/adapters/libpq"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
	"github.com/cairnq/cairnq-go/internal/testkit/pgtest"
)

// The typed SubmitManyTx of pgx and lib/pq (gorm's and bun's run in
// their modules' SubmitTxInAppTransaction): a batch in the application's
// own transaction commits and rolls back with it.
func TestPostgresTypedSubmitManyTx(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	c := pgClient(t, dsn, "")
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	db := openDB(t, "postgres", dsn)
	items := []cairnq.SubmitItem{{Name: "typed"}, {Name: "typed", Options: cairnq.SubmitOptions{Queue: "typed-q"}}}
	check := func(adapter string, tasks []*cairnq.Task, err error, commit func() error, committed bool) {
		t.Helper()
		if err != nil || len(tasks) != 2 {
			t.Fatalf("%s: SubmitManyTx: %v, %v", adapter, tasks, err)
		}
		if err := commit(); err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			_, err := c.Get(ctx, task.ID)
			if committed && err != nil || !committed && !errors.Is(err, cairnq.ErrNotFound) {
				t.Errorf("%s: a task of a batch whose transaction committed=%v: Get says %v", adapter, committed, err)
			}
		}
	}
	for _, committed := range []bool{false, true} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tasks, err := cairnqpgx.SubmitManyTx(ctx, c, tx, items)
		check("pgx", tasks, err, func() error {
			if committed {
				return tx.Commit(ctx)
			}
			return tx.Rollback(ctx)
		}, committed)

		stx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		tasks, err = cairnqlibpq.SubmitManyTx(ctx, c, stx, items)
		check("libpq", tasks, err, func() error {
			if committed {
				return stx.Commit()
			}
			return stx.Rollback()
		}, committed)
	}
}
