package cairnqpgx_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	cairnq "github.com/cairnq/cairnq-go"
	cairnqpgx "github.com/cairnq/cairnq-go/adapters/pgx"
)

// cairnq runs on the application's own pool; closing the client leaves
// the pool open unless PostgresOptions.CloseExecutor says otherwise.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	c, err := cairnq.OpenPostgres(ctx, cairnqpgx.New(pool, nil), &cairnq.PostgresOptions{Schema: "public"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	if _, err := c.Submit(ctx, "render", map[string]int{"page": 1}, nil); err != nil {
		log.Fatal(err)
	}
}
