package cairnqgorm_test

import (
	"context"
	"log"
	"os"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqgorm "github.com/cairnq/cairnq-go/adapters/gorm"
)

// Invoice is the application's model in the example.
type Invoice struct {
	ID     uint
	TaskID string
	Total  int64
}

// Run cairnq on the application's *gorm.DB, submit a task inside the
// application's own transaction, and settle it in the same gorm
// transaction that writes the handler's model.
func Example() {
	ctx := context.Background()
	db, err := gorm.Open(postgres.Open(os.Getenv("DATABASE_URL")), &gorm.Config{})
	if err != nil {
		log.Fatal(err)
	}
	client, err := cairnq.OpenPostgres(ctx, cairnqgorm.New(db, nil), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	// Transactional enqueue: the task exists only if the order commits.
	err = db.Transaction(func(tx *gorm.DB) error {
		// ... tx.Create(&order) ...
		_, err := cairnqgorm.SubmitTx(ctx, client, tx, "invoice", map[string]int64{"total": 4200}, nil)
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
		return nil, cairnqgorm.SucceedIn(ctx, tc, func(ctx context.Context, tx *gorm.DB) (any, error) {
			inv := Invoice{TaskID: tc.ID(), Total: in.Total}
			if err := tx.Create(&inv).Error; err != nil {
				return nil, err
			}
			return map[string]uint{"invoice": inv.ID}, nil
		})
	}, nil)
	if err := worker.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
