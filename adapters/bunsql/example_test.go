package cairnqbunsql_test

import (
	"context"
	"database/sql"
	"log"
	"os"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/driver/pgdriver"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqbunsql "github.com/cairnq/cairnq-go/adapters/bunsql"
)

// Invoice is the application's model in the example.
type Invoice struct {
	ID     int64 `bun:",pk,autoincrement"`
	TaskID string
	Total  int64
}

// Run cairnq on the application's *bun.DB, submit a task inside the
// application's own transaction, and settle it in the same bun transaction
// that inserts the handler's model.
func Example() {
	ctx := context.Background()
	sqldb := sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(os.Getenv("DATABASE_URL"))))
	db := bun.NewDB(sqldb, pgdialect.New())
	client, err := cairnq.OpenPostgres(ctx, cairnqbunsql.New(db, nil), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	// Transactional enqueue: the task exists only if the order commits.
	err = db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		// ... tx.NewInsert().Model(&order).Exec(ctx) ...
		_, err := cairnqbunsql.SubmitTx(ctx, client, tx, "invoice", map[string]int64{"total": 4200}, nil)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	worker, err := cairnq.NewWorker(client, nil)
	if err != nil {
		log.Fatal(err)
	}
	worker.Handle("invoice", func(ctx context.Context, tc *cairnq.TaskContext) (any, error) {
		var in struct{ Total int64 }
		if err := tc.Decode(&in); err != nil {
			return nil, err
		}
		// The invoice row and the task's success commit together; a lost
		// lease rolls the row back and returns cairnq.ErrLostLease.
		return nil, cairnqbunsql.SucceedIn(ctx, tc, func(ctx context.Context, tx bun.Tx) (any, error) {
			inv := Invoice{TaskID: tc.ID(), Total: in.Total}
			if _, err := tx.NewInsert().Model(&inv).Exec(ctx); err != nil {
				return nil, err
			}
			return map[string]int64{"invoice": inv.ID}, nil
		})
	}, nil)
	if err := worker.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
