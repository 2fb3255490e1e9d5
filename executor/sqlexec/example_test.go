package sqlexec_test

import (
	"context"
	"database/sql"
	"log"
	"os"

	_ "github.com/lib/pq"

	"github.com/cairnq/cairnq-go/executor/sqlexec"
)

// An application hands cairnq its own pool, a *sql.DB here. A *sqlx.DB is
// passed the same way: it embeds *sql.DB, so it is a sqlexec.DB as it is
// (the examples module certifies that; sqlx stays out of this module).
func ExampleNew() {
	db, err := sql.Open("postgres", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	exec := sqlexec.New(db, nil)
	defer exec.Close() // leaves db open

	rows, err := exec.Query(context.Background(), "SELECT $1::text AS greeting", "hello")
	if err != nil {
		log.Fatal(err)
	}
	log.Println(rows[0]["greeting"])
}

// cairnq's statements join a transaction the application began, and commit
// or roll back with the application's own writes.
func ExampleTxSession() {
	db, err := sql.Open("postgres", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id) VALUES (1)"); err != nil {
		log.Fatal(err)
	}
	s := sqlexec.TxSession(tx) // hand s to cairnq: its writes ride in tx
	if _, err := s.Query(ctx, "SELECT count(*) AS n FROM orders"); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
}
